"""``ksgate quotas``: kafka-configs' quota options on a gateway's quota store, kafka-configs' output."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gateway.commands.cli import main as ksgate
from gateway.commands.quotas import java_double
from gateway.quotas.model import QuotaEntity
from gateway.stores.file_quotas import FileQuotaStore


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = ksgate(["quotas", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_add_describe_and_delete_a_user_quota(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / "quotas.json")
    code, out, _ = _run(capsys, "--quota-file", path, "--alter", "--add-config",
                        "producer_byte_rate=1048576,request_percentage=50.5", "--entity-type", "users",
                        "--entity-name", "alice")
    assert (code, out) == (0, "Completed updating config for user alice.\n")
    assert FileQuotaStore(path).load() == {QuotaEntity.of([("user", "alice")]): {
        "producer_byte_rate": 1048576.0, "request_percentage": 50.5}}
    code, out, _ = _run(capsys, "--quota-file", path, "--describe", "--entity-type", "users", "--entity-name", "alice")
    assert out == "Quota configs for user-principal 'alice' are producer_byte_rate=1048576.0, request_percentage=50.5\n"
    _run(capsys, "--quota-file", path, "--alter", "--delete-config", "producer_byte_rate,request_percentage",
         "--user", "alice")
    assert FileQuotaStore(path).load() == {}


def test_entities_pair_types_with_names_and_defaults_in_order(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / "quotas.json")
    assert _run(capsys, "--quota-file", path, "--alter", "--add-config", "consumer_byte_rate=100000000",
                "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
                "--entity-default")[0] == 0
    _, out, _ = _run(capsys, "--quota-file", path, "--alter", "--add-config", "producer_byte_rate=2000",
                     "--user-defaults")
    assert out == "Completed updating default config for users in the cluster.\n"
    _run(capsys, "--quota-file", path, "--alter", "--add-config", "connection_creation_rate=10", "--ip", "127.0.0.1")
    _, out, _ = _run(capsys, "--quota-file", path, "--describe")
    assert out == ("Quota configs for the default user-principal are producer_byte_rate=2000.0\n"
                   "Quota configs for user-principal 'alice', the default client-id are consumer_byte_rate=1.0E8\n"
                   "Quota configs for ip '127.0.0.1' are connection_creation_rate=10.0\n")
    _, out, _ = _run(capsys, "--quota-file", path, "--describe", "--entity-type", "users")
    assert out == "Quota configs for the default user-principal are producer_byte_rate=2000.0\n"  # users alone


@pytest.mark.parametrize(("argv", "message"), [
    (["--add-config", "producer_byte_rate=1.5", "--user", "bob"], "producer_byte_rate cannot be a fractional value."),
    (["--add-config", "connection_creation_rate=10", "--user", "bob"],
     "Invalid configuration key connection_creation_rate"),
    (["--add-config", "producer_byte_rate=0", "--client", "c"], "Quota producer_byte_rate must be greater than 0"),
])
def test_kafkas_refusals_change_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                                        message: str) -> None:
    path = tmp_path / "quotas.json"
    code, _, err = _run(capsys, "--quota-file", str(path), "--alter", *argv)
    assert code == 1 and message in err
    assert not path.exists()


@pytest.mark.parametrize(("argv", "message"), [
    (["--alter", "--add-config", "producer_byte_rate=10"], "--alter needs an entity"),
    (["--alter", "--user", "bob"], "--add-config or --delete-config"),
    (["--alter", "--add-config", "producer_byte_rate=x", "--user", "bob"], "not a number"),
    (["--alter", "--add-config", "producer_byte_rate=10", "--ip", "10.0.0.1", "--user", "bob"],
     "IP entity shouldnot be combined"),
    (["--alter", "--add-config", "producer_byte_rate=10", "--entity-type", "users", "--entity-type", "clients",
      "--entity-name", "bob"], "in order"),
    (["--describe", "--add-config", "producer_byte_rate=10"], "go with --alter"),
])
def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                             message: str) -> None:
    with pytest.raises(SystemExit) as exit_:
        ksgate(["quotas", "--quota-file", str(tmp_path / "quotas.json"), *argv])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_config_names_the_gateways_quota_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump({"upstream.bootstrap.servers": "127.0.0.1:9092",
                                      "ksgate.quota.file": str(tmp_path / "q.json")}))
    assert _run(capsys, "--config", str(config), "--alter", "--add-config", "producer_byte_rate=10",
                "--client", "app")[0] == 0
    assert FileQuotaStore(tmp_path / "q.json").load() == {QuotaEntity.of([("client-id", "app")]): {
        "producer_byte_rate": 10.0}}
    config.write_text(yaml.safe_dump({"upstream.bootstrap.servers": "127.0.0.1:9092"}))
    code, _, err = _run(capsys, "--config", str(config), "--describe")
    assert code == 1 and "ksgate.quota.file: not set" in err


@pytest.mark.parametrize(("value", "text"), [(1048576.0, "1048576.0"), (50.5, "50.5"), (1e8, "1.0E8"),
                                             (9.223372036854776e18, "9.223372036854776E18"), (1.5e7, "1.5E7"),
                                             (0.0001, "1.0E-4")])
def test_values_print_as_java_doubles(value: float, text: str) -> None:
    assert java_double(value) == text
