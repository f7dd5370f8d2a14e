"""``ksgate acls --bootstrap-server`` as a process against a real gateway: errors surface, logins fail fast."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.commands.embedded_broker import EmbeddedBroker
from tests.harness import GatewayThread, secured_gateway

pytest.importorskip("confluent_kafka")
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def acl_gateway(broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    gateway = secured_gateway(broker.bootstrap, tmp_path_factory.mktemp("acls-e2e"),
                              extra={"connection.failed.authentication.delay.ms": 10})
    yield gateway
    gateway.stop()


def acls(gateway: GatewayThread, tmp_path: Path, user: str, password: str,
         *argv: str) -> subprocess.CompletedProcess[str]:
    props = tmp_path / f"{user}.properties"
    props.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                     f"sasl.username={user}\nsasl.password={password}\n", "utf-8")
    return subprocess.run([sys.executable, "-m", "gateway", "acls", "--bootstrap-server", gateway.bootstrap,
                           "--command-config", str(props), *argv], capture_output=True, text=True, timeout=90,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


def failed_logins(gateway: GatewayThread, user: str) -> int:
    lines = (gateway.directory / "audit.log").read_text("utf-8").splitlines()
    events = [json.loads(line) for line in lines]
    return sum(1 for e in events if e["event"] == "authentication" and e["attempted_user"] == user
               and e["decision"] == "FAILED")


def test_list_without_the_right_fails_with_the_authorization_error(acl_gateway: GatewayThread,
                                                                   tmp_path: Path) -> None:
    done = acls(acl_gateway, tmp_path, "alice", "alice-secret", "--list")
    assert done.returncode == 1
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("ksgate acls: DescribeAcls failed: CLUSTER_AUTHORIZATION_FAILED")


def test_add_and_remove_without_the_right_fail(acl_gateway: GatewayThread, tmp_path: Path) -> None:
    done = acls(acl_gateway, tmp_path, "alice", "alice-secret", "--remove", "--topic", "orders", "--force")
    assert done.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in done.stderr


def test_a_wrong_password_fails_at_once_with_one_line_and_few_attempts(acl_gateway: GatewayThread,
                                                                      tmp_path: Path) -> None:
    done = acls(acl_gateway, tmp_path, "alice", "wrong", "--list")
    assert done.returncode == 1
    assert done.stdout == ""
    [line] = done.stderr.splitlines()  # no librdkafka "%3|...|FAIL|" lines
    assert line.startswith("ksgate acls: cannot connect to the cluster: _AUTHENTICATION: ")
    assert "invalid credentials" in line
    # it stopped at the first refusal instead of retrying until its timeout (30 s: ~200 logins)
    assert 1 <= failed_logins(acl_gateway, "alice") <= 3


def test_remove_says_what_it_removed_or_that_nothing_matched(acl_gateway: GatewayThread, tmp_path: Path) -> None:
    admin = ("admin", "admin-secret")
    added = acls(acl_gateway, tmp_path, *admin, "--add", "--allow-principal", "User:bob", "--operation", "Read",
                 "--topic", "e2e-orders")
    assert added.returncode == 0, added.stderr
    removed = acls(acl_gateway, tmp_path, *admin, "--remove", "--topic", "e2e-orders", "--force")
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout == ("Removed ACLs for resource "
                              "`ResourcePattern(resourceType=TOPIC, name=e2e-orders, patternType=LITERAL)`:\n"
                              "\t(principal=User:bob, host=*, operation=READ, permissionType=ALLOW)\n\n")
    again = acls(acl_gateway, tmp_path, *admin, "--remove", "--topic", "e2e-orders", "--force")
    assert (again.returncode, again.stdout, again.stderr) == (0, "No ACLs matched: nothing was removed.\n\n", "")
