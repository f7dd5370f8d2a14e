"""A real HAProxy (Debian's package) on loopback for edge tests: TCP mode, TLS passing through, PROXY v2."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from gateway.commands.embedded_broker import free_port


class HAProxy:
    """Balances ``frontend`` (``bind_host``:port) onto ``backend`` with send-proxy-v2 (or v1) from ``source``;
    ``more`` adds (port, backend) pairs, one frontend each on the same bind host."""

    def __init__(self, backend: str, *, port: int | None = None, source: str = "127.0.0.2",
                 send_proxy: bool = True, proxy_version: int = 2, bind_host: str = "127.0.0.1",
                 more: Sequence[tuple[int, str]] = ()) -> None:
        self.binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
        self.port = port or free_port()
        self.directory = Path(tempfile.mkdtemp(prefix="ksgate-haproxy-"))
        self.bind_host = bind_host
        proxy = (" send-proxy-v2" if proxy_version == 2 else " send-proxy") if send_proxy else ""
        self.config = self.directory / "haproxy.cfg"
        routes = "".join(
            f"frontend edge{i}\n  bind {bind_host}:{front}\n  default_backend gateways{i}\n"
            f"backend gateways{i}\n  server gw {back}{proxy} source {source}\n"
            for i, (front, back) in enumerate([(self.port, backend), *more]))
        self.config.write_text(
            "global\n  maxconn 512\n"
            "defaults\n  mode tcp\n  timeout connect 5s\n  timeout client 120s\n  timeout server 120s\n"
            + routes)
        self.process: subprocess.Popen[bytes] | None = None

    @staticmethod
    def available() -> bool:
        return shutil.which("haproxy") is not None or Path("/usr/sbin/haproxy").exists()

    def __enter__(self) -> HAProxy:
        self.process = subprocess.Popen([self.binary, "-db", "-f", str(self.config)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while True:  # listening once a TCP connect succeeds
            try:
                socket.create_connection((self._connect_host(), self.port), timeout=1).close()
                return self
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    stderr = self.process.stderr.read().decode() if self.process.stderr else ""
                    raise RuntimeError(f"haproxy did not start: {stderr[-2000:]}") from None
                time.sleep(0.05)

    def _connect_host(self) -> str:
        # A dual-stack bind on an IPv4-mapped address (``::ffff:127.0.0.5``) is reached over IPv4.
        return self.bind_host.removeprefix("::ffff:")

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
        shutil.rmtree(self.directory, ignore_errors=True)
