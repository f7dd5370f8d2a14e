"""Throwaway certificate authorities and certificates (ECDSA P-256) for the quickstart and tests.

Not a PKI: keys are written unencrypted unless a password is given, with 0600 permissions.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID

_DAY = datetime.timedelta(days=1)


def _name(subject: str | x509.Name) -> x509.Name:
    # RFC 4514 text lists the most specific RDN first, e.g. "CN=alice,OU=eng,O=Acme,C=US".
    return subject if isinstance(subject, x509.Name) else x509.Name.from_rfc4514_string(subject)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclass(slots=True, frozen=True)
class CertificateAuthority:
    certificate: x509.Certificate
    private_key: ec.EllipticCurvePrivateKey = field(repr=False)

    def write(self, path: Path | str, key_path: Path | str | None = None) -> Path:
        """Write the CA certificate (a PEM trust store) and, if asked, its key (0600) to issue more later."""
        if key_path is not None:
            _write(Path(key_path), self.private_key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
                private=True)
        return _write(Path(path), self.certificate.public_bytes(serialization.Encoding.PEM))

    @classmethod
    def load(cls, path: Path | str, key_path: Path | str) -> CertificateAuthority:
        """A CA written by :meth:`write` with its key."""
        key = serialization.load_pem_private_key(Path(key_path).read_bytes(), None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{key_path}: not an EC private key")
        return cls(x509.load_pem_x509_certificate(Path(path).read_bytes()), key)

    def write_pkcs12_truststore(self, path: Path | str, password: bytes) -> Path:
        """The CA certificate as a Java-style PKCS#12 trust store (ssl.truststore.type=PKCS12)."""
        entry = pkcs12.PKCS12Certificate(self.certificate, b"ca")
        data = pkcs12.serialize_java_truststore([entry], serialization.BestAvailableEncryption(password))
        return _write(Path(path), data)


@dataclass(slots=True, frozen=True)
class IssuedCertificate:
    certificate: x509.Certificate
    private_key: ec.EllipticCurvePrivateKey = field(repr=False)
    issuer: x509.Certificate

    @property
    def serial_number(self) -> int:
        return self.certificate.serial_number

    def chain_pem(self) -> bytes:
        return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in (self.certificate, self.issuer))

    def key_pem(self, password: bytes | None = None) -> bytes:
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption())
        return self.private_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                              encryption)

    def write_pem(self, cert_path: Path | str, key_path: Path | str, password: bytes | None = None) -> None:
        """Certificate chain (leaf first) to ``cert_path``, the PKCS#8 key to ``key_path`` (0600)."""
        _write(Path(cert_path), self.chain_pem())
        _write(Path(key_path), self.key_pem(password), private=True)

    def write_pkcs12(self, path: Path | str, password: bytes, alias: bytes = b"ksgate") -> Path:
        data = pkcs12.serialize_key_and_certificates(
            alias, self.private_key, self.certificate, [self.issuer],
            serialization.BestAvailableEncryption(password))
        return _write(Path(path), data, private=True)


def _write(path: Path, data: bytes, private: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    # Replace atomically so a watcher never reads a half-written file.
    os.replace(tmp, path)
    return path


def make_ca(subject: str | x509.Name = "CN=ksgate throwaway CA", *, valid_days: int = 365) -> CertificateAuthority:
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name(subject)
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _DAY)
        .not_valid_after(now + valid_days * _DAY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                     crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return CertificateAuthority(cert, key)


def issue_cert(
    ca: CertificateAuthority,
    subject: str | x509.Name = "CN=localhost",
    *,
    dns_names: Sequence[str] = ("localhost",),
    ip_addresses: Sequence[str] = ("127.0.0.1",),
    serial_number: int | None = None,
    valid_days: int = 365,
) -> IssuedCertificate:
    """A leaf usable both as a TLS server and a TLS client certificate."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(ca.certificate.subject)
        .public_key(key.public_key())
        .serial_number(serial_number or x509.random_serial_number())
        .not_valid_before(now - _DAY)
        .not_valid_after(now + valid_days * _DAY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                       critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.private_key.public_key()),
                       critical=False)
    )
    names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
    names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(ca.private_key, hashes.SHA256())
    return IssuedCertificate(cert, key, ca.certificate)


@dataclass(slots=True, frozen=True)
class TlsFiles:
    """Where :func:`write_tls_material` put everything."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    server_pkcs12: Path | None = None
    client_pkcs12: Path | None = None


def write_tls_material(
    directory: Path | str,
    *,
    server_subject: str = "CN=localhost",
    client_subject: str = "CN=client",
    pkcs12_password: bytes | None = None,
    ca: CertificateAuthority | None = None,
) -> TlsFiles:
    """A CA plus a server and a client certificate in ``directory`` (PKCS#12 too if a password is given)."""
    directory = Path(directory)
    ca = ca or make_ca()
    server = issue_cert(ca, server_subject)
    client = issue_cert(ca, client_subject, dns_names=(), ip_addresses=())
    server.write_pem(directory / "server.pem", directory / "server.key")
    client.write_pem(directory / "client.pem", directory / "client.key")
    return TlsFiles(
        ca=ca.write(directory / "ca.pem"),
        server_cert=directory / "server.pem",
        server_key=directory / "server.key",
        client_cert=directory / "client.pem",
        client_key=directory / "client.key",
        server_pkcs12=server.write_pkcs12(directory / "server.p12", pkcs12_password) if pkcs12_password else None,
        client_pkcs12=client.write_pkcs12(directory / "client.p12", pkcs12_password) if pkcs12_password else None,
    )
