"""What the handshake budget's e2e tests share: the server's certificate."""

from __future__ import annotations

import pytest

from auth.cert_tools import TlsFiles, write_tls_material


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return write_tls_material(tmp_path_factory.mktemp("tls"), server_subject="CN=localhost")
