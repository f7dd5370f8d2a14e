"""A real HAProxy (Debian's package) on loopback for edge tests: TCP mode, TLS passing through, PROXY v2."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

from tests.harness import free_port


class HAProxy:
    """Balances ``frontend`` (127.0.0.1:port) onto ``backend`` with send-proxy-v2 from ``source``."""

    def __init__(self, backend: str, *, port: int | None = None, source: str = "127.0.0.2",
                 send_proxy: bool = True) -> None:
        self.binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
        self.port = port or free_port()
        self.directory = Path(tempfile.mkdtemp(prefix="ksgate-haproxy-"))
        proxy = " send-proxy-v2" if send_proxy else ""
        self.config = self.directory / "haproxy.cfg"
        self.config.write_text(
            "global\n  maxconn 512\n"
            "defaults\n  mode tcp\n  timeout connect 5s\n  timeout client 120s\n  timeout server 120s\n"
            f"frontend edge\n  bind 127.0.0.1:{self.port}\n  default_backend gateways\n"
            f"backend gateways\n  server gw {backend}{proxy} source {source}\n")
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
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    stderr = self.process.stderr.read().decode() if self.process.stderr else ""
                    raise RuntimeError(f"haproxy did not start: {stderr[-2000:]}") from None
                time.sleep(0.05)

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
        shutil.rmtree(self.directory, ignore_errors=True)
