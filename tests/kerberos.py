"""A throwaway MIT Kerberos realm for tests: a real krb5kdc on loopback, principals, keytabs.

Everything lives in one temporary directory and is reached through KRB5_CONFIG, so it
works without /etc/krb5.conf and never touches the machine's own Kerberos setup.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

# The binaries a realm needs; the fixture skips when any is missing.
REQUIRED_BINARIES = ("kdb5_util", "krb5kdc", "kadmin.local", "kinit", "kvno")
_SBIN_DIRS = ("/usr/sbin", "/usr/local/sbin", "/sbin")


def find_binary(name: str) -> str | None:
    """krb5kdc and friends live in sbin, which is often not on a non-root PATH."""
    search = os.pathsep.join([os.environ.get("PATH", ""), *_SBIN_DIRS])
    return shutil.which(name, path=search)


def missing_binaries() -> list[str]:
    return [name for name in REQUIRED_BINARIES if find_binary(name) is None]


class KerberosError(Exception):
    """A krb5 tool failed; carries its output for the test log."""


@dataclass(slots=True, frozen=True)
class KerberosIdentity:
    """One principal with its keytab and (for clients, after kinit) its credential cache."""

    principal: str
    keytab: Path
    ccache: Path

    @property
    def ccache_name(self) -> str:
        return f"FILE:{self.ccache}"


def _free_port() -> int:
    # The KDC listens on TCP and UDP; pick a port free for both (a small race remains,
    # bounded by the readiness check in start()).
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
            tcp.bind(("127.0.0.1", 0))
            port: int = tcp.getsockname()[1]
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
                try:
                    udp.bind(("127.0.0.1", port))
                except OSError:
                    continue
            return port
    raise KerberosError("no free loopback port for the KDC")


class KerberosRealm:
    """A running KDC for ``realm`` on 127.0.0.1; use as a context manager or call close().

    ``time_offset_s`` runs the KDC with a skewed clock (krb5kdc -T), which yields tickets
    whose times are wrong from everyone else's point of view.
    """

    def __init__(self, realm: str = "KSGATE.TEST", *, directory: Path | None = None, time_offset_s: int = 0) -> None:
        self.realm = realm
        self.time_offset_s = time_offset_s
        self._owns_directory = directory is None
        self.directory = Path(tempfile.mkdtemp(prefix="ksgate-krb5-")) if directory is None else directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self.krb5_conf = self.directory / "krb5.conf"
        self.kdc_conf = self.directory / "kdc.conf"
        self.rcache_dir = self.directory / "rcache"
        self.kdc_log = self.directory / "kdc.log"
        self.kdc_port = 0
        self.identities: dict[str, KerberosIdentity] = {}
        self._kdc: subprocess.Popen[bytes] | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self, timeout_s: float = 5.0) -> KerberosRealm:
        self.kdc_port = _free_port()
        self.rcache_dir.mkdir(exist_ok=True)
        self._write_configs()
        master_password = secrets.token_urlsafe(24)
        self._run(["kdb5_util", "-r", self.realm, "-P", master_password, "create", "-s"])
        kdc_cmd = [_require("krb5kdc"), "-n", "-r", self.realm]
        if self.time_offset_s:
            kdc_cmd += ["-T", str(self.time_offset_s)]
        with open(self.kdc_log, "ab") as log:
            self._kdc = subprocess.Popen(
                kdc_cmd, env=self._tool_env(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        try:
            self._wait_until_listening(timeout_s)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        kdc, self._kdc = self._kdc, None
        if kdc is not None and kdc.poll() is None:
            kdc.terminate()
            try:
                kdc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                kdc.kill()
                kdc.wait(timeout=5)
        if self._owns_directory:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> KerberosRealm:
        return self.start() if self._kdc is None else self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- principals --------------------------------------------------------------------------

    def principal(self, name: str) -> str:
        return name if "@" in name else f"{name}@{self.realm}"

    def add_principal(self, name: str, *, keytab: Path | None = None) -> KerberosIdentity:
        """Create ``name`` with a random key and export it to ``keytab`` (default: one per principal).

        Exporting to an existing keytab adds the entry, so one keytab can hold several services.
        """
        principal = self.principal(name)
        safe = principal.replace("/", "_").replace("@", "_")
        keytab = keytab if keytab is not None else self.directory / f"{safe}.keytab"
        self.kadmin(f"addprinc -randkey {principal}")
        self.export_keytab(keytab, principal)
        identity = KerberosIdentity(principal, keytab, self.directory / f"{safe}.ccache")
        self.identities[principal] = identity
        return identity

    def export_keytab(self, keytab: Path, *principals: str) -> Path:
        """Add the current keys of ``principals`` to ``keytab`` without changing them (-norandkey)."""
        for name in principals:
            self.kadmin(f"ktadd -norandkey -k {keytab} {self.principal(name)}")
        return keytab

    def identity(self, name: str) -> KerberosIdentity:
        """A principal added earlier (by any test sharing this realm)."""
        return self.identities[self.principal(name)]

    def add_service(
        self, service: str = "kafka", host: str = "localhost", *, keytab: Path | None = None
    ) -> KerberosIdentity:
        return self.add_principal(f"{service}/{host}", keytab=keytab)

    def add_user(self, name: str, *, kinit: bool = True) -> KerberosIdentity:
        """A client principal with a TGT in its own cache; returns the existing one if already added."""
        existing = self.identities.get(self.principal(name))
        identity = existing if existing is not None else self.add_principal(name)
        if kinit:
            self.kinit(identity)
        return identity

    def kinit(self, identity: KerberosIdentity, *, lifetime: str | None = None) -> None:
        """Obtain a TGT for ``identity`` from its keytab into its own credential cache."""
        cmd = ["kinit", "-k", "-t", str(identity.keytab), "-c", identity.ccache_name]
        if lifetime is not None:
            cmd += ["-l", lifetime]
        self._run([*cmd, identity.principal])

    def get_service_ticket(self, client: KerberosIdentity, service_principal: str) -> None:
        """Put a ticket for ``service_principal`` into the client's cache (so no KDC is needed later)."""
        self._run(["kvno", "-c", client.ccache_name, self.principal(service_principal)])

    def trust(self, other: KerberosRealm) -> None:
        """One-way cross-realm trust: principals of ``other`` may get tickets for this realm's services.

        Both KDCs hold krbtgt/THIS@OTHER with the same key (same password, same default salt).
        """
        password = secrets.token_urlsafe(24)
        for realm in (self, other):
            realm.kadmin(f"addprinc -pw {password} krbtgt/{self.realm}@{other.realm}")

    def kadmin(self, query: str) -> str:
        return self._run(["kadmin.local", "-r", self.realm, "-q", query])

    # -- environment -------------------------------------------------------------------------

    def env(self, *, client: KerberosIdentity | None = None, service: KerberosIdentity | None = None) -> dict[str, str]:
        """The variables a client and/or acceptor process needs to use this realm.

        KRB5_CONFIG is read each time the krb5 library creates a context, so setting it in
        os.environ (monkeypatch.setenv) before the first GSS call is enough in-process.
        """
        env = {"KRB5_CONFIG": str(self.krb5_conf), "KRB5RCACHEDIR": str(self.rcache_dir)}
        if client is not None:
            env["KRB5CCNAME"] = client.ccache_name
            env["KRB5_CLIENT_KTNAME"] = f"FILE:{client.keytab}"
        if service is not None:
            env["KRB5_KTNAME"] = f"FILE:{service.keytab}"
        return env

    # -- internals ---------------------------------------------------------------------------

    def _write_configs(self) -> None:
        d = self.directory
        self.krb5_conf.write_text(krb5_conf_text(self, [self]))
        self.kdc_conf.write_text(
            f"""[kdcdefaults]
    kdc_listen = 127.0.0.1:{self.kdc_port}
    kdc_tcp_listen = 127.0.0.1:{self.kdc_port}

[realms]
    {self.realm} = {{
        database_name = {d}/principal
        key_stash_file = {d}/stash
        acl_file = {d}/kadm5.acl
        kdc_listen = 127.0.0.1:{self.kdc_port}
        kdc_tcp_listen = 127.0.0.1:{self.kdc_port}
        max_life = 10h
        max_renewable_life = 1d
        supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
    }}

[logging]
    kdc = FILE:{d}/kdc-internal.log
    admin_server = FILE:{d}/kadmin.log
    default = FILE:{d}/krb5lib.log
"""
        )
        (d / "kadm5.acl").write_text("")

    def _tool_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KRB5")}
        env.update(self.env())
        env["KRB5_KDC_PROFILE"] = str(self.kdc_conf)
        return env

    def _run(self, cmd: list[str]) -> str:
        done = subprocess.run(
            [_require(cmd[0]), *cmd[1:]],
            env=self._tool_env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
            check=False,
        )
        output = (done.stdout + done.stderr).decode(errors="replace")
        # kadmin.local reports some failures on stderr with exit status 0.
        if done.returncode != 0 or "error" in output.lower() or "cannot" in output.lower():
            raise KerberosError(f"{' '.join(cmd)} failed ({done.returncode}): {output.strip()}")
        return output

    def _wait_until_listening(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            assert self._kdc is not None
            if self._kdc.poll() is not None:
                raise KerberosError(f"krb5kdc exited with {self._kdc.returncode}: {self._log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.kdc_port), timeout=0.2):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise KerberosError(f"krb5kdc did not listen on port {self.kdc_port} within {timeout_s}s")
            # A readiness probe, not synchronisation: the KDC gives no other signal that it is up.
            time.sleep(0.02)

    def _log_tail(self) -> str:
        text = ""
        for log in (self.kdc_log, self.directory / "kdc-internal.log"):
            if log.exists():
                text += log.read_text(errors="replace")[-2000:]
        return text


def krb5_conf_text(default: KerberosRealm, realms: Sequence[KerberosRealm]) -> str:
    """A krb5.conf naming every realm's KDC, with ``default``'s realm as default and for localhost.

    [capaths] lists direct paths between all realms, so cross-realm requests after trust()
    go straight to the target realm instead of MIT's hierarchical guess via ``TEST``.
    """
    stanzas = "".join(f"    {r.realm} = {{\n        kdc = 127.0.0.1:{r.kdc_port}\n    }}\n" for r in realms)
    capaths = "".join(
        f"    {a.realm} = {{\n        {b.realm} = .\n    }}\n" for a in realms for b in realms if a is not b
    )
    d = default.directory
    return f"""[libdefaults]
    default_realm = {default.realm}
    dns_lookup_kdc = false
    dns_lookup_realm = false
    dns_canonicalize_hostname = false
    rdns = false
    udp_preference_limit = 1
    ticket_lifetime = 10h
    forwardable = false
    default_ccache_name = FILE:{d}/default.ccache
    default_keytab_name = FILE:{d}/default.keytab

[realms]
{stanzas}
[domain_realm]
    localhost = {default.realm}

[capaths]
{capaths}"""


def write_shared_krb5_conf(path: Path, default: KerberosRealm, *others: KerberosRealm) -> Path:
    """A krb5.conf for a process that talks to several realms (point KRB5_CONFIG at it)."""
    path.write_text(krb5_conf_text(default, [default, *others]))
    return path


def _require(name: str) -> str:
    path = find_binary(name)
    if path is None:
        raise KerberosError(f"{name} not found (install krb5-kdc, krb5-admin-server and krb5-user)")
    return path

