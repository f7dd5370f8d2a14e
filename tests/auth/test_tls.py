"""Listener TLS settings (Kafka's ssl.* keys) and the server SSLContext built from them."""

from __future__ import annotations

import ssl
import tempfile
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.serialization import Encoding

from auth.tls import ClientAuth, ListenerTlsSettings, TlsConfigError, TlsContextProvider, build_server_context
from tests.tls_material import CertificateAuthority, TlsFiles, issue_cert, make_ca, write_tls_material

PASSWORD = b"changeit"


@pytest.fixture
def ca() -> CertificateAuthority:
    return make_ca()


@pytest.fixture
def files(tmp_path: Path, ca: CertificateAuthority) -> TlsFiles:
    return write_tls_material(tmp_path, ca=ca, pkcs12_password=PASSWORD)


def pem(files: TlsFiles, **extra: Any) -> dict[str, Any]:
    return {"ssl.keystore.location": str(files.server_cert), "ssl.key.location": str(files.server_key),
            "ssl.truststore.location": str(files.ca), **{k.replace("_", "."): v for k, v in extra.items()}}


def test_defaults_are_kafkas() -> None:
    settings = ListenerTlsSettings.from_config({"ssl.keystore.location": "/x/server.pem"})
    assert settings.enabled_protocols == ("TLSv1.2", "TLSv1.3")
    assert settings.client_auth is ClientAuth.NONE
    assert settings.keystore_type == settings.truststore_type == "PEM"
    assert settings.cipher_suites == ()
    assert not settings.allow_dn_changes and not settings.allow_san_changes


def test_unset_keys_given_as_none_take_their_defaults() -> None:
    # The gateway's config passes every known key, None when unset.
    config = {key: None for key in ("ssl.keystore.type", "ssl.key.location", "ssl.client.auth",
                                    "ssl.enabled.protocols", "ssl.cipher.suites", "ssl.allow.dn.changes")}
    settings = ListenerTlsSettings.from_config({**config, "ssl.keystore.location": "/x/server.pem"})
    assert settings == ListenerTlsSettings(Path("/x/server.pem"))


@pytest.mark.parametrize(("value", "mode"), [
    ("none", ssl.CERT_NONE), ("requested", ssl.CERT_OPTIONAL), ("required", ssl.CERT_REQUIRED),
    ("REQUIRED", ssl.CERT_REQUIRED),
])
def test_client_auth_modes_map_to_openssl_verify_modes(files: TlsFiles, value: str, mode: ssl.VerifyMode) -> None:
    built = build_server_context(ListenerTlsSettings.from_config(pem(files, ssl_client_auth=value)))
    assert built.context.verify_mode == mode


def test_tls_1_2_is_the_minimum_unless_configured_otherwise(files: TlsFiles) -> None:
    context = build_server_context(ListenerTlsSettings.from_config(pem(files))).context
    assert (context.minimum_version, context.maximum_version) == (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3)
    only13 = build_server_context(ListenerTlsSettings.from_config(pem(files, ssl_enabled_protocols="TLSv1.3")))
    assert only13.context.minimum_version == ssl.TLSVersion.TLSv1_3


def test_server_identity_is_read_from_the_leaf_certificate(files: TlsFiles) -> None:
    built = build_server_context(ListenerTlsSettings.from_config(pem(files)))
    assert built.subject == "CN=localhost"
    assert built.subject_alt_names == {("DNSName", "localhost"), ("IPAddress", "127.0.0.1")}


def test_pem_key_may_sit_in_the_keystore_file(files: TlsFiles, tmp_path: Path) -> None:
    combined = tmp_path / "combined.pem"
    combined.write_bytes(files.server_key.read_bytes() + files.server_cert.read_bytes())
    built = build_server_context(ListenerTlsSettings.from_config({"ssl.keystore.location": str(combined)}))
    assert built.subject == "CN=localhost"


def test_encrypted_pem_key_is_opened_with_ssl_key_password(ca: CertificateAuthority, tmp_path: Path) -> None:
    server = issue_cert(ca)
    server.write_pem(tmp_path / "s.pem", tmp_path / "s.key", password=PASSWORD)
    config = {"ssl.keystore.location": str(tmp_path / "s.pem"), "ssl.key.location": str(tmp_path / "s.key")}
    build_server_context(ListenerTlsSettings.from_config({**config, "ssl.key.password": PASSWORD.decode()}))
    with pytest.raises(TlsConfigError, match=r"ssl\.key\.password"):
        build_server_context(ListenerTlsSettings.from_config(config))
    with pytest.raises(TlsConfigError, match=r"wrong ssl\.key\.password"):
        build_server_context(ListenerTlsSettings.from_config({**config, "ssl.key.password": "nope"}))


def test_pkcs12_keystore_and_truststore_are_loaded(files: TlsFiles, ca: CertificateAuthority, tmp_path: Path) -> None:
    assert files.server_pkcs12 is not None
    truststore = ca.write_pkcs12_truststore(tmp_path / "trust.p12", PASSWORD)
    settings = ListenerTlsSettings.from_config({
        "ssl.keystore.location": str(files.server_pkcs12), "ssl.keystore.type": "PKCS12",
        "ssl.keystore.password": PASSWORD.decode(),
        "ssl.truststore.location": str(truststore), "ssl.truststore.type": "pkcs12",
        "ssl.truststore.password": PASSWORD.decode(), "ssl.client.auth": "required",
    })
    built = build_server_context(settings)
    assert built.subject == "CN=localhost"
    assert [c["subject"] for c in built.context.get_ca_certs()] == [((("commonName", "ksgate throwaway CA"),),)]


def test_pkcs12_keystore_with_wrong_password_is_rejected(files: TlsFiles) -> None:
    settings = ListenerTlsSettings.from_config({
        "ssl.keystore.location": str(files.server_pkcs12), "ssl.keystore.type": "PKCS12",
        "ssl.keystore.password": "wrong"})
    with pytest.raises(TlsConfigError, match=r"ssl\.keystore\.password"):
        build_server_context(settings)


def test_key_that_does_not_belong_to_the_certificate_is_rejected(files: TlsFiles) -> None:
    settings = ListenerTlsSettings.from_config(pem(files, ssl_key_location=str(files.client_key)))
    with pytest.raises(TlsConfigError, match="does not belong"):
        build_server_context(settings)


def test_key_material_leaves_no_temporary_file(files: TlsFiles, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    build_server_context(ListenerTlsSettings.from_config(pem(files)))
    assert list(scratch.iterdir()) == []


def test_missing_file_names_the_setting(files: TlsFiles) -> None:
    settings = ListenerTlsSettings.from_config(pem(files, ssl_truststore_location="/nonexistent/ca.pem"))
    with pytest.raises(TlsConfigError, match=r"ssl\.truststore\.location: cannot read /nonexistent/ca\.pem"):
        build_server_context(settings)


def test_pkcs12_file_read_as_pem_hints_at_the_store_type(files: TlsFiles) -> None:
    settings = ListenerTlsSettings.from_config({"ssl.keystore.location": str(files.server_pkcs12)})
    with pytest.raises(TlsConfigError, match=r"ssl\.keystore\.type=PKCS12"):
        build_server_context(settings)


@pytest.mark.parametrize(("changes", "message"), [
    ({"ssl.keystore.location": None}, "ssl.keystore.location"),
    ({"ssl.keystore.type": "JKS"}, "keytool"),
    ({"ssl.truststore.type": "BCFKS"}, "ssl.truststore.type"),
    ({"ssl.client.auth": "sometimes"}, "ssl.client.auth"),
    ({"ssl.client.auth": "required", "ssl.truststore.location": None}, "needs ssl.truststore.location"),
    ({"ssl.keystore.password": "secret"}, "PEM key store"),
    ({"ssl.enabled.protocols": "TLSv1.1,TLSv1.3"}, "gap"),
    ({"ssl.enabled.protocols": "SSLv3"}, "SSLv3"),
    ({"ssl.enabled.protocols": ""}, "at least one"),
    ({"ssl.allow.dn.changes": "yes"}, "ssl.allow.dn.changes"),
])
def test_unusable_settings_are_rejected_naming_the_key(files: TlsFiles, changes: dict[str, Any],
                                                       message: str) -> None:
    with pytest.raises(TlsConfigError, match=message):
        ListenerTlsSettings.from_config({**pem(files), **changes})


@pytest.mark.parametrize(("suites", "message"), [
    ("NOT-A-CIPHER", "NOT-A-CIPHER"),
    ("ECDHE-ECDSA-AES128-GCM-SHA256,BOGUS", "BOGUS"),
    ("TLS_AES_128_GCM_SHA256", "only TLS 1.3 suites"),
])
def test_unusable_cipher_suites_are_rejected(files: TlsFiles, suites: str, message: str) -> None:
    with pytest.raises(TlsConfigError, match=message):
        build_server_context(ListenerTlsSettings.from_config(pem(files, ssl_cipher_suites=suites)))


def test_passwords_never_appear_in_repr(files: TlsFiles) -> None:
    settings = ListenerTlsSettings.from_config({
        "ssl.keystore.location": str(files.server_pkcs12), "ssl.keystore.type": "PKCS12",
        "ssl.keystore.password": "hunter2-store", "ssl.key.password": "hunter2-key",
        "ssl.truststore.password": "hunter2-trust"})
    assert "hunter2" not in repr(settings)
    assert "hunter2" not in str(settings)


def test_provider_refuses_to_start_on_broken_material(tmp_path: Path) -> None:
    (tmp_path / "bad.pem").write_text("not a certificate")
    with pytest.raises(TlsConfigError):
        TlsContextProvider(ListenerTlsSettings.from_config({"ssl.keystore.location": str(tmp_path / "bad.pem")}))



def handshake_in_memory(client_context: ssl.SSLContext, server_context: ssl.SSLContext) -> ssl.SSLObject:
    """Run a TLS handshake between two SSLObjects by shuttling bytes; returns the client's."""
    client_in, client_out, server_in, server_out = (ssl.MemoryBIO() for _ in range(4))
    client = client_context.wrap_bio(client_in, client_out, server_hostname="localhost")
    server = server_context.wrap_bio(server_in, server_out, server_side=True)
    done: set[int] = set()
    for _ in range(10):
        for index, side in enumerate((client, server)):
            if index not in done:
                try:
                    side.do_handshake()
                    done.add(index)
                except ssl.SSLWantReadError:
                    pass
        server_in.write(client_out.read())
        client_in.write(server_out.read())
        if len(done) == 2:
            return client
    raise AssertionError("the handshake did not finish")


def test_a_saved_ca_issues_certificates_its_truststore_accepts(ca: CertificateAuthority, tmp_path: Path) -> None:
    ca.write(tmp_path / "ca.pem", tmp_path / "ca.key")
    assert (tmp_path / "ca.key").stat().st_mode & 0o777 == 0o600
    reloaded = CertificateAuthority.load(tmp_path / "ca.pem", tmp_path / "ca.key")
    issued = issue_cert(reloaded)
    issued.write_pem(tmp_path / "s.pem", tmp_path / "s.key")
    server = build_server_context(ListenerTlsSettings.from_config(
        {"ssl.keystore.location": str(tmp_path / "s.pem"), "ssl.key.location": str(tmp_path / "s.key")}))
    client = handshake_in_memory(ssl.create_default_context(cafile=str(tmp_path / "ca.pem")), server.context)
    assert client.getpeercert(binary_form=True) == issued.certificate.public_bytes(Encoding.DER)
