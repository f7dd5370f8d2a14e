"""Start-up failures a new user meets, as a process: one ``startup_failed`` line naming the cause, exit code 2,
no traceback, and no gateway_started (a listener typo, GSSAPI without its library or its keytab)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gateway.commands.embedded_broker import free_port
from tests.gateway.commands.test_cli_config import json_lines, write

ROOT = Path(__file__).resolve().parents[3]


def run_gateway(config: Path, *pythonpath: Path) -> tuple[int, str]:
    """``python -m gateway run --config CONFIG`` with ``pythonpath`` ahead of the project: (exit code, its one
    start-up error), after checking that it logged nothing else and printed no traceback."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KSGATE_")}
    path = os.pathsep.join([*map(str, pythonpath), str(ROOT)])
    done = subprocess.run([sys.executable, "-m", "gateway", "run", "--config", str(config)], capture_output=True,
                          text=True, timeout=60, cwd=ROOT, env={**clean, "PYTHONPATH": path})
    assert "Traceback" not in done.stderr, done.stderr
    lines = json_lines(done.stderr)
    failures = [line for line in lines if line["event"] == "startup_failed"]
    assert len(failures) == 1 and not [line for line in lines if line["event"] == "gateway_started"], done.stderr
    return done.returncode, str(failures[0]["error"])


def test_a_misspelt_listener_protocol_stops_start_up(tmp_path: Path) -> None:
    config = write(tmp_path / "c.yaml", f"upstream.bootstrap.servers: 127.0.0.1:{free_port()}\n"
                                        f"listeners: SASL_SSSL://127.0.0.1:{free_port()}\n")
    code, error = run_gateway(config)
    assert code == 2 and "SASL_SSSL" in error and "listener.security.protocol.map" in error


def _gssapi_config(tmp_path: Path, keytab: Path) -> Path:
    return write(tmp_path / "c.yaml", f"upstream.bootstrap.servers: 127.0.0.1:{free_port()}\n"
                                      f"listeners: SASL_PLAINTEXT://127.0.0.1:{free_port()}\n"
                                      f"sasl.enabled.mechanisms: GSSAPI\n"
                                      f"ksgate.sasl.kerberos.keytab: {keytab}\n"
                                      f"ksgate.sasl.kerberos.server.host: localhost\n")


def test_gssapi_without_the_gssapi_library_names_the_extra(tmp_path: Path) -> None:
    shim = tmp_path / "shim"  # ahead on the path: `import gssapi` fails as if it were not installed
    (shim / "gssapi").mkdir(parents=True)
    write(shim / "gssapi/__init__.py", 'raise ModuleNotFoundError("No module named \'gssapi\'", name="gssapi")\n')
    keytab = write(tmp_path / "kafka.keytab", "")
    code, error = run_gateway(_gssapi_config(tmp_path, keytab), shim)
    assert code == 2
    assert "GSSAPI needs the gssapi extra" in error and "ksgate[gssapi]" in error and "libkrb5-dev" in error


def test_gssapi_with_a_keytab_that_does_not_exist_stops_start_up(tmp_path: Path) -> None:
    missing = tmp_path / "kafka.keytab"
    code, error = run_gateway(_gssapi_config(tmp_path, missing))
    assert code == 2 and error == f"ksgate.sasl.kerberos.keytab: the keytab {missing} does not exist"


def test_a_tls_upstream_that_does_not_speak_tls_fails_start_up_at_once_saying_so(tmp_path: Path) -> None:
    """Not an empty reason ("cannot connect to upstream …: ") retried for ksgate.upstream.startup.timeout.ms."""
    import socket

    from tests.tls_material import make_ca

    make_ca().write(tmp_path / "ca.pem")
    with socket.create_server(("127.0.0.1", 0)) as plaintext_broker:  # connects complete in the backlog; no TLS
        port = plaintext_broker.getsockname()[1]
        config = write(tmp_path / "c.yaml", f"upstream.bootstrap.servers: 127.0.0.1:{port}\n"
                                            f"upstream.security.protocol: SSL\n"
                                            f"upstream.ssl.truststore.location: {tmp_path / 'ca.pem'}\n"
                                            f"upstream.connect.timeout.ms: 1000\n"
                                            f"listeners: PLAINTEXT://127.0.0.1:{free_port()}\n")
        code, error = run_gateway(config)
    assert code == 2
    assert f"cannot connect to upstream 127.0.0.1:{port}: the TLS handshake did not complete within 1000 ms" in error
    assert "upstream.security.protocol" in error
    assert "attempt" not in error, "retried although the answer cannot change"
