"""The generated ``ksgate acls`` and ``kafka-acls.sh`` lines parse into the arguments kafka-acls.sh expects."""

from __future__ import annotations

import argparse
import shlex

import pytest

from authz.model import AclOperation, AclPermissionType, PatternType
from authz.model import ResourceType as RT
from pipeline.least_privilege.acl_scripts import kafka_acls_line, kafka_acls_script, ksgate_acls_line, ksgate_script
from tests.pipeline.events import binding

ORDERS = binding("User:consumer", RT.TOPIC, "orders-", AclOperation.READ, PatternType.PREFIXED)


def test_ksgate_acls_line_for_a_prefixed_topic_read() -> None:
    line = ksgate_acls_line(ORDERS)
    assert line == ('ksgate acls --acl-file "$ACL_FILE" --add --allow-principal User:consumer --operation Read '
                    "--topic orders- --resource-pattern-type prefixed")
    assert shlex.split(line) == ["ksgate", "acls", "--acl-file", "$ACL_FILE", "--add", "--allow-principal",
                                 "User:consumer", "--operation", "Read", "--topic", "orders-",
                                 "--resource-pattern-type", "prefixed"]


def test_kafka_acls_line_has_the_same_arguments_after_the_target() -> None:
    line = kafka_acls_line(ORDERS)
    assert line.startswith('kafka-acls.sh --bootstrap-server "$BOOTSTRAP_SERVER" ')
    kafka, ksgate = shlex.split(line), shlex.split(ksgate_acls_line(ORDERS))
    assert kafka[kafka.index("--add"):] == ksgate[ksgate.index("--add"):]


def test_each_resource_type_uses_kafka_acls_option_names() -> None:
    cases = {
        RT.GROUP: ["--group", "billing"], RT.TRANSACTIONAL_ID: ["--transactional-id", "billing"],
        RT.DELEGATION_TOKEN: ["--delegation-token", "billing"], RT.USER: ["--user-principal", "billing"],
    }
    for resource_type, expected in cases.items():
        args = shlex.split(ksgate_acls_line(binding("User:c", resource_type, "billing", AclOperation.DESCRIBE)))
        assert args[-4:-2] == expected
    cluster = shlex.split(ksgate_acls_line(binding("User:p", RT.CLUSTER, "kafka-cluster",
                                                   AclOperation.IDEMPOTENT_WRITE)))
    assert cluster[-5:] == ["--operation", "IdempotentWrite", "--cluster", "--resource-pattern-type", "literal"]


def test_awkward_names_are_quoted_and_denies_and_hosts_spelled_out() -> None:
    deny = binding("User:CN=app, O=acme", RT.TOPIC, "it's $secret", AclOperation.DESCRIBE_CONFIGS,
                   permission=AclPermissionType.DENY)
    args = shlex.split(ksgate_acls_line(deny, "--remove"))
    assert args[4:] == ["--remove", "--deny-principal", "User:CN=app, O=acme", "--operation", "DescribeConfigs",
                        "--topic", "it's $secret", "--resource-pattern-type", "literal", "--force"]


def test_scripts_default_their_variables_and_keep_the_order() -> None:
    other = binding("User:consumer", RT.GROUP, "billing", AclOperation.READ)
    script = ksgate_script([ORDERS, other], "/etc/ksgate/acls file.json", ["made by a test"])
    lines = script.splitlines()
    assert lines[:4] == ["#!/bin/sh", "# made by a test", "set -eu",
                         "if [ -z \"${ACL_FILE:-}\" ]; then ACL_FILE='/etc/ksgate/acls file.json'; fi"]
    assert lines[-2:] == [ksgate_acls_line(ORDERS), ksgate_acls_line(other)]
    kafka = kafka_acls_script([ORDERS]).splitlines()
    assert "if [ -z \"${BOOTSTRAP_SERVER:-}\" ]; then BOOTSTRAP_SERVER=localhost:9092; fi" in kafka
    assert kafka[-1] == kafka_acls_line(ORDERS)


def test_lines_round_trip_through_the_ksgate_acls_parser() -> None:
    acls_command = pytest.importorskip("gateway.commands.acls")
    parser = argparse.ArgumentParser(prog="ksgate")
    acls_command.add_acls_parser(parser.add_subparsers(dest="command"))
    cases = [ORDERS, binding("User:p", RT.CLUSTER, "kafka-cluster", AclOperation.IDEMPOTENT_WRITE),
             binding("User:CN=a,O=b", RT.GROUP, "g 1", AclOperation.DESCRIBE_CONFIGS),
             binding("User:t", RT.TRANSACTIONAL_ID, "tx-", AclOperation.WRITE, PatternType.PREFIXED),
             binding("User:t", RT.USER, "User:bob", AclOperation.CREATE_TOKENS),
             binding("User:t", RT.DELEGATION_TOKEN, "tok", AclOperation.DESCRIBE)]
    for expected in cases:
        argv = [a if a != "$ACL_FILE" else "acls.json" for a in shlex.split(ksgate_acls_line(expected))[1:]]
        assert acls_command.bindings_from_args(parser.parse_args(argv)) == [expected]
