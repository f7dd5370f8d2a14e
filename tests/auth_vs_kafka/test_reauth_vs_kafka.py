"""KIP-368 on the raw wire, ksgate against Apache Kafka 4.4, both with connections.max.reauth.ms set: the
session_lifetime_ms a SaslAuthenticate answer grants, re-authentication, and what a request gets once the session
has expired without one (Kafka closes the connection).

connections.max.reauth.ms is not a dynamic broker setting, and set on the session's shared Kafka it would expire
every other test's connections: this module starts its own broker, whose SASL_SSL listener sets it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.apache_kafka import KafkaBroker, kafka_lib
from tests.auth_vs_kafka.kit import Case, Probe, Sides, seen, started
from tests.auth_vs_kafka.test_auth_vs_kafka import (
    api_versions,
    at,
    authenticate,
    done,
    handshake,
    metadata,
    scram_login,
)

pytestmark = pytest.mark.kafka

# Long enough for a login and a request or two well inside it on a loaded machine; every case that waits for the
# expiry waits this long, on each side.
LIFETIME_MS = 3000
# Past the lifetime by this much before the request that must find the session expired: the servers' clocks
# start it at the login's end, a little before the client reads the answer.
PAST_EXPIRY_S = 0.5


@pytest.fixture(scope="module")
def reauth_sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sides]:
    lib = kafka_lib()
    if lib is None:
        pytest.skip("no Apache Kafka jars (REFERENCE_KAFKA_LIB; scripts/test.sh sets it)")
    directory = tmp_path_factory.mktemp("reauth-vs-kafka")
    with KafkaBroker(lib, directory / "kafka", extra_properties={
            "listener.name.sasl_ssl.connections.max.reauth.ms": LIFETIME_MS}) as kafka:
        yield from started(kafka, directory / "ksgate", {"connections.max.reauth.ms": LIFETIME_MS})


def expire(_probe: Probe) -> float:
    """Wait out the session (no event to wait for: both servers expire it by their clocks); the seconds waited."""
    seconds = LIFETIME_MS / 1000 + PAST_EXPIRY_S
    time.sleep(seconds)
    return seconds


def plain_login(p: Probe, pw: str, version: int = 2) -> object:
    """A PLAIN login, its handshake and its token sent whatever the handshake's answer; the token's answer."""
    handshake(p, "PLAIN")
    return authenticate(p, f"\0alice\0{pw}".encode(), version)


CASES: dict[str, Case] = {
    **{f"lifetime-scram-sha-512-v{v}": at(v, lambda p, pw, v: done(scram_login(p, "SCRAM-SHA-512", "alice", pw, v)))
       for v in (0, 1, 2)},
    "lifetime-scram-sha-256-v2": lambda p, pw: done(scram_login(p, "SCRAM-SHA-256", "alice", pw)),
    "lifetime-plain-v2": lambda p, pw: done(plain_login(p, pw)),
    "metadata-before-expiry": lambda p, pw: done(scram_login(p, "SCRAM-SHA-512", "alice", pw), metadata(p)),
    "reauthenticate-before-expiry": lambda p, pw: done(
        scram_login(p, "SCRAM-SHA-512", "alice", pw), scram_login(p, "SCRAM-SHA-512", "alice", pw), metadata(p)),
    "reauthenticate-other-mechanism": lambda p, pw: done(
        scram_login(p, "SCRAM-SHA-512", "alice", pw), plain_login(p, pw), metadata(p)),
    "metadata-after-expiry": lambda p, pw: done(scram_login(p, "SCRAM-SHA-512", "alice", pw), expire(p), metadata(p)),
    "api-versions-after-expiry": lambda p, pw: done(
        scram_login(p, "SCRAM-SHA-512", "alice", pw), expire(p), api_versions(p)),
    "authenticate-after-expiry": lambda p, pw: done(
        scram_login(p, "SCRAM-SHA-512", "alice", pw), expire(p), authenticate(p, b"n,,n=alice,r=abcdefgh")),
    "authenticate-before-expiry": lambda p, pw: done(
        scram_login(p, "SCRAM-SHA-512", "alice", pw), authenticate(p, b"n,,n=alice,r=abcdefgh"), metadata(p)),
    "reauthenticate-after-expiry": lambda p, pw: done(
        scram_login(p, "SCRAM-SHA-512", "alice", pw), expire(p), scram_login(p, "SCRAM-SHA-512", "alice", pw),
        metadata(p)),
    # SaslHandshake v0 (bare tokens) tells the client no lifetime and it cannot re-authenticate; Kafka expires
    # its session all the same.
    "handshake-v0-metadata-after-lifetime": lambda p, pw: done(
        handshake(p, "PLAIN", 0), p.send_token(f"\0alice\0{pw}".encode()), expire(p), metadata(p)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_session_lifetime_matches_kafka(reauth_sides: Sides, name: str) -> None:
    kafka, ksgate = (seen(side, CASES[name]) for side in reauth_sides.both())
    assert ksgate == kafka, f"\nksgate {ksgate}\nkafka  {kafka}"
