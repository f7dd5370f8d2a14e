"""The certificate subject in Java's X500Principal.getName() spelling, which Kafka's rules and ACLs see."""

from __future__ import annotations

import datetime
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.name import _ASN1Type
from cryptography.x509.oid import NameOID, ObjectIdentifier

from auth.peer_identity import certificate_subject, rfc2253_name

A = x509.NameAttribute
KEY = ec.generate_private_key(ec.SECP256R1())


def name(*rdns: x509.NameAttribute[Any] | list[x509.NameAttribute[Any]]) -> x509.Name:
    return x509.Name([x509.RelativeDistinguishedName(r if isinstance(r, list) else [r]) for r in rdns])


def certificate(subject: x509.Name) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(name(A(NameOID.COMMON_NAME, "issuer")))
            .public_key(KEY.public_key()).serial_number(1).not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=1)).sign(KEY, hashes.SHA256()))


def subject_of(subject: x509.Name) -> str:
    return certificate_subject(certificate(subject).public_bytes(serialization.Encoding.DER))


# (subject, what Java's X500Principal.getName() returns for it)
CASES: list[tuple[x509.Name, str]] = [
    (name(A(NameOID.COUNTRY_NAME, "US"), A(NameOID.ORGANIZATION_NAME, "Acme"),
          A(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"), A(NameOID.COMMON_NAME, "alice")),
     "CN=alice,OU=eng,O=Acme,C=US"),
    (name(A(NameOID.COMMON_NAME, ' #a,b=c+d;e<f>g"h\\i ')),
     r'CN=\ \#a\,b\=c\+d\;e\<f\>g\"h\\i\ '),
    (name(A(NameOID.COMMON_NAME, "\ra b\r")), "CN=\\\ra b\\\r"),
    (name(A(NameOID.COMMON_NAME, "a\0b")), r"CN=a\00b"),
    (name(A(NameOID.EMAIL_ADDRESS, "a@b.c"), A(NameOID.SERIAL_NUMBER, "42"), A(NameOID.COMMON_NAME, "x")),
     "CN=x,2.5.4.5=#13023432,1.2.840.113549.1.9.1=#16056140622e63"),
    (name([A(NameOID.COMMON_NAME, "x"), A(NameOID.USER_ID, "y")]), "CN=x+UID=y"),
    (name(A(NameOID.DOMAIN_COMPONENT, "com"), A(NameOID.DOMAIN_COMPONENT, "acme"),
          A(NameOID.STREET_ADDRESS, "1 Main St"), A(NameOID.LOCALITY_NAME, "Springfield"),
          A(NameOID.STATE_OR_PROVINCE_NAME, "OR"), A(NameOID.GIVEN_NAME, "Al")),
     "2.5.4.42=#0c02416c,ST=OR,L=Springfield,STREET=1 Main St,DC=acme,DC=com"),
    (name(A(NameOID.COMMON_NAME, "Jürgen Ångström 😀")), "CN=Jürgen Ångström 😀"),
    (name(A(ObjectIdentifier("1.2.3.4"), "v")), "1.2.3.4=#0c0176"),
    # Java decodes every string type's bytes as UTF-8, even a BMPString's UCS-2.
    (name(A(NameOID.COMMON_NAME, "ab", _type=_ASN1Type.BMPString)), r"CN=\00a\00b"),
    (name(A(NameOID.COMMON_NAME, "ab", _type=_ASN1Type.PrintableString)), "CN=ab"),
    (x509.Name([]), ""),
]


@pytest.mark.parametrize(("subject", "expected"), CASES, ids=[e or "empty" for _, e in CASES])
def test_subject_is_spelled_like_java_x500principal(subject: x509.Name, expected: str) -> None:
    assert subject_of(subject) == expected


def test_subject_lists_rdns_most_specific_first() -> None:
    # Built C, O, OU, CN (the order in the certificate); Java prints it back to front.
    subject = x509.Name.from_rfc4514_string("CN=alice,OU=eng,O=Acme,C=US")
    assert next(iter(subject)).oid == NameOID.COUNTRY_NAME
    assert subject_of(subject) == "CN=alice,OU=eng,O=Acme,C=US"


def test_a_name_alone_is_spelled_the_same_as_in_a_certificate() -> None:
    subject = CASES[0][0]
    assert rfc2253_name(subject.public_bytes()) == subject_of(subject)


def test_truncated_der_is_rejected() -> None:
    der = certificate(CASES[0][0]).public_bytes(serialization.Encoding.DER)
    with pytest.raises(ValueError):
        certificate_subject(der[:60])


JAVA_SUBJECTS = """
import java.io.*;
import java.nio.file.*;
import java.security.cert.*;

public class Subjects {
    public static void main(String[] args) throws Exception {
        CertificateFactory factory = CertificateFactory.getInstance("X.509");
        PrintStream out = new PrintStream(System.out, true, "UTF-8");
        for (String path : args) {
            try (InputStream in = Files.newInputStream(Path.of(path))) {
                X509Certificate cert = (X509Certificate) factory.generateCertificate(in);
                out.println(cert.getSubjectX500Principal().getName());
            }
        }
    }
}
"""


@pytest.mark.skipif(shutil.which("java") is None, reason="needs a JDK (java) to compare with")
def test_subjects_match_a_real_jvm(tmp_path: Path) -> None:
    paths = []
    for i, (subject, _) in enumerate(CASES):
        path = tmp_path / f"{i}.der"
        path.write_bytes(certificate(subject).public_bytes(serialization.Encoding.DER))
        paths.append(str(path))
    (tmp_path / "Subjects.java").write_text(JAVA_SUBJECTS)
    run = subprocess.run(["java", str(tmp_path / "Subjects.java"), *paths], capture_output=True, timeout=120,
                         check=True)
    java = run.stdout.decode("utf-8").split("\n")[:-1]
    ours = [subject_of(subject) for subject, _ in CASES]
    assert java == ours
