"""``ksgate acls --import-from-cluster``: a Kafka cluster's existing ACLs copied into ksgate's ACL file, or
into a running gateway (CreateAcls as its super user), with DescribeAcls on the cluster."""

from __future__ import annotations

import argparse
import uuid
from pathlib import Path

import pytest

from authz.model import AclOperation, AclPermissionType, PatternType, ResourceType
from gateway.commands.acls import add_acls_parser
from gateway.stores.file_acls import FileAclStore
from tests.apache_kafka import KafkaBroker
from tests.gateway.upstream.conftest import JavaGateway

ACLS = "org.apache.kafka.tools.AclCommand"


def _acls(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="ksgate")
    add_acls_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["acls", *argv])
    return int(args.func(args))


def _cluster_properties(kafka: KafkaBroker, directory: Path) -> Path:
    """librdkafka settings for the cluster's SASL_SSL listener as its super user (what an operator has)."""
    path = directory / "cluster-admin.properties"
    config = kafka.client_config("SASL_SSL")
    path.write_text("".join(f"{k}={v}\n" for k, v in config.items() if k != "bootstrap.servers"))
    return path


def _grant_on_kafka(kafka: KafkaBroker, *args: str) -> None:
    kafka.run_tool(ACLS, ["--bootstrap-server", kafka.bootstrap("SASL_SSL"), "--add", *args],
                   kafka.tool_properties())


def test_import_copies_the_clusters_acls_into_an_acl_file(kafka: KafkaBroker, tmp_path: Path) -> None:
    topic, user = f"orders-{uuid.uuid4().hex[:6]}", f"User:imp{uuid.uuid4().hex[:6]}"
    _grant_on_kafka(kafka, "--allow-principal", user, "--operation", "Read", "--operation", "Describe",
                    "--topic", topic)
    _grant_on_kafka(kafka, "--deny-principal", user, "--operation", "Write", "--topic", "orders-",
                    "--resource-pattern-type", "prefixed")
    acl_file = tmp_path / "acls.json"
    assert _acls("--acl-file", str(acl_file), "--import-from-cluster", kafka.bootstrap("SASL_SSL"),
                 "--import-command-config", str(_cluster_properties(kafka, tmp_path))) == 0
    mine = {(b.pattern.resource_type, b.pattern.name, b.pattern.pattern_type, b.entry.operation,
             b.entry.permission_type) for b in FileAclStore(acl_file).load() if b.entry.principal == user}
    assert mine == {
        (ResourceType.TOPIC, topic, PatternType.LITERAL, AclOperation.READ, AclPermissionType.ALLOW),
        (ResourceType.TOPIC, topic, PatternType.LITERAL, AclOperation.DESCRIBE, AclPermissionType.ALLOW),
        (ResourceType.TOPIC, "orders-", PatternType.PREFIXED, AclOperation.WRITE, AclPermissionType.DENY),
    }


def test_import_of_the_acls_of_one_resource_into_a_running_gateway(
        kafka: KafkaBroker, java_gateway: JavaGateway, tmp_path: Path) -> None:
    topic, other = f"demo-imp-{uuid.uuid4().hex[:6]}", f"demo-not-{uuid.uuid4().hex[:6]}"
    _grant_on_kafka(kafka, "--allow-principal", "User:bob", "--operation", "Write", "--topic", topic)
    _grant_on_kafka(kafka, "--allow-principal", "User:bob", "--operation", "Write", "--topic", other)
    # Through the gateway's Admin API as its super user, with the quickstart's librdkafka file.
    assert _acls("--bootstrap-server", java_gateway.bootstrap,
                 "--command-config", str(java_gateway.plan.directory / "admin.properties"),
                 "--import-from-cluster", kafka.bootstrap("SASL_SSL"),
                 "--import-command-config", str(_cluster_properties(kafka, tmp_path)), "--topic", topic) == 0
    in_gateway = {b.pattern.name for b in FileAclStore(java_gateway.plan.directory / "acls.json").load()
                  if b.entry.principal == "User:bob" and b.entry.operation == AclOperation.WRITE}
    assert topic in in_gateway and other not in in_gateway


def test_import_command_config_without_import_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        _acls("--acl-file", str(tmp_path / "a.json"), "--list", "--import-command-config", "x.properties")
    assert exit_info.value.code == 2


@pytest.mark.parametrize("option", [["--allow-principal", "User:x"], ["--operation", "Read"],
                                    ["--principal", "User:x"], ["--list"]])
def test_import_refuses_options_that_would_not_select_what_it_copies(tmp_path: Path, option: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        _acls("--acl-file", str(tmp_path / "a.json"), "--import-from-cluster", "127.0.0.1:1", "--topic", "t", *option)
    assert exit_info.value.code == 2
    assert not (tmp_path / "a.json").exists()
