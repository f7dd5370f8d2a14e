"""``ksgate init --kafka-host HOST``: TLS and SCRAM material for a Kafka broker the deployment runs itself.

docker-compose.yml's broker listens on SASL_SSL only.  init gives it a PKCS#12 keystore for HOST, signed by a CA of its
own (the gateway trusts that CA on its upstream leg only), and a random SCRAM-SHA-512 password for the broker user the
gateway logs in as.  Created once; if any file is missing, all are made afresh so that they match each other.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from auth.cert_tools import issue_cert, make_ca

# The broker user the gateway authenticates as (upstream.sasl.username).
GATEWAY_USER = "ksgate"


@dataclass(slots=True, frozen=True)
class UpstreamLayout:
    """Where the upstream material goes: ``upstream/`` for the gateway, ``kafka/`` for the broker (one volume each).

    The broker's directory keeps the apache/kafka image's conventions for /etc/kafka/secrets: a keystore file and a
    credentials file holding its password (KAFKA_SSL_KEYSTORE_FILENAME, KAFKA_SSL_KEYSTORE_CREDENTIALS).
    """

    root: Path

    @property
    def gateway_ca(self) -> Path:  # upstream.ssl.truststore.location
        return self.root / "upstream" / "ca.pem"

    @property
    def gateway_password(self) -> Path:  # upstream.sasl.password, read by the compose entrypoint
        return self.root / "upstream" / "password"

    @property
    def broker_keystore(self) -> Path:
        return self.root / "kafka" / "kafka.keystore.p12"

    @property
    def broker_keystore_creds(self) -> Path:
        return self.root / "kafka" / "kafka_keystore_creds"

    @property
    def broker_gateway_password(self) -> Path:  # what the broker registers as GATEWAY_USER's SCRAM credential
        return self.root / "kafka" / "ksgate_password"

    def files(self) -> tuple[Path, ...]:
        return (self.gateway_ca, self.gateway_password, self.broker_keystore, self.broker_keystore_creds,
                self.broker_gateway_password)


def initialise_upstream(root: Path, kafka_host: str) -> UpstreamLayout:
    """Create the broker's keystore, its CA for the gateway and the gateway's SCRAM password (once)."""
    layout = UpstreamLayout(root)
    if all(path.is_file() for path in layout.files()):
        return layout
    ca = make_ca(subject="CN=ksgate compose Kafka CA")  # its key is not kept, as for the client-facing CA
    broker = issue_cert(ca, f"CN={kafka_host}", dns_names=(kafka_host,), ip_addresses=())
    keystore_password = secrets.token_urlsafe(24)
    gateway_password = secrets.token_urlsafe(24)  # URL-safe: no ',' ']' '=' to break kafka-configs' [password=…]
    # The broker's files are readable by everyone: the broker runs under its image's own uid (apache/kafka's
    # appuser), not init's, and only the broker and init mount that volume.
    broker.write_pkcs12(layout.broker_keystore, keystore_password.encode(), alias=kafka_host.encode())
    layout.broker_keystore.chmod(0o644)
    _write_text(layout.broker_keystore_creds, keystore_password, 0o644)
    _write_text(layout.broker_gateway_password, gateway_password, 0o644)
    ca.write(layout.gateway_ca)
    _write_text(layout.gateway_password, gateway_password, 0o600)
    return layout


def _write_text(path: Path, text: str, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(text)
    path.chmod(mode)  # the umask may have removed bits from os.open's mode
