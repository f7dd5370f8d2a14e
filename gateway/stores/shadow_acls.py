"""The shadow ACL set beside the live one, in the file store and in the security topic, and its promotion.

A promotion makes the shadow set the live one in one step every reader sees whole: one file rename
(file store) or one record batch (security topic); the live set it replaces is kept for a rollback.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from authz.acl_json import AclStoreError, decode_acl_file, encode_acl_file
from authz.model import AclBinding, validate_binding
from gateway.stores.file_acls import AclStore, FileAclStore
from gateway.stores.json_file import write_atomically
from gateway.stores.replicated import TopicAclSet, append_acl_records
from gateway.stores.security_records import (
    KIND_ROLLBACK_ACL,
    AppliedRecords,
    StoreRecord,
    acl_record,
    rollback_kept_record,
    shadow_acl_record,
)
from gateway.stores.security_topic import SecurityTopic

ROLLBACK_SUFFIX = ".rollback"


@dataclass(slots=True, frozen=True)
class SetChange:
    """What an operation did to one ACL set (the live one for promote and rollback)."""

    added: list[AclBinding]
    removed: list[AclBinding]


def set_change(before: Iterable[AclBinding], after: Iterable[AclBinding]) -> SetChange:
    old, new = dict.fromkeys(before), dict.fromkeys(after)
    return SetChange([b for b in new if b not in old], [b for b in old if b not in new])


class ShadowAclSets(Protocol):
    """The shadow set (an AclStore for add/remove/list) and the operations between it and the live set."""

    where: str

    @property
    def shadow(self) -> AclStore: ...

    def live_bindings(self) -> list[AclBinding]: ...

    def shadow_bindings(self) -> list[AclBinding]: ...

    def rollback_bindings(self) -> list[AclBinding]: ...

    def replace(self, bindings: Sequence[AclBinding]) -> SetChange:
        """The shadow set becomes exactly ``bindings`` (validated first)."""
        ...

    def clear(self) -> SetChange: ...

    def promote(self) -> SetChange:
        """The shadow set becomes the live one (atomically) and is cleared; the old live set is kept for rollback."""
        ...

    def rollback(self) -> SetChange:
        """The kept set becomes the live one again (atomically); the set it replaces is kept in its place."""
        ...


# --- file store ------------------------------------------------------------------------------------------

class FileShadowStore(FileAclStore):
    """FileAclStore for the shadow file, where a missing file means "no shadow set" (not "keep the last one":
    nothing is enforced from it, and a promotion renames it away)."""

    def reload_if_changed(self) -> bool:
        with self._lock:
            if not self.path.exists():
                if not self._bindings:
                    return False
                self._file.forget()
                self._replace_state([])
                return True
            return super().reload_if_changed()


def _read(path: Path) -> list[AclBinding]:
    try:
        return decode_acl_file(path.read_bytes())
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise AclStoreError(f"cannot read ACL file {path}: {exc}") from exc
    except AclStoreError as exc:
        raise AclStoreError(f"ACL file {path}: {exc}") from None


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FileShadowAcls:
    """ksgate.acl.shadow.file beside ksgate.acl.file; the kept set is ``<ksgate.acl.file>.rollback``.

    Both files must be in one directory (a rename is atomic only within a file system).
    """

    def __init__(self, live_path: str | os.PathLike[str], shadow_path: str | os.PathLike[str]) -> None:
        self.live_path, self.shadow_path = Path(live_path), Path(shadow_path)
        self.rollback_path = self.live_path.with_name(self.live_path.name + ROLLBACK_SUFFIX)
        if self.live_path.resolve().parent != self.shadow_path.resolve().parent:
            raise AclStoreError(f"ksgate.acl.shadow.file {self.shadow_path} must be in the directory of "
                                f"ksgate.acl.file {self.live_path}: a promotion is one rename")
        self.shadow = FileShadowStore(self.shadow_path)
        self.shadow.load()
        self.where = str(self.shadow_path)

    def live_bindings(self) -> list[AclBinding]:
        return _read(self.live_path)

    def shadow_bindings(self) -> list[AclBinding]:
        return _read(self.shadow_path)

    def rollback_bindings(self) -> list[AclBinding]:
        return _read(self.rollback_path)

    def replace(self, bindings: Sequence[AclBinding]) -> SetChange:
        for binding in bindings:
            validate_binding(binding)
        before = self.shadow_bindings()
        write_atomically(self.shadow_path, encode_acl_file(dict.fromkeys(bindings)))
        return set_change(before, bindings)

    def clear(self) -> SetChange:
        before = self.shadow_bindings()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.shadow_path)
        return set_change(before, [])

    def promote(self) -> SetChange:
        shadow = self.shadow_bindings()  # read whole and checked before anything changes
        if not shadow:
            raise AclStoreError(f"there is no shadow ACL set to promote ({self.shadow_path} is missing or empty)")
        live = self.live_bindings()
        write_atomically(self.rollback_path, encode_acl_file(live))
        os.replace(self.shadow_path, self.live_path)  # the one step the gateways see
        _fsync_dir(self.live_path.parent)
        return set_change(live, shadow)

    def rollback(self) -> SetChange:
        if not self.rollback_path.exists():
            raise AclStoreError(f"there is no kept ACL set to roll back to ({self.rollback_path} is missing)")
        kept = self.rollback_bindings()
        live = self.live_bindings()
        os.replace(self.rollback_path, self.live_path)  # the one step the gateways see
        write_atomically(self.rollback_path, encode_acl_file(live))
        return set_change(live, kept)


# --- security topic --------------------------------------------------------------------------------------

class TopicShadowAclStore(TopicAclSet):
    """The shadow ACL set in the security topic (shadow_acl records)."""

    where = " (shadow ACLs)"

    def _present(self) -> Mapping[AclBinding, None]:
        return self._topic.snapshot.shadow_acls

    def _record(self, binding: AclBinding, present: bool) -> StoreRecord:
        return shadow_acl_record(binding, present)

    def _change(self, applied: AppliedRecords) -> tuple[list[AclBinding], list[AclBinding]]:
        return applied.shadow_added, applied.shadow_removed


class TopicShadowAcls:
    """The shadow, live and kept sets in the security topic; each operation is one batch (all or nothing)."""

    def __init__(self, topic: SecurityTopic) -> None:
        self._topic = topic
        self.shadow = TopicShadowAclStore(topic)
        self.where = self.shadow.path

    def live_bindings(self) -> list[AclBinding]:
        return list(self._topic.snapshot.acls)

    def shadow_bindings(self) -> list[AclBinding]:
        return list(self._topic.snapshot.shadow_acls)

    def rollback_bindings(self) -> list[AclBinding]:
        return list(self._topic.snapshot.rollback_acls)

    def replace(self, bindings: Sequence[AclBinding]) -> SetChange:
        for binding in bindings:
            validate_binding(binding)
        change = set_change(self.shadow_bindings(), bindings)
        append_acl_records(self._topic, [shadow_acl_record(b, present=False) for b in change.removed]
                + [shadow_acl_record(b) for b in change.added])
        return change

    def clear(self) -> SetChange:
        change = set_change(self.shadow_bindings(), [])
        append_acl_records(self._topic, [shadow_acl_record(b, present=False) for b in change.removed])
        return change

    def _swap(self, new_live: list[AclBinding], clear_shadow: bool) -> SetChange:
        """One batch: the live set becomes ``new_live``, the kept set the old live set (and the shadow set empty)."""
        snapshot = self._topic.snapshot
        live = list(snapshot.acls)
        change = set_change(live, new_live)
        kept = set_change(snapshot.rollback_acls, live)
        records = [acl_record(b, present=False) for b in change.removed] + [acl_record(b) for b in change.added]
        records += [shadow_acl_record(b, False, KIND_ROLLBACK_ACL) for b in kept.removed]
        records += [shadow_acl_record(b, True, KIND_ROLLBACK_ACL) for b in kept.added]
        records.append(rollback_kept_record())
        if clear_shadow:
            records += [shadow_acl_record(b, present=False) for b in snapshot.shadow_acls]
        append_acl_records(self._topic, records)
        return change

    def promote(self) -> SetChange:
        shadow = self.shadow_bindings()
        if not shadow:
            raise AclStoreError(f"there is no shadow ACL set to promote in {self.where}")
        return self._swap(shadow, clear_shadow=True)

    def rollback(self) -> SetChange:
        if not self._topic.snapshot.rollback_kept:
            raise AclStoreError(f"there is no kept ACL set to roll back to in {self.where}")
        return self._swap(self.rollback_bindings(), clear_shadow=False)


def read_acl_file(path: str | os.PathLike[str]) -> list[AclBinding]:
    """An ACL file for ``--load`` (e.g. ``ksgate audit recommend``'s recommended-acls.json); it must exist."""
    file = Path(path)
    if not file.exists():
        raise AclStoreError(f"{file} does not exist")
    return _read(file)
