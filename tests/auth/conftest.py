"""Fixtures for the authentication tests: a real MIT Kerberos realm for GSSAPI."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kerberos import KerberosRealm, missing_binaries


@pytest.fixture(scope="session")
def kerberos_realm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KerberosRealm]:
    """A running KDC for KSGATE.TEST with ``kafka/localhost`` already in its keytab.

    Skips only when the MIT krb5 tools are not installed; any other failure is an error.
    """
    missing = missing_binaries()
    if missing:
        pytest.skip(f"MIT Kerberos tools not installed ({', '.join(missing)}): apt-get install krb5-kdc krb5-user")
    with KerberosRealm(directory=tmp_path_factory.mktemp("krb5")) as realm:
        realm.add_service("kafka", "localhost")
        yield realm
