"""The two sides on loopback: (A) Apache Kafka as the secured broker; (B) ksgate in front of a plain Kafka.

A: clients log in to Kafka's SASL_SSL listener; Kafka's StandardAuthorizer (allow.everyone.if.no.acl.found
=false) with ``cf-super`` as a super user.  B: clients log in to ksgate (SASL_PLAINTEXT, SCRAM-SHA-512) with
the same super user and the same rule for "no ACL"; ksgate relays to a second Kafka as its own super
principal.  Both Kafkas are the same build, configured alike, so only ksgate stands between the two.
"""

from __future__ import annotations

import secrets
import ssl
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from gateway.stores.file_users import FileCredentialStore
from tests.apache_kafka import KafkaBroker
from tests.conformance.wire import Endpoint
from tests.conformance.world import SUPER, Side, password, set_up
from tests.harness import GatewayThread

# Both sides serve delegation tokens, with the same lifetimes.
TOKEN_SETTINGS = {"delegation.token.expiry.time.ms": 86_400_000, "delegation.token.max.lifetime.ms": 604_800_000}


@dataclass(slots=True)
class Stage:
    kafka: Side
    ksgate: Side
    gateway: GatewayThread


@contextmanager
def stage(lib: Path, directory: Path) -> Iterator[Stage]:
    """Both sides started and set up (users, ACLs, topics, records), torn down on exit."""
    secret = secrets.token_hex(16)
    with ExitStack() as stack:
        # Only the super user exists from the start (it creates the others), as on ksgate's side.
        secured = KafkaBroker(lib, directory / "kafka-secured", users={SUPER: password(SUPER)},
                              extra_super_users=(f"User:{SUPER}",),
                              extra_properties={"delegation.token.secret.key": secret, **TOKEN_SETTINGS})
        plain = KafkaBroker(lib, directory / "kafka-plain")
        for broker in (secured, plain):
            stack.callback(broker.stop)
            broker.launch()
        for broker in (secured, plain):
            broker.wait_ready()
        gateway = _gateway(plain, directory / "ksgate", secret)
        stack.callback(gateway.stop)
        tls = ssl.create_default_context(cafile=str(secured.ca))
        kafka = Side("kafka", Endpoint(secured.bootstrap("SASL_SSL"), tls))
        ksgate = Side("ksgate", Endpoint(gateway.bootstrap, None))
        stack.callback(kafka.close)
        stack.callback(ksgate.close)
        for side in (kafka, ksgate):
            set_up(side)
        yield Stage(kafka, ksgate, gateway)


def _gateway(upstream: KafkaBroker, directory: Path, secret: str) -> GatewayThread:
    directory.mkdir(parents=True, exist_ok=True)
    credentials = directory / "users.json"
    FileCredentialStore(credentials).upsert_user(SUPER, password(SUPER))
    return GatewayThread(upstream.bootstrap("PLAINTEXT"), {
        "sasl.enabled.mechanisms": "SCRAM-SHA-512", "ksgate.credentials.file": str(credentials),
        "super.users": f"User:{SUPER}", "allow.everyone.if.no.acl.found": False,
        "delegation.token.secret.key": secret, "ksgate.delegation.token.file": str(directory / "tokens.json"),
        "ksgate.quota.file": str(directory / "quotas.json"),
        **TOKEN_SETTINGS,
    }, protocol="SASL_PLAINTEXT").start()
