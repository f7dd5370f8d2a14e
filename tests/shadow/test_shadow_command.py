"""``ksgate acls --shadow --config gateway.yaml``: the shadow set managed like the live one, plus --load,
--diff, --clear, --promote and --rollback; every change is an audit event."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from authz.acl_json import decode_acl_file, encode_acl_file
from authz.model import AclOperation
from gateway.commands.cli import build_parser
from tests.authz.helpers import acl

Op = AclOperation
ORDERS, AUDIT, PAYMENTS = acl("orders", Op.WRITE), acl("audit", Op.WRITE), acl("payments", Op.READ)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump({
        "upstream.bootstrap.servers": "127.0.0.1:9", "authorizer.class.name": "StandardAuthorizer",
        "ksgate.acl.file": str(tmp_path / "acls.json"), "ksgate.acl.shadow.file": str(tmp_path / "acls.shadow.json"),
        "ksgate.audit.log.file": str(tmp_path / "audit.log")}))
    (tmp_path / "acls.json").write_bytes(encode_acl_file([ORDERS, AUDIT]))
    return path


def ksgate(config: Path, *argv: str) -> int:
    args = build_parser().parse_args(["acls", "--shadow", "--config", str(config), *argv])
    result: int = args.func(args)
    return result


def acl_changes(config: Path) -> list[dict[str, Any]]:
    log = config.parent / "audit.log"
    return [e for line in log.read_text().splitlines() if (e := json.loads(line))["event"] == "acl_change"]


def test_add_remove_and_list_work_on_the_shadow_set_only(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert ksgate(config, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "payments") == 0
    shadow = decode_acl_file((config.parent / "acls.shadow.json").read_bytes())
    assert shadow == [PAYMENTS]
    assert decode_acl_file((config.parent / "acls.json").read_bytes()) == [ORDERS, AUDIT]  # live untouched
    capsys.readouterr()
    assert ksgate(config, "--list") == 0
    assert "payments" in capsys.readouterr().out
    assert ksgate(config, "--remove", "--allow-principal", "User:alice", "--operation", "Read",
                  "--topic", "payments") == 0
    assert decode_acl_file((config.parent / "acls.shadow.json").read_bytes()) == []
    assert [(e["action"], e["target"], e["added"], e["removed"]) for e in acl_changes(config)] == [
        ("add", "shadow", 1, 0), ("remove", "shadow", 0, 1)]


def test_load_diff_promote_and_rollback(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    candidate = config.parent / "recommended-acls.json"
    candidate.write_bytes(encode_acl_file([ORDERS, PAYMENTS]))
    assert ksgate(config, "--load", str(candidate)) == 0
    capsys.readouterr()
    assert ksgate(config, "--diff") == 0
    diff = capsys.readouterr().out
    adds, removes = diff.split("The shadow set removes")
    assert "payments" in adds and "audit" in removes and "1 ACLs added, 1 removed" in diff

    assert ksgate(config, "--promote") == 0
    assert decode_acl_file((config.parent / "acls.json").read_bytes()) == [ORDERS, PAYMENTS]
    assert not (config.parent / "acls.shadow.json").exists()
    assert ksgate(config, "--rollback") == 0
    assert decode_acl_file((config.parent / "acls.json").read_bytes()) == [ORDERS, AUDIT]

    events = acl_changes(config)
    assert [(e["action"], e["target"]) for e in events] == [("load", "shadow"), ("promote", "live"),
                                                           ("rollback", "live")]
    promote = events[1]
    assert promote["added"] == 1 and promote["removed"] == 1 and "payments" in promote["sample_added"][0]
    assert promote["principal"].startswith("OS:")


def test_clear_and_a_promotion_without_a_shadow_set(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert ksgate(config, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "x") == 0
    assert ksgate(config, "--clear") == 0
    assert not (config.parent / "acls.shadow.json").exists()
    assert ksgate(config, "--promote") == 1
    assert "no shadow ACL set" in capsys.readouterr().err
    assert decode_acl_file((config.parent / "acls.json").read_bytes()) == [ORDERS, AUDIT]


def test_shadow_actions_need_shadow_and_config(config: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        args = build_parser().parse_args(["acls", "--acl-file", str(config.parent / "acls.json"), "--promote"])
        args.func(args)
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit):
        args = build_parser().parse_args(["acls", "--shadow", "--promote"])
        args.func(args)
    with pytest.raises(SystemExit):
        args = build_parser().parse_args(["acls", "--shadow", "--config", str(config), "--promote", "--topic", "x"])
        args.func(args)
