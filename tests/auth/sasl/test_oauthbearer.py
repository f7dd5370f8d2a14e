"""OAUTHBEARER: RFC 7628 message parsing, JWT signature/claim rules, JWKS refresh, configuration."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from auth.sasl.jwt_validation import (
    InvalidToken,
    JwksKeySource,
    JwtConfig,
    JwtValidator,
    KeySource,
    StaticKeySource,
    UnsecuredJwtValidator,
    ValidatedToken,
    parse_jwks,
)
from auth.sasl.mechanism import Challenge, Done, Failure, Outcome, SaslContext
from auth.sasl.oauthbearer import (
    GENERIC_FAILURE,
    OAuthBearerMechanism,
    OAuthBearerServer,
    build_oauthbearer_from_config,
    error_json,
)

NOW_S = 1_700_000_000
NOW_MS = NOW_S * 1000
INVALID_TOKEN_JSON = b'{"status":"invalid_token"}'


# ------------------------------------------------------------------------------------- helpers


@dataclass
class Clock:
    ms: int = NOW_MS

    def __call__(self) -> int:
        return self.ms


@dataclass
class SigningKey:
    kid: str
    alg: str
    private: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey

    def jwk(self, **extra: Any) -> dict[str, Any]:
        public = self.private.public_key()
        data = (
            RSAAlgorithm.to_jwk(public, as_dict=True)
            if isinstance(public, rsa.RSAPublicKey)
            else ECAlgorithm.to_jwk(public, as_dict=True)
        )
        data.update(kid=self.kid, use="sig", **extra)
        return data

    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def sign(self, claims: Mapping[str, Any], *, alg: str | None = None, kid: str | None = "same") -> str:
        headers = {} if kid is None else {"kid": self.kid if kid == "same" else kid}
        return jwt.encode(dict(claims), self.private, algorithm=alg or self.alg, headers=headers)


@pytest.fixture(scope="module")
def rsa_key() -> SigningKey:
    return SigningKey("rsa-1", "RS256", rsa.generate_private_key(public_exponent=65537, key_size=2048))


@pytest.fixture(scope="module")
def rsa_key_2() -> SigningKey:
    return SigningKey("rsa-2", "RS256", rsa.generate_private_key(public_exponent=65537, key_size=2048))


@pytest.fixture(scope="module")
def ec_key() -> SigningKey:
    return SigningKey("ec-1", "ES256", ec.generate_private_key(ec.SECP256R1()))


def jwks(*keys: SigningKey, **extra: Any) -> bytes:
    return json.dumps({"keys": [k.jwk(**extra) for k in keys]}).encode()


def claims(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"sub": "alice", "iat": NOW_S - 60, "exp": NOW_S + 3600}
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not None}


def first_message(token: str, authzid: str = "", extensions: str = "") -> bytes:
    header = f"n,a={authzid}," if authzid else "n,,"
    return f"{header}\x01auth=Bearer {token}\x01{extensions}\x01".encode()


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def context(clock: Clock | None = None) -> SaslContext:
    return SaslContext(listener="SASL_SSL", client_host="127.0.0.1", tls=True, now_ms=clock or Clock())


class FixedKeys:
    """A KeySource over a fixed JWKS document, without threads."""

    def __init__(self, document: bytes) -> None:
        self.keys = parse_jwks(document)

    def keys_for(self, kid: str | None, now_ms: int) -> tuple[Any, ...]:
        return tuple(k for k in self.keys if kid is None or k.kid == kid)


def validator(source: KeySource, **config: Any) -> JwtValidator:
    return JwtValidator(JwtConfig(**config), source)


def authenticate(v: Any, message: bytes, clock: Clock | None = None) -> tuple[OAuthBearerServer, Outcome]:
    server = OAuthBearerMechanism(v).create(context(clock))
    assert isinstance(server, OAuthBearerServer)
    return server, server.evaluate(message)


def assert_refused(outcome: Outcome, server: OAuthBearerServer, expected_json: bytes = INVALID_TOKEN_JSON) -> str:
    """The RFC 7628 error round trip: error JSON challenge, client's %x01, then failure."""
    assert outcome == Challenge(expected_json)
    final = server.evaluate(b"\x01")
    assert isinstance(final, Failure)
    assert final.client_message == expected_json.decode()
    return final.reason


# ------------------------------------------------------------------------------ valid tokens


@pytest.mark.parametrize("key_name", ["rsa_key", "ec_key"])
def test_valid_token_authenticates_with_principal_and_expiry(key_name: str, request: pytest.FixtureRequest) -> None:
    key: SigningKey = request.getfixturevalue(key_name)
    v = validator(FixedKeys(jwks(key)))
    server, outcome = authenticate(v, first_message(key.sign(claims())))
    assert outcome == Done(authorization_id="alice", credential_expiry_ms=(NOW_S + 3600) * 1000)
    assert server.token is not None and server.token.principal == "alice"


def test_static_pem_key_is_named_after_its_file_and_serves_kidless_tokens(rsa_key: SigningKey, tmp_path: Path) -> None:
    pem = tmp_path / "issuer-a.pem"
    pem.write_bytes(rsa_key.public_pem())
    v = validator(StaticKeySource([pem]))
    _, by_kid = authenticate(v, first_message(rsa_key.sign(claims(), kid="issuer-a")))
    _, kidless = authenticate(v, first_message(rsa_key.sign(claims(), kid=None)))
    server, wrong_kid = authenticate(v, first_message(rsa_key.sign(claims(), kid="other")))
    assert isinstance(by_kid, Done) and isinstance(kidless, Done)
    assert_refused(wrong_kid, server)


# ------------------------------------------------------------------------------- time rules


def test_expired_token_is_refused_once_past_the_clock_skew(rsa_key: SigningKey) -> None:
    v = validator(FixedKeys(jwks(rsa_key)), clock_skew_s=30)
    token = rsa_key.sign(claims(exp=NOW_S - 10))
    _, within_skew = authenticate(v, first_message(token))
    assert isinstance(within_skew, Done)
    server, outcome = authenticate(v, first_message(token), Clock(NOW_MS + 20_000))
    assert "expired" in assert_refused(outcome, server)


def test_token_without_exp_is_refused(rsa_key: SigningKey) -> None:
    server, outcome = authenticate(validator(FixedKeys(jwks(rsa_key))), first_message(rsa_key.sign(claims(exp=None))))
    assert "exp" in assert_refused(outcome, server)


def test_not_yet_valid_token_is_refused_until_nbf_minus_skew(rsa_key: SigningKey) -> None:
    v = validator(FixedKeys(jwks(rsa_key)), clock_skew_s=30)
    token = rsa_key.sign(claims(nbf=NOW_S + 60, iat=None))
    server, early = authenticate(v, first_message(token))
    assert "not valid before" in assert_refused(early, server)
    _, in_skew = authenticate(v, first_message(token), Clock(NOW_MS + 31_000))
    assert isinstance(in_skew, Done)


def test_token_issued_in_the_future_is_refused(rsa_key: SigningKey) -> None:
    server, outcome = authenticate(
        validator(FixedKeys(jwks(rsa_key)), clock_skew_s=0), first_message(rsa_key.sign(claims(iat=NOW_S + 5)))
    )
    assert "future" in assert_refused(outcome, server)


# -------------------------------------------------------------------------- audience, issuer


def test_wrong_audience_is_refused_and_any_expected_audience_suffices(rsa_key: SigningKey) -> None:
    v = validator(FixedKeys(jwks(rsa_key)), expected_audience=("kafka", "ksgate"))
    server, wrong = authenticate(v, first_message(rsa_key.sign(claims(aud="billing"))))
    assert "audience" in assert_refused(wrong, server)
    server, missing = authenticate(v, first_message(rsa_key.sign(claims())))
    assert_refused(missing, server)
    _, listed = authenticate(v, first_message(rsa_key.sign(claims(aud=["other", "ksgate"]))))
    assert isinstance(listed, Done)


def test_audience_is_not_checked_when_none_is_configured(rsa_key: SigningKey) -> None:
    _, outcome = authenticate(validator(FixedKeys(jwks(rsa_key))), first_message(rsa_key.sign(claims(aud="x"))))
    assert isinstance(outcome, Done)


def test_wrong_issuer_is_refused(rsa_key: SigningKey) -> None:
    v = validator(FixedKeys(jwks(rsa_key)), expected_issuer="https://idp.example/")
    server, wrong = authenticate(v, first_message(rsa_key.sign(claims(iss="https://evil.example/"))))
    assert "issuer" in assert_refused(wrong, server)
    _, right = authenticate(v, first_message(rsa_key.sign(claims(iss="https://idp.example/"))))
    assert isinstance(right, Done)


# ----------------------------------------------------------------------------- algorithms


def test_alg_none_token_is_refused(rsa_key: SigningKey) -> None:
    header = b64url(json.dumps({"alg": "none", "kid": rsa_key.kid}).encode())
    token = f"{header}.{b64url(json.dumps(claims()).encode())}."
    # Kafka's grammar requires a non-empty token; the trailing dot is allowed by it.
    server, outcome = authenticate(validator(FixedKeys(jwks(rsa_key))), first_message(token))
    assert "'none' is not allowed" in assert_refused(outcome, server)


def test_hs256_signed_with_the_rsa_public_key_pem_is_refused(rsa_key: SigningKey) -> None:
    pem = rsa_key.public_pem()
    signing_input = (
        f"{b64url(json.dumps({'alg': 'HS256', 'kid': rsa_key.kid}).encode())}.{b64url(json.dumps(claims()).encode())}"
    )
    signature = hmac.new(pem, signing_input.encode(), hashlib.sha256).digest()
    token = f"{signing_input}.{b64url(signature)}"
    server, outcome = authenticate(validator(FixedKeys(jwks(rsa_key))), first_message(token))
    assert "HS256" in assert_refused(outcome, server)


def test_hmac_algorithms_cannot_be_configured() -> None:
    with pytest.raises(ValueError, match="HS256"):
        JwtConfig(algorithms=frozenset({"RS256", "HS256"}))


def test_alg_that_does_not_fit_the_key_type_is_refused(rsa_key: SigningKey, ec_key: SigningKey) -> None:
    # An ES256 signature presented under the RSA key's kid.
    token = ec_key.sign(claims(), kid=rsa_key.kid)
    server, outcome = authenticate(validator(FixedKeys(jwks(rsa_key, ec_key))), first_message(token))
    assert "no verification key" in assert_refused(outcome, server)


def test_jwk_alg_narrows_the_key_to_that_algorithm(rsa_key: SigningKey) -> None:
    v = validator(FixedKeys(jwks(rsa_key, alg="PS256")))
    server, rs256 = authenticate(v, first_message(rsa_key.sign(claims())))
    assert_refused(rs256, server)
    _, ps256 = authenticate(v, first_message(rsa_key.sign(claims(), alg="PS256")))
    assert isinstance(ps256, Done)


def test_signature_by_another_key_is_refused(rsa_key: SigningKey, rsa_key_2: SigningKey) -> None:
    forged = rsa_key_2.sign(claims(), kid=rsa_key.kid)
    server, outcome = authenticate(validator(FixedKeys(jwks(rsa_key))), first_message(forged))
    assert "Signature verification failed" in assert_refused(outcome, server)


# --------------------------------------------------------------------------------- JWKS fetch


class _JwksServer:
    def __init__(self, document: bytes) -> None:
        self.document = document
        self.requests = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.requests += 1
                body = owner.document
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/jwks.json"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


@pytest.fixture
def jwks_server(rsa_key: SigningKey) -> Iterator[_JwksServer]:
    server = _JwksServer(jwks(rsa_key))
    yield server
    server.close()


def test_unknown_kid_triggers_a_refresh_and_the_next_attempt_succeeds(
    jwks_server: _JwksServer, rsa_key: SigningKey, rsa_key_2: SigningKey
) -> None:
    source = JwksKeySource(jwks_server.url, min_refresh_interval_ms=60_000)
    try:
        assert source.prefetch()
        assert jwks_server.requests == 1
        jwks_server.document = jwks(rsa_key, rsa_key_2)  # the identity provider rotates keys
        v = validator(source)
        message = first_message(rsa_key_2.sign(claims()))
        generation = source.refresh_generation
        server, first = authenticate(v, message)
        assert "no verification key" in assert_refused(first, server)  # fails now, never blocks
        assert source.wait_for_refresh(generation, timeout_s=10)
        _, retry = authenticate(v, message)
        assert retry == Done(authorization_id="alice", credential_expiry_ms=(NOW_S + 3600) * 1000)
        assert jwks_server.requests == 2
    finally:
        source.close()


class CountingFetch:
    def __init__(self, *documents: bytes | Exception) -> None:
        self.documents = list(documents)
        self.calls = 0

    def __call__(self, url: str, timeout_s: float) -> bytes:
        self.calls += 1
        item = self.documents[min(self.calls, len(self.documents)) - 1]
        if isinstance(item, Exception):
            raise item
        return item


def test_unknown_kid_refreshes_are_rate_limited(rsa_key: SigningKey, rsa_key_2: SigningKey) -> None:
    fetch = CountingFetch(jwks(rsa_key))
    source = JwksKeySource("https://idp.example/jwks", min_refresh_interval_ms=10_000, fetch=fetch)
    try:
        assert source.prefetch()
        v = validator(source)
        clock = Clock()
        generation = source.refresh_generation
        authenticate(v, first_message(rsa_key_2.sign(claims(), kid="k1")), clock)
        assert source.refreshes_requested == 1
        assert source.wait_for_refresh(generation, timeout_s=10)
        assert fetch.calls == 2
        for step in range(1, 10):  # a flood of random kids within the interval
            clock.ms = NOW_MS + step * 1000
            authenticate(v, first_message(rsa_key_2.sign(claims(), kid=f"random-{step}")), clock)
        assert source.refreshes_requested == 1
        clock.ms = NOW_MS + 10_000
        generation = source.refresh_generation
        authenticate(v, first_message(rsa_key_2.sign(claims(), kid="k2")), clock)
        assert source.refreshes_requested == 2
        assert source.wait_for_refresh(generation, timeout_s=10)
        assert fetch.calls == 3
    finally:
        source.close()


def test_known_kid_never_triggers_a_refresh(rsa_key: SigningKey) -> None:
    fetch = CountingFetch(jwks(rsa_key))
    source = JwksKeySource("https://idp.example/jwks", fetch=fetch)
    try:
        assert source.prefetch()
        _, outcome = authenticate(validator(source), first_message(rsa_key.sign(claims())))
        assert isinstance(outcome, Done)
        assert source.refreshes_requested == 0
    finally:
        source.close()


def test_failed_refresh_keeps_the_old_keys(rsa_key: SigningKey, rsa_key_2: SigningKey) -> None:
    fetch = CountingFetch(jwks(rsa_key), OSError("connection refused"), b"not json")
    source = JwksKeySource("https://idp.example/jwks", min_refresh_interval_ms=0, fetch=fetch)
    try:
        assert source.prefetch()
        v = validator(source)
        for failure_number in range(2):
            generation = source.refresh_generation
            authenticate(v, first_message(rsa_key_2.sign(claims())), Clock(NOW_MS + failure_number))
            assert source.wait_for_refresh(generation, timeout_s=10)
        assert fetch.calls >= 3  # the refresher may already be retrying the broken endpoint
        _, outcome = authenticate(v, first_message(rsa_key.sign(claims())))
        assert isinstance(outcome, Done)
    finally:
        source.close()


def test_jwks_ignores_symmetric_and_encryption_keys() -> None:
    document = json.dumps(
        {"keys": [{"kty": "oct", "kid": "h", "k": b64url(b"secret")}, {"kty": "RSA", "kid": "e", "use": "enc"}]}
    ).encode()
    assert FixedKeys(document).keys == ()


def test_jwks_endpoint_must_be_a_web_or_file_url() -> None:
    with pytest.raises(ValueError, match="scheme"):
        JwksKeySource("ftp://idp.example/jwks")


# -------------------------------------------------------------------------- scope, principal


def test_missing_required_scope_is_refused_with_insufficient_scope(rsa_key: SigningKey) -> None:
    v = validator(FixedKeys(jwks(rsa_key)), required_scopes=frozenset({"kafka.write", "kafka.read"}))
    server, outcome = authenticate(v, first_message(rsa_key.sign(claims(scope="kafka.read"))))
    assert_refused(outcome, server, b'{"status":"insufficient_scope", "scope":"kafka.read kafka.write"}')
    _, spaced = authenticate(v, first_message(rsa_key.sign(claims(scope="openid kafka.read kafka.write"))))
    _, listed = authenticate(v, first_message(rsa_key.sign(claims(scope=["kafka.write", "kafka.read"]))))
    assert isinstance(spaced, Done) and isinstance(listed, Done)


def test_custom_scope_claim_name(rsa_key: SigningKey) -> None:
    v = validator(FixedKeys(jwks(rsa_key)), scope_claim="scp", required_scopes=frozenset({"kafka"}))
    server, outcome = authenticate(v, first_message(rsa_key.sign(claims(scope="kafka"))))
    assert_refused(outcome, server, b'{"status":"insufficient_scope", "scope":"kafka"}')
    _, ok = authenticate(v, first_message(rsa_key.sign(claims(scp="kafka"))))
    assert isinstance(ok, Done)


def test_principal_comes_from_the_configured_claim(rsa_key: SigningKey) -> None:
    v = validator(FixedKeys(jwks(rsa_key)), principal_claim="preferred_username")
    _, outcome = authenticate(v, first_message(rsa_key.sign(claims(preferred_username="svc-orders"))))
    assert isinstance(outcome, Done) and outcome.authorization_id == "svc-orders"
    server, missing = authenticate(v, first_message(rsa_key.sign(claims())))
    assert "preferred_username" in assert_refused(missing, server)


def test_blank_or_non_string_principal_is_refused(rsa_key: SigningKey) -> None:
    v = validator(FixedKeys(jwks(rsa_key)))
    for bad in ("   ", 42):
        server, outcome = authenticate(v, first_message(rsa_key.sign(claims(sub=bad))))
        assert_refused(outcome, server)


def test_authzid_must_equal_the_token_principal(rsa_key: SigningKey) -> None:
    v = validator(FixedKeys(jwks(rsa_key)))
    token = rsa_key.sign(claims())
    _, mismatch = authenticate(v, first_message(token, authzid="admin"))
    assert isinstance(mismatch, Failure) and "admin" in mismatch.reason
    assert "admin" not in mismatch.client_message
    _, match = authenticate(v, first_message(token, authzid="alice"))
    assert isinstance(match, Done) and match.authorization_id == "alice"


# ------------------------------------------------------------------------- message grammar


class RecordingValidator:
    def __init__(self) -> None:
        self.tokens: list[str] = []

    def validate(self, token: str, now_ms: int) -> ValidatedToken | InvalidToken:
        self.tokens.append(token)
        return ValidatedToken("alice", now_ms + 60_000)


def test_extensions_are_parsed_and_auth_is_not_one_of_them() -> None:
    v = RecordingValidator()
    server, outcome = authenticate(v, first_message("t0k.en", extensions="traceId=a=b c\x01logicalCluster=lkc-1\x01"))
    assert isinstance(outcome, Done)
    assert v.tokens == ["t0k.en"]
    assert server.extensions == {"traceId": "a=b c", "logicalCluster": "lkc-1"}


def test_auth_key_is_required_and_case_sensitive() -> None:
    v = RecordingValidator()
    _, outcome = authenticate(v, b"n,,\x01AUTH=Bearer abc\x01\x01")
    assert isinstance(outcome, Failure) and "'auth' not specified" in outcome.reason
    assert outcome.client_message == GENERIC_FAILURE
    assert v.tokens == []


def test_bearer_scheme_is_case_insensitive_but_required() -> None:
    _, bearer = authenticate(RecordingValidator(), b"n,,\x01auth=bEaReR abc\x01\x01")
    _, basic = authenticate(RecordingValidator(), b"n,,\x01auth=Basic abc\x01\x01")
    assert isinstance(bearer, Done)
    assert isinstance(basic, Failure) and "scheme" in basic.reason


@pytest.mark.parametrize(
    "message",
    [
        b"y,,\x01auth=Bearer abc\x01\x01",  # client supports channel binding: not offered
        b"p=tls-unique,,\x01auth=Bearer abc\x01\x01",  # channel binding requested
        b"n,\x01auth=Bearer abc\x01\x01",  # GS2 header missing its second comma
        b",,\x01auth=Bearer abc\x01\x01",
        b"n,a=,\x01auth=Bearer abc\x01\x01",  # empty authzid
        b"n,a=al,ice,\x01auth=Bearer abc\x01\x01",  # unescaped comma in authzid
        b"n,,\x01auth=Bearer abc\x01",  # missing the terminating %x01
        b"n,,auth=Bearer abc\x01\x01",  # missing the %x01 after the GS2 header
        b"n,,\x01auth=Bearer ab c\x01\x01",  # token outside the b64token alphabet
        b"n,,\x01auth=Bearer abc\x01bad_key=1\x01\x01",  # extension name must be letters only
        b"n,,\x01auth=Bearer abc\x01key=\x01\x01",  # empty extension value
        b"n,,\x01auth=Bearer abc\x01key=\x00\x01\x01",  # control character in a value
        b"n,,\x01auth=Bearer \xff\x01\x01",  # not UTF-8
        b"",
    ],
)
def test_malformed_client_first_message_fails_without_validation(message: bytes) -> None:
    v = RecordingValidator()
    _, outcome = authenticate(v, message)
    assert isinstance(outcome, Failure)
    assert outcome.client_message == GENERIC_FAILURE
    assert v.tokens == []


def test_escaped_authzid_is_compared_as_sent_like_kafka() -> None:
    _, outcome = authenticate(RecordingValidator(), b"n,a=ali=2Cce,\x01auth=Bearer abc\x01\x01")
    assert isinstance(outcome, Failure) and "ali=2Cce" in outcome.reason


# --------------------------------------------------------------------- RFC 7628 error flow


def test_error_json_then_kvsep_ends_in_failure_carrying_the_json() -> None:
    invalid = InvalidToken("expired", scope="a b", openid_configuration="https://idp/.well-known/openid-configuration")
    expected = '{"status":"invalid_token", "scope":"a b", "openid-configuration":"https://idp/.well-known/openid-configuration"}'
    assert error_json(invalid) == expected

    class Refusing:
        def validate(self, token: str, now_ms: int) -> ValidatedToken | InvalidToken:
            return invalid

    server, outcome = authenticate(Refusing(), first_message("abc"))
    assert outcome == Challenge(expected.encode())
    final = server.evaluate(b"\x01")
    assert isinstance(final, Failure) and "expired" in final.reason and final.client_message == expected
    assert isinstance(server.evaluate(b"\x01"), Failure)  # nothing after the end


def test_anything_but_kvsep_after_the_error_fails_without_a_second_validation(rsa_key: SigningKey) -> None:
    v = validator(FixedKeys(jwks(rsa_key)))
    server, outcome = authenticate(v, first_message(rsa_key.sign(claims(exp=NOW_S - 3600))))
    assert outcome == Challenge(INVALID_TOKEN_JSON)
    retry = server.evaluate(first_message(rsa_key.sign(claims())))
    assert isinstance(retry, Failure) and retry.client_message == GENERIC_FAILURE


def test_no_message_is_accepted_after_success() -> None:
    server, outcome = authenticate(RecordingValidator(), first_message("abc"))
    assert isinstance(outcome, Done)
    assert isinstance(server.evaluate(first_message("abc")), Failure)


def test_mechanism_name_is_oauthbearer() -> None:
    assert OAuthBearerMechanism(RecordingValidator()).name == "OAUTHBEARER"


# ---------------------------------------------------------------------------- unsecured mode


def unsecured_token(**claim_overrides: Any) -> str:
    header = b64url(json.dumps({"alg": "none"}).encode())
    return f"{header}.{b64url(json.dumps(claims(**claim_overrides)).encode())}."


def test_unsecured_mode_warns_on_every_construction(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="ksgate.auth.jwt"):
        UnsecuredJwtValidator()
        UnsecuredJwtValidator()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "UNSECURED" in r.getMessage()]
    assert len(warnings) == 2


def test_unsecured_mode_accepts_alg_none_but_still_checks_claims(rsa_key: SigningKey) -> None:
    v = UnsecuredJwtValidator()
    _, ok = authenticate(v, first_message(unsecured_token()))
    assert ok == Done(authorization_id="alice", credential_expiry_ms=(NOW_S + 3600) * 1000)
    server, expired = authenticate(v, first_message(unsecured_token(exp=NOW_S - 3600)))
    assert "expired" in assert_refused(expired, server)
    server, signed = authenticate(v, first_message(rsa_key.sign(claims())))
    assert "empty signature" in assert_refused(signed, server)


# ---------------------------------------------------------------------------- configuration


def test_config_builds_a_static_key_validator_with_kafka_keys(rsa_key: SigningKey, tmp_path: Path) -> None:
    pem = tmp_path / "idp.pem"
    pem.write_bytes(rsa_key.public_pem())
    mechanism = build_oauthbearer_from_config(
        {
            "ksgate.oauthbearer.static.keys": str(pem),
            "sasl.oauthbearer.expected.audience": "kafka, ksgate",
            "sasl.oauthbearer.expected.issuer": "https://idp.example/",
            "sasl.oauthbearer.clock.skew.seconds": "5",
            "sasl.oauthbearer.sub.claim.name": "client_id",
            "sasl.oauthbearer.scope.claim.name": "scp",
            "ksgate.oauthbearer.required.scopes": "kafka",
        }
    )
    assert isinstance(mechanism.validator, JwtValidator)
    assert mechanism.validator.config == JwtConfig(
        expected_audience=("kafka", "ksgate"),
        expected_issuer="https://idp.example/",
        clock_skew_s=5,
        principal_claim="client_id",
        scope_claim="scp",
        required_scopes=frozenset({"kafka"}),
    )
    token = rsa_key.sign(claims(client_id="orders", aud="ksgate", iss="https://idp.example/", scp="kafka"), kid="idp")
    assert mechanism.prefetch()
    assert mechanism.create(context()).evaluate(first_message(token)) == Done(
        authorization_id="orders", credential_expiry_ms=(NOW_S + 3600) * 1000
    )


def test_config_builds_a_jwks_source_with_its_refresh_interval() -> None:
    mechanism = build_oauthbearer_from_config(
        {
            "sasl.oauthbearer.jwks.endpoint.url": "https://idp.example/jwks",
            "sasl.oauthbearer.jwks.endpoint.refresh.ms": 60000,
        }
    )
    assert isinstance(mechanism.validator, JwtValidator)
    source = mechanism.validator.key_source
    assert isinstance(source, JwksKeySource) and source.url == "https://idp.example/jwks"
    assert mechanism.validator.config == JwtConfig()


def test_config_unsecured_mode_must_be_explicit_and_alone(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="ksgate.auth.jwt"):
        mechanism = build_oauthbearer_from_config({"ksgate.oauthbearer.unsecured": "true"})
    assert isinstance(mechanism.validator, UnsecuredJwtValidator)
    assert any("UNSECURED" in r.getMessage() for r in caplog.records)
    with pytest.raises(ValueError, match="unsecured"):
        build_oauthbearer_from_config(
            {"ksgate.oauthbearer.unsecured": True, "sasl.oauthbearer.jwks.endpoint.url": "https://idp/jwks"}
        )


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"ksgate.oauthbearer.unsecured": "yes"},
        {"sasl.oauthbearer.jwks.endpoint.url": "https://idp/jwks", "ksgate.oauthbearer.static.keys": "a.pem"},
        {"ksgate.oauthbearer.static.keys": "/nonexistent/key.pem"},
        {"sasl.oauthbearer.jwks.endpoint.url": "https://idp/jwks", "sasl.oauthbearer.clock.skew.seconds": "x"},
    ],
)
def test_config_errors_are_value_errors(settings: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        build_oauthbearer_from_config(settings)
