"""Acceptance: TLS listeners (mTLS principal mapping, SASL_SSL) and OAUTHBEARER with real clients."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient
from cryptography.hazmat.primitives.asymmetric import rsa
from kafka import KafkaProducer
from kafka.net.sasl.oauth import AbstractTokenProvider

from auth.cert_tools import TlsFiles, write_tls_material
from gateway.commands.embedded_broker import EmbeddedBroker
from gateway.stores.file_users import FileCredentialStore
from tests.harness import GatewayThread


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return write_tls_material(tmp_path_factory.mktemp("tls"), server_subject="CN=localhost",
                              client_subject="CN=Alice,OU=Engineering,O=Acme,C=US")


def _produce_one(settings: dict[str, Any], topic: str) -> None:
    producer = Producer(settings)
    producer.produce(topic, b"hello")
    assert producer.flush(20) == 0


def test_mtls_client_certificate_dn_becomes_the_mapped_principal(broker: EmbeddedBroker, tls: TlsFiles) -> None:
    gateway = GatewayThread(broker.bootstrap, {
        "ssl.keystore.location": str(tls.server_cert), "ssl.key.location": str(tls.server_key),
        "ssl.truststore.location": str(tls.ca), "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([a-zA-Z]+),OU=Engineering.*$/$1/L,DEFAULT",
    }, protocol="SSL", advertised_host="localhost").start()
    try:
        _produce_one({"bootstrap.servers": gateway.bootstrap, "security.protocol": "SSL",
                      "ssl.ca.location": str(tls.ca), "ssl.certificate.location": str(tls.client_cert),
                      "ssl.key.location": str(tls.client_key)}, f"mtls-{uuid.uuid4().hex[:6]}")
        assert set(gateway.gateway.ctx.counters.authenticated) == {"User:alice"}
        upstream_before = gateway.gateway.ctx.counters.upstream_connections
        # Without a client certificate the handshake itself fails (ssl.client.auth=required).
        errors: list[str] = []
        admin = AdminClient({"bootstrap.servers": gateway.bootstrap, "security.protocol": "SSL",
                             "ssl.ca.location": str(tls.ca), "error_cb": lambda e: errors.append(e.str())})
        with pytest.raises(KafkaException):
            admin.list_topics(timeout=3)
        assert gateway.gateway.ctx.counters.upstream_connections == upstream_before
    finally:
        gateway.stop()


def test_sasl_ssl_scram_with_the_ca_file(broker: EmbeddedBroker, tls: TlsFiles, tmp_path: Path) -> None:
    store = FileCredentialStore(tmp_path / "users.json")
    store.upsert_user("alice", "alice-secret")
    gateway = GatewayThread(broker.bootstrap, {
        "ssl.keystore.location": str(tls.server_cert), "ssl.key.location": str(tls.server_key),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN", "ksgate.credentials.file": str(tmp_path / "users.json"),
    }, protocol="SASL_SSL", advertised_host="localhost").start()
    try:
        for mechanism in ("SCRAM-SHA-512", "PLAIN"):  # PLAIN is allowed here: the listener is TLS
            _produce_one({"bootstrap.servers": gateway.bootstrap, "security.protocol": "SASL_SSL",
                          "ssl.ca.location": str(tls.ca), "sasl.mechanism": mechanism,
                          "sasl.username": "alice", "sasl.password": "alice-secret"},
                         f"sasl-ssl-{uuid.uuid4().hex[:6]}")
        assert set(gateway.gateway.ctx.counters.authenticated) == {"User:alice"}
    finally:
        gateway.stop()


class Jwks:
    """Keys served as a JWKS document over local HTTP; the test decides which keys are published."""

    def __init__(self) -> None:
        self.keys: dict[str, rsa.RSAPrivateKey] = {}
        self.published: set[str] = set()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = json.dumps({"keys": [
                    {**json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(outer.keys[kid].public_key())),
                     "kid": kid, "use": "sig", "alg": "RS256"} for kid in sorted(outer.published)]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/jwks.json"

    def add_key(self, kid: str, publish: bool = True) -> None:
        self.keys[kid] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        if publish:
            self.published.add(kid)

    def token(self, kid: str, sub: str = "carol", *, exp_in: int = 300, aud: str = "kafka",
              iss: str = "https://issuer.test", alg: str = "RS256") -> str:
        now = int(time.time())
        claims = {"sub": sub, "iat": now, "exp": now + exp_in, "aud": aud, "iss": iss}
        if alg == "none":
            return jwt.encode(claims, None, algorithm="none", headers={"kid": kid})
        return jwt.encode(claims, self.keys[kid], algorithm=alg, headers={"kid": kid})


@pytest.fixture(scope="module")
def jwks() -> Iterator[Jwks]:
    keys = Jwks()
    keys.add_key("k1")
    yield keys
    keys.server.shutdown()


@pytest.fixture(scope="module")
def oauth_gateway(broker: EmbeddedBroker, jwks: Jwks) -> Iterator[GatewayThread]:
    gateway = GatewayThread(broker.bootstrap, {
        "sasl.enabled.mechanisms": "OAUTHBEARER", "sasl.oauthbearer.jwks.endpoint.url": jwks.url,
        "sasl.oauthbearer.expected.audience": "kafka", "sasl.oauthbearer.expected.issuer": "https://issuer.test",
        "connection.failed.authentication.delay.ms": 20,
    }, protocol="SASL_PLAINTEXT").start()
    yield gateway
    gateway.stop()


def _oauth_settings(gateway: GatewayThread, token: str) -> dict[str, Any]:
    return {"bootstrap.servers": gateway.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "oauth_cb": lambda _config: (token, time.time() + 300)}


def test_confluent_oauth_cb_token_authenticates_as_the_subject(oauth_gateway: GatewayThread, jwks: Jwks) -> None:
    _produce_one(_oauth_settings(oauth_gateway, jwks.token("k1", sub="carol")), f"oauth-{uuid.uuid4().hex[:6]}")
    assert oauth_gateway.gateway.ctx.counters.authenticated.get("User:carol", 0) >= 1


def test_kafka_python_token_provider_authenticates(oauth_gateway: GatewayThread, jwks: Jwks) -> None:
    class Provider(AbstractTokenProvider):
        def token(self) -> str:
            return jwks.token("k1", sub="dave")

    producer = KafkaProducer(bootstrap_servers=oauth_gateway.bootstrap, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=Provider())
    producer.send(f"oauth-kp-{uuid.uuid4().hex[:6]}", b"x").get(timeout=20)
    producer.close()
    assert oauth_gateway.gateway.ctx.counters.authenticated.get("User:dave", 0) >= 1


def _refused(gateway: GatewayThread, token: str) -> None:
    before = gateway.gateway.ctx.counters.authentication_failures
    errors: list[str] = []
    admin = AdminClient({**_oauth_settings(gateway, token), "error_cb": lambda e: errors.append(e.str())})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)
    assert gateway.gateway.ctx.counters.authentication_failures > before


@pytest.mark.parametrize("case", ["expired", "not_yet_valid", "wrong_audience", "wrong_issuer", "alg_none"])
def test_invalid_tokens_are_refused(oauth_gateway: GatewayThread, jwks: Jwks, case: str) -> None:
    tokens = {
        "expired": lambda: jwks.token("k1", exp_in=-600),
        "wrong_audience": lambda: jwks.token("k1", aud="other"),
        "wrong_issuer": lambda: jwks.token("k1", iss="https://evil.test"),
        "alg_none": lambda: jwks.token("k1", alg="none"),
        "not_yet_valid": lambda: jwt.encode({"sub": "x", "aud": "kafka", "iss": "https://issuer.test",
                                             "nbf": int(time.time()) + 3600, "exp": int(time.time()) + 7200},
                                            jwks.keys["k1"], algorithm="RS256", headers={"kid": "k1"}),
    }
    _refused(oauth_gateway, tokens[case]())


def test_unknown_kid_is_refused_until_the_jwks_publishes_it(oauth_gateway: GatewayThread, jwks: Jwks) -> None:
    jwks.add_key("k2", publish=False)
    _refused(oauth_gateway, jwks.token("k2", sub="erin"))
