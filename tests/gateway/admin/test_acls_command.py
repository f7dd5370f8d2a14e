"""``ksgate acls``: kafka-acls.sh's expansion rules, argument checks, and both back ends."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from authz.model import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from gateway.commands.acls import (
    AclsCommandError,
    AclsUsageError,
    AdminBackend,
    add_acls_parser,
    bindings_from_args,
    execute,
    filters_from_args,
    read_properties,
    run_acls_command,
)
from gateway.stores.file_acls import FileAclStore

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ksgate")
    add_acls_parser(parser.add_subparsers(dest="command", required=True))
    return parser


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["acls", *argv])


def topic(name: str, pattern_type: PatternType = LIT) -> ResourcePattern:
    return ResourcePattern(ResourceType.TOPIC, name, pattern_type)


def group(name: str, pattern_type: PatternType = LIT) -> ResourcePattern:
    return ResourcePattern(ResourceType.GROUP, name, pattern_type)


def txn(name: str, pattern_type: PatternType = LIT) -> ResourcePattern:
    return ResourcePattern(ResourceType.TRANSACTIONAL_ID, name, pattern_type)


CLUSTER = ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", LIT)


def acl(pattern: ResourcePattern, principal: str, operation: AclOperation, permission: AclPermissionType = ALLOW,
        host: str = "*") -> AclBinding:
    return AclBinding(pattern, AccessControlEntry(principal, host, operation, permission))


def expand(*argv: str) -> list[AclBinding]:
    return bindings_from_args(parse("--add", *argv))


# --- expansion ----------------------------------------------------------------------------------

def test_plain_operation_on_a_topic_with_the_default_host() -> None:
    assert expand("--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders") == [
        acl(topic("orders"), "User:alice", Op.READ)]


def test_operation_defaults_to_all() -> None:
    assert expand("--allow-principal", "User:alice", "--group", "g") == [acl(group("g"), "User:alice", Op.ALL)]


def test_operation_names_in_any_spelling() -> None:
    bindings = expand("--allow-principal", "User:a", "--cluster", "--operation", "DescribeConfigs",
                      "--operation", "idempotent-write", "--operation", "CLUSTER_ACTION", "--operation", "alter")
    assert [b.entry.operation for b in bindings] == [Op.DESCRIBE_CONFIGS, Op.IDEMPOTENT_WRITE, Op.CLUSTER_ACTION,
                                                      Op.ALTER]
    assert {b.pattern for b in bindings} == {CLUSTER}


def test_producer() -> None:
    assert expand("--allow-principal", "User:alice", "--producer", "--topic", "orders") == [
        acl(topic("orders"), "User:alice", op) for op in (Op.WRITE, Op.DESCRIBE, Op.CREATE)]


def test_producer_idempotent_adds_idempotent_write_on_the_cluster() -> None:
    bindings = expand("--allow-principal", "User:alice", "--producer", "--idempotent", "--topic", "orders")
    assert bindings == [acl(topic("orders"), "User:alice", op) for op in (Op.WRITE, Op.DESCRIBE, Op.CREATE)] + [
        acl(CLUSTER, "User:alice", Op.IDEMPOTENT_WRITE)]


def test_producer_with_transactional_id() -> None:
    bindings = expand("--allow-principal", "User:alice", "--producer", "--topic", "orders",
                      "--transactional-id", "tx-1")
    assert set(bindings) == {acl(topic("orders"), "User:alice", op) for op in (Op.WRITE, Op.DESCRIBE, Op.CREATE)} | {
        acl(txn("tx-1"), "User:alice", op) for op in (Op.WRITE, Op.DESCRIBE)}
    assert len(bindings) == 5  # no IdempotentWrite without --idempotent


def test_prefixed_producer_idempotent_transactional_keeps_the_cluster_literal() -> None:
    bindings = expand("--allow-principal", "User:jane", "--producer", "--idempotent", "--topic", "Test-",
                      "--transactional-id", "tx-", "--resource-pattern-type", "Prefixed")
    assert set(bindings) == (
        {acl(topic("Test-", PRE), "User:jane", op) for op in (Op.WRITE, Op.DESCRIBE, Op.CREATE)}
        | {acl(txn("tx-", PRE), "User:jane", op) for op in (Op.WRITE, Op.DESCRIBE)}
        | {acl(CLUSTER, "User:jane", Op.IDEMPOTENT_WRITE)})
    assert len(bindings) == 6


def test_consumer() -> None:
    bindings = expand("--allow-principal", "User:bob", "--consumer", "--topic", "orders", "--group", "billing")
    assert bindings == [acl(topic("orders"), "User:bob", Op.READ), acl(topic("orders"), "User:bob", Op.DESCRIBE),
                        acl(group("billing"), "User:bob", Op.READ)]


def test_producer_and_consumer_together_merge_on_the_topic() -> None:
    bindings = expand("--allow-principal", "User:svc", "--producer", "--consumer", "--topic", "t", "--group", "g")
    assert set(bindings) == {acl(topic("t"), "User:svc", op) for op in (Op.WRITE, Op.DESCRIBE, Op.CREATE, Op.READ)} | {
        acl(group("g"), "User:svc", Op.READ)}
    assert len(bindings) == 5  # DESCRIBE once


def test_consumer_prefixed_on_several_topics_with_an_allowed_host() -> None:
    bindings = expand("--allow-principal", "User:bob", "--allow-host", "198.51.100.7", "--consumer",
                      "--topic", "a-", "--topic", "b-", "--group", "g-", "--resource-pattern-type", "prefixed")
    assert set(bindings) == {acl(topic(t, PRE), "User:bob", op, host="198.51.100.7")
                             for t in ("a-", "b-") for op in (Op.READ, Op.DESCRIBE)} | {
        acl(group("g-", PRE), "User:bob", Op.READ, host="198.51.100.7")}


def test_principals_operations_hosts_cartesian_product_in_kafka_order() -> None:
    bindings = expand("--allow-principal", "User:Bob", "--allow-principal", "User:Alice",
                      "--allow-host", "198.51.100.0", "--allow-host", "198.51.100.1",
                      "--operation", "Read", "--operation", "Write", "--topic", "Test-topic")
    expected = [acl(topic("Test-topic"), p, op, host=h) for p in ("User:Bob", "User:Alice")
                for op in (Op.READ, Op.WRITE) for h in ("198.51.100.0", "198.51.100.1")]
    assert bindings == expected and len(bindings) == 8


def test_product_over_several_resources() -> None:
    bindings = expand("--allow-principal", "User:a", "--operation", "Describe", "--topic", "t1", "--topic", "t2",
                      "--group", "g", "--transactional-id", "x")
    assert [b.pattern for b in bindings] == [topic("t1"), topic("t2"), group("g"), txn("x")]


def test_allow_everyone_but_deny_one_principal_from_one_host() -> None:
    bindings = expand("--allow-principal", "User:*", "--allow-host", "*", "--deny-principal", "User:BadBob",
                      "--deny-host", "198.51.100.3", "--operation", "Read", "--topic", "Test-topic")
    assert bindings == [acl(topic("Test-topic"), "User:*", Op.READ),
                        acl(topic("Test-topic"), "User:BadBob", Op.READ, DENY, "198.51.100.3")]


def test_deny_host_defaults_to_every_host() -> None:
    assert expand("--deny-principal", "User:mallory", "--operation", "All", "--topic", "*") == [
        acl(topic("*"), "User:mallory", Op.ALL, DENY)]


def test_duplicates_collapse() -> None:
    bindings = expand("--allow-principal", "User:a", "--allow-principal", "User:a", "--operation", "Read",
                      "--operation", "Read", "--topic", "t", "--topic", "t")
    assert bindings == [acl(topic("t"), "User:a", Op.READ)]


def test_other_resource_types() -> None:
    bindings = expand("--allow-principal", "User:a", "--operation", "Describe", "--delegation-token", "tok")
    assert bindings == [acl(ResourcePattern(ResourceType.DELEGATION_TOKEN, "tok"), "User:a", Op.DESCRIBE)]
    bindings = expand("--allow-principal", "User:a", "--operation", "CreateTokens", "--user-principal", "User:b")
    assert bindings == [acl(ResourcePattern(ResourceType.USER, "User:b"), "User:a", Op.CREATE_TOKENS)]


def test_remove_with_principals_targets_exactly_what_add_created() -> None:
    argv = ("--allow-principal", "User:jane", "--producer", "--topic", "Test-", "--resource-pattern-type", "prefixed")
    added = bindings_from_args(parse("--add", *argv))
    assert filters_from_args(parse("--remove", *argv)) == [b.to_filter() for b in added]


def test_remove_without_principals_removes_every_acl_of_the_resource() -> None:
    assert filters_from_args(parse("--remove", "--topic", "t", "--group", "g")) == [
        AclBindingFilter(ResourcePatternFilter(ResourceType.TOPIC, "t", LIT), AccessControlEntryFilter()),
        AclBindingFilter(ResourcePatternFilter(ResourceType.GROUP, "g", LIT), AccessControlEntryFilter())]


def test_remove_without_principals_is_narrowed_by_operations() -> None:
    assert filters_from_args(parse("--remove", "--operation", "Write", "--topic", "t",
                                   "--resource-pattern-type", "match")) == [
        AclBindingFilter(ResourcePatternFilter(ResourceType.TOPIC, "t", PatternType.MATCH),
                         AccessControlEntryFilter(operation=Op.WRITE))]
    filters = filters_from_args(parse("--remove", "--consumer", "--topic", "t", "--group", "g"))
    assert [(f.pattern_filter.resource_type, f.entry_filter.operation) for f in filters] == [
        (ResourceType.TOPIC, Op.READ), (ResourceType.TOPIC, Op.DESCRIBE), (ResourceType.GROUP, Op.READ)]
    assert all(f.entry_filter.principal is None and f.entry_filter.host is None for f in filters)


# --- argument validation ------------------------------------------------------------------------

@pytest.mark.parametrize(("argv", "message"), [
    (("--add", "--allow-principal", "User:a", "--consumer", "--topic", "t"), "--group"),
    (("--add", "--allow-principal", "User:a", "--consumer", "--group", "g"), "--topic"),
    (("--add", "--allow-principal", "User:a", "--operation", "Read"), "at least one resource"),
    (("--add", "--operation", "Read", "--topic", "t"), "--allow-principal or --deny-principal"),
    (("--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"), "not valid"),
    (("--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "any"), "not valid"),
    (("--add", "--allow-principal", "User:a", "--producer"), "with --producer you must specify a --topic"),
    (("--add", "--allow-principal", "User:a", "--idempotent", "--topic", "t"), "only available with --producer"),
    (("--add", "--allow-principal", "User:a", "--producer", "--operation", "Read", "--topic", "t"), "--operation"),
    (("--add", "--allow-principal", "User:a", "--deny-principal", "User:b", "--consumer", "--topic", "t",
      "--group", "g"), "--deny-principal"),
    (("--add", "--allow-principal", "User:a", "--consumer", "--topic", "t", "--group", "g",
      "--transactional-id", "x"), "--transactional-id"),
    (("--add", "--allow-principal", "User:a", "--producer", "--topic", "t", "--group", "g"), "--group"),
    (("--add", "--allow-principal", "User:a", "--producer", "--cluster", "--topic", "t"), "--cluster"),
    (("--add", "--allow-principal", "User:a", "--operation", "IdempotentWrite", "--topic", "t"), "does not support"),
    (("--add", "--allow-principal", "User:a", "--operation", "Read", "--cluster"), "does not support"),
    (("--add", "--allow-principal", "User:a", "--cluster", "--resource-pattern-type", "prefixed"), "--cluster"),
    (("--add", "--allow-host", "10.0.0.1", "--deny-principal", "User:b", "--topic", "t"), "--allow-principal"),
    (("--remove", "--deny-host", "10.0.0.1", "--topic", "t"), "--deny-principal"),
    (("--remove", "--principal", "User:a", "--topic", "t"), "only available with --list"),
    (("--list", "--allow-principal", "User:a"), "cannot be used with --list"),
    (("--list", "--producer", "--topic", "t"), "cannot be used with --list"),
    (("--list", "--operation", "Read"), "cannot be used with --list"),
    (("--list", "--cluster", "--resource-pattern-type", "prefixed"), "--cluster"),
])
def test_usage_errors(argv: tuple[str, ...], message: str, tmp_path: Path,
                      capsys: pytest.CaptureFixture[str]) -> None:
    args = parse("--acl-file", str(tmp_path / "acls.json"), *argv)
    with pytest.raises(SystemExit) as exited:
        run_acls_command(args)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "acls.json").exists()
    if "--add" in argv:
        with pytest.raises(AclsUsageError, match=r"\w"):
            bindings_from_args(args)


@pytest.mark.parametrize("argv", [
    ("--add", "--remove", "--topic", "t"),
    ("--topic", "t"),
    ("--add", "--allow-principal", "alice", "--topic", "t"),
    ("--add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"),
    ("--add", "--allow-principal", "User:a", "--operation", "Any", "--topic", "t"),
    ("--list", "--resource-pattern-type", "exact"),
    ("--add", "--allow-principal", "User:a", "--topic", "  "),
    ("--list", "--timeout", "0"),
])
def test_parse_errors(argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse("--acl-file", "x.json", *argv)
    assert exited.value.code == 2
    assert "error:" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "message"), [
    (("--list",), "one of --bootstrap-server"),
    (("--list", "--acl-file", "a.json", "--bootstrap-server", "h:1"), "not both"),
    (("--list", "--acl-file", "a.json", "--command-config", "admin.properties"), "only be used with --bootstrap"),
])
def test_back_end_choice(argv: tuple[str, ...], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        run_acls_command(parse(*argv))
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_usage_error_without_a_parser_returns_2(capsys: pytest.CaptureFixture[str]) -> None:
    args = parse("--acl-file", "a.json", "--add", "--topic", "t")
    del args.acls_parser
    assert run_acls_command(args) == 2
    assert "--allow-principal" in capsys.readouterr().err


# --- the --acl-file back end, end to end ----------------------------------------------------------

Runner = Callable[..., tuple[int, str, str]]


@pytest.fixture
def acl_file(tmp_path: Path) -> Path:
    return tmp_path / "acls.json"


@pytest.fixture
def run(acl_file: Path, capsys: pytest.CaptureFixture[str]) -> Runner:
    def go(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = run_acls_command(parse("--acl-file", str(acl_file), *argv))
        out, err = capsys.readouterr()
        return code, out, err

    return go


def stored(path: Path) -> set[AclBinding]:
    return set(FileAclStore(path).load())


ORDERS_HEADER = "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:"


def test_add_list_remove_round_trip(run: Runner, acl_file: Path) -> None:
    code, out, err = run("--add", "--allow-principal", "User:alice", "--producer", "--topic", "orders")
    assert (code, err) == (0, "")
    assert out.startswith("Adding ACLs for resource "
                          "`ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:\n"
                          "\t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)\n")
    assert ORDERS_HEADER + "\n" in out  # the listing after the change, as kafka-acls.sh prints it
    assert stored(acl_file) == {acl(topic("orders"), "User:alice", op) for op in (Op.WRITE, Op.DESCRIBE, Op.CREATE)}
    assert json.loads(acl_file.read_text())["acls"][0]["resourceName"] == "orders"
    assert acl_file.stat().st_mode & 0o777 == 0o600

    code, _, _ = run("--add", "--allow-principal", "User:bob", "--consumer", "--topic", "orders", "--group", "billing")
    assert code == 0
    code, _, _ = run("--add", "--deny-principal", "User:eve", "--deny-host", "10.0.0.9", "--operation", "Read",
                     "--topic", "ord", "--resource-pattern-type", "prefixed")
    assert code == 0

    code, out, err = run("--list", "--topic", "orders")
    assert (code, err) == (0, "")
    assert out == (ORDERS_HEADER + "\n"
                   "\t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)\n"
                   "\t(principal=User:alice, host=*, operation=CREATE, permissionType=ALLOW)\n"
                   "\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)\n"
                   "\t(principal=User:bob, host=*, operation=READ, permissionType=ALLOW)\n"
                   "\t(principal=User:bob, host=*, operation=DESCRIBE, permissionType=ALLOW)\n\n")

    _, out, _ = run("--list", "--topic", "orders", "--resource-pattern-type", "match")
    assert ("Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=ord, patternType=PREFIXED)`:\n"
            "\t(principal=User:eve, host=10.0.0.9, operation=READ, permissionType=DENY)\n") in out
    assert ORDERS_HEADER in out and "resourceType=GROUP" not in out

    _, out, _ = run("--list")
    assert out.count("Current ACLs for resource") == 3
    assert "ResourcePattern(resourceType=GROUP, name=billing, patternType=LITERAL)" in out

    _, out, _ = run("--list", "--principal", "User:bob")
    assert out.startswith("ACLs for principal `User:bob`\n")
    assert "User:alice" not in out and "User:eve" not in out and "name=billing" in out

    # remove with a filter: only Bob's READ on the topic
    code, out, err = run("--remove", "--allow-principal", "User:bob", "--operation", "Read", "--topic", "orders")
    assert (code, err) == (0, "")
    removed, _, listing = out.partition("Current ACLs for resource")
    assert removed == ("Removed ACLs for resource "
                       "`ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:\n"
                       "\t(principal=User:bob, host=*, operation=READ, permissionType=ALLOW)\n\n")
    assert "(principal=User:bob, host=*, operation=READ" not in listing
    assert "(principal=User:bob, host=*, operation=DESCRIBE" in listing
    assert acl(topic("orders"), "User:bob", Op.READ) not in stored(acl_file)
    assert len(stored(acl_file)) == 6

    # the same command line with --remove undoes an --add
    assert run("--remove", "--allow-principal", "User:alice", "--producer", "--topic", "orders")[0] == 0
    assert {b.entry.principal for b in stored(acl_file)} == {"User:bob", "User:eve"}

    # a match filter without principals: everything that applies to topic "orders"
    assert run("--remove", "--topic", "orders", "--resource-pattern-type", "match", "--force")[0] == 0
    assert stored(acl_file) == {acl(group("billing"), "User:bob", Op.READ)}


def test_remove_without_principal_but_with_operation_is_narrow(run: Runner, acl_file: Path) -> None:
    run("--add", "--allow-principal", "User:a", "--allow-principal", "User:b", "--operation", "Read",
        "--operation", "Write", "--topic", "t")
    assert run("--remove", "--operation", "Write", "--topic", "t")[0] == 0
    assert stored(acl_file) == {acl(topic("t"), p, Op.READ) for p in ("User:a", "User:b")}
    assert run("--remove", "--topic", "t")[0] == 0
    assert stored(acl_file) == set()
    code, out, err = run("--remove", "--topic", "t")
    assert (code, out, err) == (0, "No ACLs matched: nothing was removed.\n\n", "")


def test_add_is_idempotent(run: Runner, acl_file: Path) -> None:
    argv = ("--add", "--allow-principal", "User:a", "--operation", "Read", "--topic", "t")
    assert run(*argv)[0] == 0 and run(*argv)[0] == 0
    assert len(json.loads(acl_file.read_text())["acls"]) == 1


def test_list_of_a_missing_file(run: Runner, acl_file: Path) -> None:
    code, out, err = run("--list")
    assert (code, out) == (0, "")
    assert "does not exist" in err
    assert not acl_file.exists()


def test_an_invalid_file_is_left_alone(run: Runner, acl_file: Path) -> None:
    acl_file.write_text('{"acls": [{"resourceType": "TOPIC"}]}')
    code, out, err = run("--add", "--allow-principal", "User:a", "--operation", "Read", "--topic", "t")
    assert code == 1 and out == ""
    assert err.startswith("ksgate acls: ") and "acls[0]" in err
    assert acl_file.read_text() == '{"acls": [{"resourceType": "TOPIC"}]}'
    assert run("--list")[0] == 1


def test_unwritable_location(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = parse("--acl-file", str(tmp_path / "missing-dir" / "acls.json"), "--add", "--allow-principal", "User:a",
                 "--operation", "Read", "--topic", "t")
    assert run_acls_command(args) == 1
    assert "cannot write ACL file" in capsys.readouterr().err


def test_external_edit_is_kept(run: Runner, acl_file: Path) -> None:
    FileAclStore(acl_file).add([acl(topic("x"), "User:x", Op.READ)])
    run("--add", "--allow-principal", "User:a", "--operation", "Read", "--topic", "t")
    assert stored(acl_file) == {acl(topic("x"), "User:x", Op.READ), acl(topic("t"), "User:a", Op.READ)}


# --- the --bootstrap-server back end, without a network -----------------------------------------

def test_read_properties(tmp_path: Path) -> None:
    path = tmp_path / "admin.properties"
    path.write_text("# ksgate quickstart client 'admin'\nbootstrap.servers=localhost:9092\n\n"
                    "security.protocol = SASL_SSL\n! java comment\nsasl.password=a=b\n", "utf-8")
    assert read_properties(path) == {"bootstrap.servers": "localhost:9092", "security.protocol": "SASL_SSL",
                                     "sasl.password": "a=b"}
    path.write_text("ok=1\nnot a property\n", "utf-8")
    with pytest.raises(AclsCommandError, match=":2: expected key=value"):
        read_properties(path)
    with pytest.raises(AclsCommandError, match="cannot read"):
        read_properties(tmp_path / "nope")


class FakeAdmin:
    """confluent-kafka's AdminClient ACL calls over an in-memory list, with confluent_kafka.admin types."""

    def __init__(self, backend: AdminBackend) -> None:
        self.backend = backend
        self.acls: list[AclBinding] = []
        self.calls: list[str] = []
        ck: Any = pytest.importorskip("confluent_kafka.admin")
        self.cluster_operations: list[Any] | None = [ck.AclOperation.DESCRIBE, ck.AclOperation.ALTER]

    @staticmethod
    def _done(value: Any) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_result(value)
        return future

    @staticmethod
    def _filter(ck_filter: Any) -> AclBindingFilter:
        restype = ck_filter.restype.name
        return AclBindingFilter(
            ResourcePatternFilter(ResourceType.CLUSTER if restype == "BROKER" else ResourceType[restype],
                                  ck_filter.name, PatternType(ck_filter.resource_pattern_type.value)),
            AccessControlEntryFilter(ck_filter.principal, ck_filter.host, AclOperation(ck_filter.operation.value),
                                     AclPermissionType(ck_filter.permission_type.value)))

    def _to_ck(self, binding: AclBinding) -> Any:
        return self.backend.to_ck_binding(binding)

    def create_acls(self, acls: list[Any], request_timeout: float) -> dict[Any, Future[Any]]:
        self.calls.append("create")
        for ck_binding in acls:
            self.acls.append(AdminBackend.from_ck_binding(ck_binding))
        return {b: self._done(None) for b in acls}

    def describe_acls(self, ck_filter: Any, request_timeout: float) -> Future[Any]:
        self.calls.append("describe")
        wanted = self._filter(ck_filter)
        return self._done([self._to_ck(b) for b in self.acls if wanted.matches(b)])

    def describe_cluster(self, include_authorized_operations: bool, request_timeout: float) -> Future[Any]:
        self.calls.append("describe_cluster")
        return self._done(argparse.Namespace(authorized_operations=self.cluster_operations))

    def poll(self, timeout: float) -> int:
        return 0

    def delete_acls(self, filters: list[Any], request_timeout: float) -> dict[Any, Future[Any]]:
        self.calls.append("delete")
        out = {}
        for ck_filter in filters:
            wanted = self._filter(ck_filter)
            gone = [b for b in self.acls if wanted.matches(b)]
            self.acls = [b for b in self.acls if b not in gone]
            out[ck_filter] = self._done([self._to_ck(b) for b in gone])
        return out


@pytest.fixture
def admin_backend() -> tuple[AdminBackend, FakeAdmin]:
    pytest.importorskip("confluent_kafka")
    backend = AdminBackend("127.0.0.1:1", timeout=1)
    fake = FakeAdmin(backend)
    backend.admin = fake
    return backend, fake


def test_admin_backend_conversions(admin_backend: tuple[AdminBackend, FakeAdmin]) -> None:
    backend, _ = admin_backend
    ck: Any = pytest.importorskip("confluent_kafka.admin")

    for binding in (acl(CLUSTER, "User:a", Op.IDEMPOTENT_WRITE), acl(topic("t-", PRE), "User:b", Op.READ, DENY, "h"),
                    acl(txn("x"), "User:c", Op.WRITE), acl(group("*"), "User:*", Op.ALL)):
        converted = backend.to_ck_binding(binding)
        assert isinstance(converted, ck.AclBinding)
        assert AdminBackend.from_ck_binding(converted) == binding
    assert backend.to_ck_binding(acl(CLUSTER, "User:a", Op.ALTER)).restype == ck.ResourceType.BROKER
    any_filter = backend.to_ck_filter(AclBindingFilter.ANY)
    assert isinstance(any_filter, ck.AclBindingFilter)
    assert (any_filter.restype, any_filter.name, any_filter.principal) == (ck.ResourceType.ANY, None, None)
    with pytest.raises(AclsCommandError, match="use --acl-file"):
        backend.to_ck_binding(acl(ResourcePattern(ResourceType.USER, "User:x"), "User:a", Op.CREATE_TOKENS))


def test_admin_backend_round_trip(admin_backend: tuple[AdminBackend, FakeAdmin],
                                  capsys: pytest.CaptureFixture[str]) -> None:
    backend, fake = admin_backend

    def go(*argv: str) -> str:
        capsys.readouterr()
        execute(parse("--bootstrap-server", "127.0.0.1:1", *argv), backend)
        return capsys.readouterr().out

    out = go("--add", "--allow-principal", "User:alice", "--producer", "--idempotent", "--topic", "orders")
    assert set(fake.acls) == {acl(topic("orders"), "User:alice", op) for op in (Op.WRITE, Op.DESCRIBE, Op.CREATE)} | {
        acl(CLUSTER, "User:alice", Op.IDEMPOTENT_WRITE)}
    assert ORDERS_HEADER in out
    assert "ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL)" in out
    assert fake.calls[0] == "create"
    go("--remove", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "orders")
    assert acl(topic("orders"), "User:alice", Op.WRITE) not in fake.acls and len(fake.acls) == 3
    out = go("--list")
    assert out.count("Current ACLs for resource") == 2
    go("--remove", "--topic", "orders")
    assert fake.acls == [acl(CLUSTER, "User:alice", Op.IDEMPOTENT_WRITE)]


def test_admin_backend_reports_broker_errors(admin_backend: tuple[AdminBackend, FakeAdmin]) -> None:
    backend, _ = admin_backend
    from confluent_kafka import KafkaError, KafkaException

    class Refusing:
        def describe_acls(self, ck_filter: Any, request_timeout: float) -> Future[Any]:
            future: Future[Any] = Future()
            future.set_exception(KafkaException(KafkaError(KafkaError.CLUSTER_AUTHORIZATION_FAILED, "denied")))
            return future

    backend.admin = Refusing()
    with pytest.raises(AclsCommandError, match="DescribeAcls failed: CLUSTER_AUTHORIZATION_FAILED: denied"):
        backend.describe([])


def test_admin_backend_reports_every_failed_creation(admin_backend: tuple[AdminBackend, FakeAdmin]) -> None:
    backend, _ = admin_backend
    from confluent_kafka import KafkaError, KafkaException

    class Refusing:
        def create_acls(self, acls: list[Any], request_timeout: float) -> dict[Any, Future[Any]]:
            out: dict[Any, Future[Any]] = {}
            for ck_binding in acls:
                out[ck_binding] = Future()
                out[ck_binding].set_exception(KafkaException(KafkaError(KafkaError.INVALID_REQUEST, "no")))
            return out

        def delete_acls(self, filters: list[Any], request_timeout: float) -> dict[Any, Future[Any]]:
            future: Future[Any] = Future()
            future.set_exception(KafkaException(KafkaError(KafkaError.INVALID_REQUEST, "no")))
            return {filters[0]: future}

    backend.admin = Refusing()
    with pytest.raises(AclsCommandError) as failed:
        backend.create([acl(topic("t"), "User:a", Op.READ), acl(topic("t"), "User:b", Op.READ)])
    lines = str(failed.value).splitlines()
    assert len(lines) == 2 and all(line.endswith("failed: INVALID_REQUEST: no") for line in lines)
    assert lines[0].startswith("CreateAcls (pattern=ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)")
    with pytest.raises(AclsCommandError, match=r"DeleteAcls \(patternFilter=ResourcePattern\(resourceType=TOPIC, "
                                                r"name=t, patternType=MATCH\), entryFilter=\(principal=null, "):
        backend.delete([AclBindingFilter(ResourcePatternFilter(ResourceType.TOPIC, "t", PatternType.MATCH))])


def test_bootstrap_server_unreachable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Said as such, not as librdkafka's "Failed while waiting for controller" once the timeout is over."""
    pytest.importorskip("confluent_kafka")
    config = tmp_path / "admin.properties"
    config.write_text("# nothing listens there\nsocket.connection.setup.timeout.ms=1000\n", "utf-8")
    args = parse("--bootstrap-server", "127.0.0.1:1", "--command-config", str(config), "--timeout", "20", "--list")
    assert run_acls_command(args) == 1
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith("ksgate acls: cannot connect to 127.0.0.1:1 (") and "Connection refused" in last
    assert "controller" not in last


def test_bad_command_config_property(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("confluent_kafka")
    config = tmp_path / "admin.properties"
    config.write_text("sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required;\n")
    args = parse("--bootstrap-server", "127.0.0.1:1", "--command-config", str(config), "--list")
    assert run_acls_command(args) == 1
    assert "cannot create the admin client" in capsys.readouterr().err


def test_an_empty_describe_is_checked_against_the_cluster_operations(
        admin_backend: tuple[AdminBackend, FakeAdmin]) -> None:
    """librdkafka turns a refused DescribeAcls into an empty list: the cluster's authorized operations tell."""
    backend, fake = admin_backend
    assert backend.describe([]) == [] and fake.calls == ["describe", "describe_cluster"]
    fake.cluster_operations = None  # what a principal without DESCRIBE on the cluster gets
    with pytest.raises(AclsCommandError, match="CLUSTER_AUTHORIZATION_FAILED"):
        backend.describe([])
    fake.acls.append(acl(topic("t"), "User:a", Op.READ))
    fake.calls.clear()
    assert backend.describe([]) == [acl(topic("t"), "User:a", Op.READ)] and fake.calls == ["describe"]
