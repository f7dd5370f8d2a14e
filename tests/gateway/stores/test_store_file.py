"""The JSON store files' shared rule (gateway/stores/json_file.py), pinned once for the ACL and quota stores."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from gateway.stores.json_file import StoreFile


class _BadFile(Exception):
    pass


def _decode(data: bytes) -> list[int]:
    try:
        return list(json.loads(data))
    except ValueError as exc:
        raise _BadFile(str(exc)) from None


def _store_file(path: Path) -> StoreFile[list[int]]:
    return StoreFile(path, _decode, error=_BadFile, what="test file", held="items", changing="items",
                     log=logging.getLogger("ksgate.test"))


def test_a_bad_version_is_reported_once_and_refuses_writes_until_fixed(tmp_path: Path,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "s.json"
    file = _store_file(path)
    file.write(b"[1]")
    path.write_bytes(b"[1, 2")
    with caplog.at_level(logging.ERROR, "ksgate.test"):
        assert file.poll(1) is None
        assert file.poll(1) is None
    assert len(caplog.records) == 1
    assert "keeping the 1 items last loaded" in caplog.records[0].getMessage()
    with pytest.raises(_BadFile, match="fix it before changing items"):
        file.ensure_writable()
    path.write_bytes(b"[1, 2, 3]")
    assert file.poll(1) == [1, 2, 3]
    file.ensure_writable()


def test_a_vanished_file_keeps_the_state_and_refuses_writes_until_forgotten(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    file = _store_file(path)
    file.write(b"[1]")
    assert file.poll(1) is None  # our own write is not an external change
    path.unlink()
    assert file.poll(1) is None
    with pytest.raises(_BadFile, match="unreadable or missing"):
        file.ensure_writable()
    file.forget()
    file.ensure_writable()
    assert file.load() is None


def test_load_wraps_a_decode_error_with_the_path(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_bytes(b"{")
    with pytest.raises(_BadFile, match=f"test file {path}"):
        _store_file(path).load()
