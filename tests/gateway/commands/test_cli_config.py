"""``ksgate`` as a process: --version, KSGATE_* validation, flat+nested keys, TLS file errors, one log format."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from gateway.commands.embedded_broker import EmbeddedBroker, free_port
from gateway.config import (
    DEPRECATED_KEYS,
    KNOWN_KEYS,
    ConfigError,
    build_config,
    env_names,
    environment_overrides,
    load_config,
)
from tests.harness import free_port_block

ROOT = Path(__file__).resolve().parents[3]


def ksgate(*argv: str, env: Mapping[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KSGATE_")}
    return subprocess.run([sys.executable, "-m", "gateway", *argv], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env={**clean, "PYTHONPATH": str(ROOT), **(env or {})})


def json_lines(text: str) -> list[dict[str, object]]:
    """Every non-empty line, parsed as JSON (a line that is not JSON fails the test)."""
    parsed = []
    for line in text.splitlines():
        if line.strip():
            try:
                parsed.append(json.loads(line))
            except json.JSONDecodeError:
                pytest.fail(f"not a JSON log line: {line!r}")
    return parsed


def write(path: Path, text: str) -> Path:
    path.write_text(text, "utf-8")
    return path


# --- --version (item 10) ----------------------------------------------------------------------------

def test_version_prints_the_installed_version() -> None:
    import importlib.metadata

    done = ksgate("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"ksgate {importlib.metadata.version('ksgate')}"


def test_license_is_an_spdx_expression_and_setuptools_can_read_it() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    assert project["project"]["license"] == "Apache-2.0"
    requires = " ".join(project["build-system"]["requires"])
    assert "setuptools>=77" in requires  # PEP 639 license expressions


# --- KSGATE_* variables (item 11) -------------------------------------------------------------------

def test_a_misspelt_variable_stops_start_up_naming_it_and_the_closest_key(tmp_path: Path) -> None:
    config = write(tmp_path / "c.yaml", "upstream.bootstrap.servers: 127.0.0.1:1\n")
    done = ksgate("run", "--config", str(config), env={"KSGATE_UPSTREAM_BOOTSTRAP_SERVER": "broker:9092"})
    assert done.returncode == 2
    [line] = json_lines(done.stderr)
    assert line["event"] == "startup_failed" and line["level"] == "error"
    assert "KSGATE_UPSTREAM_BOOTSTRAP_SERVER:" in str(line["error"])
    assert "KSGATE_UPSTREAM_BOOTSTRAP_SERVERS" in str(line["error"])
    assert "'upstream.bootstrap.servers'" in str(line["error"])


def test_ksgate_keys_without_the_doubled_prefix() -> None:
    base = {"KSGATE_UPSTREAM_BOOTSTRAP_SERVERS": "b:9092"}
    short = load_config(None, env={**base, "KSGATE_METRICS_LISTENER": "127.0.0.1:9404"})
    doubled = load_config(None, env={**base, "KSGATE_KSGATE_METRICS_LISTENER": "127.0.0.1:9404"})
    assert short.settings["ksgate.metrics.listener"] == doubled.settings["ksgate.metrics.listener"] == "127.0.0.1:9404"
    with pytest.raises(ConfigError, match="KSGATE_KSGATE_METRICS_LISTENER and as KSGATE_METRICS_LISTENER"):
        load_config(None, env={**base, "KSGATE_METRICS_LISTENER": "a:1", "KSGATE_KSGATE_METRICS_LISTENER": "a:1"})


def test_every_variable_names_one_key() -> None:
    names = [name for key in KNOWN_KEYS for name in env_names(key)]
    assert len(names) == len(set(names))


def test_variables_that_are_not_keys() -> None:
    # Read elsewhere (the Tansu binary) or not ours at all (the test kit's Kafka jars are REFERENCE_KAFKA_LIB, not
    # KSGATE_: every `ksgate run` a test starts sees it): never refused.
    assert environment_overrides({"KSGATE_TANSU_BIN": "/bin/tansu", "REFERENCE_KAFKA_LIB": "/lib", "PATH": "/bin",
                                  "ksgate_x": "1"}) == {}
    with pytest.raises(ConfigError, match=r"listener\.name"):
        environment_overrides({"KSGATE_LISTENER_NAME_SASL_SSL_SSL_KEY_LOCATION": "/k.pem"})


# --- flat and nested (item 12) ----------------------------------------------------------------------

def test_one_key_flat_and_nested_is_an_error_naming_both(tmp_path: Path) -> None:
    config = write(tmp_path / "c.yaml", "upstream.bootstrap.servers: 127.0.0.1:1\nsocket.request.max.bytes: 1024\n"
                                        "socket:\n  request:\n    max.bytes: 2048\n")
    done = ksgate("run", "--config", str(config))
    assert done.returncode == 2
    [line] = json_lines(done.stderr)
    assert line["error"] == ("socket.request.max.bytes: given twice, as 'socket.request.max.bytes' and as "
                             "'socket > request > max.bytes'; keep one")


def test_a_missing_keystore_is_reported_before_its_password(tmp_path: Path) -> None:
    missing = tmp_path / "server.p12"
    config = write(tmp_path / "c.yaml", f"upstream.bootstrap.servers: 127.0.0.1:1\n"
                                        f"listeners: SSL://127.0.0.1:{free_port()}\n"
                                        f"ssl.keystore.location: {missing}\nssl.keystore.password: changeit\n")
    done = ksgate("run", "--config", str(config))
    assert done.returncode == 2
    [line] = json_lines(done.stderr)
    assert line["error"] == f"listener SSL: ssl.keystore.location: {missing} does not exist"


# --- one log format (item 14) -----------------------------------------------------------------------

def test_a_bad_config_logs_its_error_once_as_json(tmp_path: Path) -> None:
    config = write(tmp_path / "c.yaml", "upstream.bootstrap.servers: 127.0.0.1:1\nqueued.max.request: 3\n")
    done = ksgate("run", "--config", str(config))
    assert done.returncode == 2
    assert done.stdout == ""
    lines = json_lines(done.stderr)
    assert [line["event"] for line in lines] == ["startup_failed"]
    assert done.stderr.count("unknown configuration key") == 1


def test_console_format_on_request(tmp_path: Path) -> None:
    config = write(tmp_path / "c.yaml", "upstream.bootstrap.servers: 127.0.0.1:1\nqueued.max.request: 3\n")
    done = ksgate("run", "--config", str(config), "--log-format", "console")
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert "startup_failed" in line and "error=" in line and not line.startswith("{")


def test_console_format_on_a_terminal(tmp_path: Path) -> None:
    import pty

    config = write(tmp_path / "c.yaml", "upstream.bootstrap.servers: 127.0.0.1:1\nqueued.max.request: 3\n")
    leader, follower = pty.openpty()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KSGATE_")}
    try:
        done = subprocess.run([sys.executable, "-m", "gateway", "run", "--config", str(config)], stdout=follower,
                              stderr=follower, timeout=60, cwd=ROOT, env={**clean, "PYTHONPATH": str(ROOT)})
        text = os.read(leader, 65536).decode()
    finally:
        os.close(leader)
        os.close(follower)
    assert done.returncode == 2
    [line] = text.splitlines()
    assert "startup_failed" in line and "unknown configuration key" in line and "{" not in line


def test_a_running_gateway_logs_only_json_lines(tmp_path: Path, broker: EmbeddedBroker) -> None:
    """Its own events, stdlib loggers (the credential store's) and asyncio's: one format."""
    port = free_port()
    config = write(tmp_path / "c.yaml", f"upstream.bootstrap.servers: {broker.bootstrap}\n"
                                        f"listeners: SASL_PLAINTEXT://127.0.0.1:{port}\n"
                                        f"listener.name.sasl_plaintext.node.port.base: {free_port_block()}\n"
                                        f"ksgate.credentials.file: {tmp_path / 'users.json'}\n"
                                        "shutdown.timeout.ms: 2000\n")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KSGATE_")}
    proc = subprocess.Popen([sys.executable, "-m", "gateway", "run", "--config", str(config)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**clean, "PYTHONPATH": str(ROOT), "PYTHONASYNCIODEBUG": "1"})
    try:
        assert proc.stderr is not None
        seen = []
        for line in proc.stderr:  # wait for start-up, the gateway's own readiness signal
            seen.append(line)
            if "gateway_started" in line:
                break
        else:
            pytest.fail(f"the gateway exited before starting: {''.join(seen)}")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()  # never leave a gateway behind
            raise
    lines = json_lines("".join(seen) + err + out)
    assert proc.returncode == 0  # a signal right after start-up drains too
    events = [line["event"] for line in lines]
    assert "gateway_started" in events and "gateway_stopped" in events
    # The credential store logs through the standard library: rendered the same way.
    stdlib = [line for line in lines if line.get("logger") == "ksgate.auth"]
    assert stdlib and "does not exist yet" in str(stdlib[0]["event"])


def test_the_old_login_throttle_keys_are_accepted_and_flagged_as_deprecated() -> None:
    old = {"ksgate.authentication.failures.per.ip": 10, "ksgate.authentication.failures.window.ms": 60000,
           "ksgate.authentication.failures.max.tracked.ips": 100}
    config = build_config({"upstream.bootstrap.servers": "127.0.0.1:9092", **old})
    assert sorted(DEPRECATED_KEYS.keys() & config.raw.keys()) == sorted(old)  # what the gateway warns about at start
    assert all("ksgate.authentication.hash" in hint for hint in DEPRECATED_KEYS.values())


@pytest.mark.parametrize("key, value", [("ksgate.authentication.hash.rate.per.ip", -1),
                                        ("ksgate.authentication.hash.burst.per.ip", 0),
                                        ("ksgate.authentication.hash.queue.per.user", 0),
                                        ("ksgate.authentication.hash.queue.per.ip", 0),
                                        ("ksgate.authentication.hash.max.tracked.ips", 0)])
def test_hash_budget_settings_out_of_range_stop_start_up(key: str, value: int) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        build_config({"upstream.bootstrap.servers": "127.0.0.1:9092", key: value})
