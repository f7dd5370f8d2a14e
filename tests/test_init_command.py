"""``ksgate init --dir``: the files docker-compose.yml's init service creates for the bundled container config.

Checks the layout against configs/docker/ksgate.yaml, that the certificate, the super user and the ACL file are
usable, that the super user's password is random and kept private, and that a second run keeps everything (the
init service runs on every ``up``).
"""

from __future__ import annotations

import ssl
import stat
from pathlib import Path, PurePosixPath

import pytest

from auth.sasl.scram import scram_credential
from gateway.commands.cli import main
from gateway.commands.init import InitLayout
from gateway.config import load_config
from gateway.stores.file_acls import FileAclStore
from gateway.stores.file_users import FileCredentialStore

ROOT = Path(__file__).resolve().parents[1]
IMAGE_ROOT = PurePosixPath("/var/lib/ksgate")  # what the compose init service passes as --dir


def test_init_creates_every_file_the_container_config_reads(tmp_path: Path) -> None:
    assert main(["init", "--dir", str(tmp_path)]) == 0
    config = load_config(ROOT / "configs/docker/ksgate.yaml", env={})
    for key in ("ssl.keystore.location", "ssl.key.location", "ksgate.credentials.file", "ksgate.acl.file"):
        path = PurePosixPath(str(config.settings[key]))
        assert (tmp_path / path.relative_to(IMAGE_ROOT)).is_file(), f"{key}: init did not create {path}"
    assert (tmp_path / "certs/server.key").stat().st_mode & 0o077 == 0, "the private key is readable by others"


def test_the_server_certificate_is_trusted_through_the_ca(tmp_path: Path) -> None:
    main(["init", "--dir", str(tmp_path)])
    context = ssl.create_default_context(cafile=str(tmp_path / "certs/ca.pem"))
    context.load_cert_chain(tmp_path / "certs/server.pem", tmp_path / "certs/server.key")  # key matches cert
    assert any(cert["subject"] == ((("commonName", "ksgate quickstart CA"),),) for cert in context.get_ca_certs())


def test_only_the_super_user_and_no_acls(tmp_path: Path) -> None:
    """Demo users (alice, bob and their ACLs) belong to the quickstart, not to a deployment's first start."""
    main(["init", "--dir", str(tmp_path)])
    config = load_config(ROOT / "configs/docker/ksgate.yaml", env={})
    assert set(FileCredentialStore(tmp_path / "users/users.json").users()) == {"admin"}
    assert "User:admin" in config.super_users
    assert FileAclStore(tmp_path / "acls/acls.json").load() == []


def test_the_super_users_password_is_random_shown_once_and_kept_private(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    passwords = []
    for run in ("a", "b"):
        assert main(["init", "--dir", str(tmp_path / run)]) == 0
        layout = InitLayout(tmp_path / run)
        assert stat.S_IMODE(layout.password_file.stat().st_mode) == 0o600
        password = layout.password_file.read_text("utf-8").strip()
        assert password in capsys.readouterr().out  # shown once, on creation
        passwords.append(password)
    assert passwords[0] != passwords[1] and len(passwords[0]) >= 16
    assert "admin-secret" not in passwords
    assert _password_matches(tmp_path / "a/users/users.json", "admin", passwords[0])
    assert not _password_matches(tmp_path / "a/users/users.json", "admin", "admin-secret")
    main(["init", "--dir", str(tmp_path / "a")])
    assert passwords[0] not in capsys.readouterr().out, "a rerun must not print the password again"


def test_a_second_run_keeps_the_ca_users_and_acls(tmp_path: Path) -> None:
    main(["init", "--dir", str(tmp_path)])
    FileCredentialStore(tmp_path / "users/users.json").upsert_user("alice", "added-by-the-operator")
    files = ("certs/ca.pem", "certs/server.pem", "certs/server.key", "users/users.json", "users/admin.password",
             "acls/acls.json")
    before = {name: (tmp_path / name).read_bytes() for name in files}
    assert main(["init", "--dir", str(tmp_path)]) == 0
    assert {name: (tmp_path / name).read_bytes() for name in files} == before


def _password_matches(users: Path, user: str, password: str) -> bool:
    stored = FileCredentialStore(users).scram_credential(user, "SCRAM-SHA-512")
    assert stored is not None
    return scram_credential("SCRAM-SHA-512", password, stored.salt, stored.iterations) == stored


def test_init_host_issues_a_certificate_for_that_name_and_its_subdomains(tmp_path: Path) -> None:
    assert main(["init", "--dir", str(tmp_path), "--host", "Kafka.Example.COM."]) == 0
    cert, key = tmp_path / "certs/server-kafka.example.com.pem", tmp_path / "certs/server-kafka.example.com.key"
    assert key.stat().st_mode & 0o077 == 0, "the private key is readable by others"
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    client = ssl.create_default_context(cafile=str(tmp_path / "certs/ca.pem"))
    for name in ("kafka.example.com", "broker-1.kafka.example.com"):
        assert _handshake(server, client, name), f"the certificate does not cover {name}"
    assert not _handshake(server, client, "other.example.com")
    # The localhost certificate is still there, signed by the same CA (one ca.pem for clients).
    server.load_cert_chain(tmp_path / "certs/server.pem", tmp_path / "certs/server.key")
    assert _handshake(server, client, "localhost")


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext, name: str) -> bool:
    """Whether a client checking ``name`` against the CA accepts the server's certificate (in memory)."""
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client_side = client.wrap_bio(c_in, c_out, server_hostname=name)
    server_side = server.wrap_bio(s_in, s_out, server_side=True)
    for _ in range(10):
        for side in (client_side, server_side):
            try:
                side.do_handshake()
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLError:
                return False
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        try:
            client_side.do_handshake()
        except ssl.SSLWantReadError:
            continue
        except ssl.SSLError:
            return False
        return True
    return False
