"""Throwaway TLS material for tests: a CA, server and client certificates, and client contexts.

The generation lives in auth.cert_tools (the quickstart uses it too); this adds test conveniences.
"""

from __future__ import annotations

import ssl
from pathlib import Path

from auth.cert_tools import (
    CertificateAuthority,
    IssuedCertificate,
    TlsFiles,
    issue_cert,
    make_ca,
    write_tls_material,
)

__all__ = [
    "CertificateAuthority",
    "IssuedCertificate",
    "TlsFiles",
    "client_context",
    "issue_cert",
    "make_ca",
    "write_tls_material",
]


def client_context(ca: Path | str, cert: Path | str | None = None, key: Path | str | None = None,
                   check_hostname: bool = True) -> ssl.SSLContext:
    """A client context trusting ``ca``, presenting ``cert``/``key`` when given (mTLS)."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(ca))
    context.check_hostname = check_hostname
    if cert is not None:
        context.load_cert_chain(str(cert), str(key) if key is not None else None)
    return context
