"""``ksgate acls --shadow --config gateway.yaml``: manage the shadow ACL set, compare it, promote it.

``--add``/``--remove``/``--list`` (kafka-acls.sh's options, as for the live set) and ``--load FILE``
change or show the shadow set; ``--diff`` shows what it adds and removes against the live set;
``--clear`` drops it; ``--promote`` makes it the live set at once on every instance and keeps the
replaced live set for ``--rollback``.  Every change is written to the configuration's audit log.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import sys
from collections.abc import Iterator

from authz.acl_json import AclStoreError
from authz.model import (
    AclValidationError,
)
from gateway.commands.acls import (
    AclsCommandError,
    StoreBackend,
    execute,
    format_resource_acls,
    group_by_pattern,
    run_acls_command,
    usage_problem,
)
from gateway.config import ConfigError, GatewayConfig, load_config
from gateway.ops.audit import AuditLog
from gateway.stores.access import uses_security_topic
from gateway.stores.shadow_acls import FileShadowAcls, SetChange, ShadowAclSets, read_acl_file, set_change


def run_acls_or_shadow_command(args: argparse.Namespace) -> int:
    """The ``acls`` command: the shadow set's actions with ``--shadow``, the live set's otherwise."""
    if not getattr(args, "shadow", False):
        return run_acls_command(args)
    problem = usage_problem(args)
    if problem is not None:
        return problem
    try:
        config = load_config(args.config)
        with open_shadow_sets(config) as sets:
            change = run(args, sets)
        if change is not None:
            _audit(config, args, change)
    except (AclsCommandError, AclStoreError, AclValidationError, ConfigError, OSError, ValueError) as exc:
        print(f"ksgate acls: {exc}", file=sys.stderr)
        return 1
    return 0


@contextlib.contextmanager
def open_shadow_sets(config: GatewayConfig) -> Iterator[ShadowAclSets]:
    """The shadow, live and kept ACL sets of the stores ``config`` names."""
    if uses_security_topic(config):
        from gateway.stores.access import replayed_security_topic
        from gateway.stores.shadow_acls import TopicShadowAcls

        with replayed_security_topic(config) as topic:
            yield TopicShadowAcls(topic)
        return
    live, shadow = config.settings["ksgate.acl.file"], config.settings["ksgate.acl.shadow.file"]
    if live is None or shadow is None:
        raise ConfigError("ksgate.acl.shadow.file: the shadow ACL set of a file store needs ksgate.acl.file and "
                          "ksgate.acl.shadow.file in the configuration")
    yield FileShadowAcls(live, shadow)


def run(args: argparse.Namespace, sets: ShadowAclSets) -> tuple[str, str, SetChange] | None:
    """Carry out one shadow action, printing as ``ksgate acls`` does; what it changed (action, set, change)."""
    action = "load" if getattr(args, "load_file", None) else str(args.acls_action)
    if action == "diff":
        print_diff(set_change(sets.live_bindings(), sets.shadow_bindings()))
        return None
    if action in ("add", "remove", "list", "import"):
        before = sets.shadow_bindings()
        execute(args, StoreBackend(sets.shadow))
        return (action, "shadow", set_change(before, sets.shadow_bindings())) if action != "list" else None
    if action == "load":
        change = sets.replace(read_acl_file(args.load_file))
        print(f"Loaded {len(sets.shadow_bindings())} ACLs from {args.load_file} into the shadow set in {sets.where} "
              f"({len(change.added)} added, {len(change.removed)} removed).")
        print_diff(set_change(sets.live_bindings(), sets.shadow_bindings()))
        return (action, "shadow", change)
    if action == "clear":
        change = sets.clear()
        print(f"Cleared the shadow set in {sets.where} ({len(change.removed)} ACLs).")
        return (action, "shadow", change)
    change = sets.promote() if action == "promote" else sets.rollback()
    verb = "Promoted the shadow set to" if action == "promote" else "Rolled back"
    print(f"{verb} the live ACL set: {len(change.added)} ACLs added, {len(change.removed)} removed; "
          f"the replaced live set is kept for --rollback.")
    return (action, "live", change)


def print_diff(change: SetChange) -> None:
    """The bindings the shadow set adds and removes against the live set, in kafka-acls.sh's blocks."""
    for pattern, entries in group_by_pattern(change.added):
        print(format_resource_acls("The shadow set adds ACLs for resource", pattern, entries))
    for pattern, entries in group_by_pattern(change.removed):
        print(format_resource_acls("The shadow set removes ACLs for resource", pattern, entries))
    print(f"Shadow vs live: {len(change.added)} ACLs added, {len(change.removed)} removed.")


def _operator() -> str:
    try:
        return f"OS:{getpass.getuser()}"
    except (KeyError, OSError):  # no name for this uid (a container's)
        return "OS:unknown"


def _audit(config: GatewayConfig, args: argparse.Namespace, done: tuple[str, str, SetChange]) -> None:
    action, target, change = done
    settings = config.settings
    audit = AuditLog(settings["ksgate.audit.log.file"], False, settings["ksgate.audit.log.max.bytes"],
                     settings["ksgate.audit.log.backups"])
    try:
        audit.acl_set_change(operator=_operator(), action=action, target=target,
                             added=[str(b) for b in change.added[:20]], removed=[str(b) for b in change.removed[:20]],
                             added_count=len(change.added), removed_count=len(change.removed))
    finally:
        audit.close()
