"""The delegation-token APIs answered by the gateway (Kafka's rules, every version encodes) and ``ksgate tokens``."""

from __future__ import annotations

import argparse
import base64
import io
import re
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

import gateway.commands.tokens
from auth.principal import ANONYMOUS, KafkaPrincipal
from authz.model import AclOperation, ResourceType
from authz.policies.admin import authorize_describe_delegation_token
from authz.request_policy import Action, Relay
from gateway.admin.delegation_tokens import (
    TokenRequestContext,
    TokenSettings,
    authenticated_via,
    create_delegation_token,
    describe_delegation_token,
    expire_delegation_token,
    renew_delegation_token,
)
from gateway.commands.tokens import add_tokens_parser, run_tokens_command
from gateway.stores.file_tokens import TokenStore, hmac_password
from protocol.api_keys import ApiKey
from protocol.kafka_errors import KafkaError
from protocol.registry import api

Body = dict[str, Any]
NOW = 1_700_000_000_000
HOUR = 3_600_000
SECRET = "gateway-token-secret"
ALICE = KafkaPrincipal("User", "alice")
BOB = KafkaPrincipal("User", "bob")
CAROL = KafkaPrincipal("User", "carol")


@pytest.fixture
def store(tmp_path: Path) -> TokenStore:
    return TokenStore(tmp_path / "tokens.json", SECRET)


def ctx(store: TokenStore | None, principal: KafkaPrincipal = ALICE, *, via: str = "SASL",
        token_authenticated: bool = False, now_ms: int = NOW,
        settings: TokenSettings | None = None) -> TokenRequestContext:
    return TokenRequestContext(principal, token_authenticated, via, now_ms, store, settings or TokenSettings())


def versions(key: ApiKey) -> range:
    schema = api(key)
    assert schema is not None
    return range(schema.min_version, schema.max_version + 1)


def round_trip(key: ApiKey, version: int, body: Body) -> Body:
    """Encode with the version's response codec (fails on a missing field) and decode again."""
    schema = api(key)
    assert schema is not None
    codec = schema.response_codec(version)
    return codec.decode(bytes(codec.encode(body)))


def create_request(version: int, renewers: Iterable[KafkaPrincipal] = (), owner: KafkaPrincipal | None = None,
                   max_lifetime_ms: int = -1) -> Body:
    body: Body = {"renewers": [{"principal_type": r.principal_type, "principal_name": r.name} for r in renewers],
                  "max_lifetime_ms": max_lifetime_ms}
    if version >= 3:
        body["owner_principal_type"] = owner.principal_type if owner else None
        body["owner_principal_name"] = owner.name if owner else None
    else:
        body["owner_principal_type"] = body["owner_principal_name"] = ""  # what the codec fills in
    return body


def create(store: TokenStore, principal: KafkaPrincipal = ALICE, renewers: Iterable[KafkaPrincipal] = (),
           owner: KafkaPrincipal | None = None, version: int = 3) -> Body:
    response = create_delegation_token(ctx(store, principal), create_request(version, renewers, owner), version)
    assert response["error_code"] == 0, response
    return response


def owners_filter(*principals: KafkaPrincipal) -> list[Body]:
    return [{"principal_type": p.principal_type, "principal_name": p.name} for p in principals]


# --- CreateDelegationToken ------------------------------------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.CREATE_DELEGATION_TOKEN))
def test_create_owner_defaults_to_the_requester_in_every_version(store: TokenStore, version: int) -> None:
    response = create_delegation_token(ctx(store), create_request(version, [BOB]), version)
    decoded = round_trip(ApiKey.CREATE_DELEGATION_TOKEN, version, response)
    assert decoded["error_code"] == 0
    assert (decoded["principal_type"], decoded["principal_name"]) == ("User", "alice")
    assert decoded["issue_timestamp_ms"] == NOW
    assert decoded["expiry_timestamp_ms"] == NOW + 86_400_000
    assert decoded["max_timestamp_ms"] == NOW + 604_800_000
    assert decoded["hmac"] == store.hmac(decoded["token_id"])
    if version >= 3:
        assert (decoded["token_requester_principal_type"], decoded["token_requester_principal_name"]) == (
            "User", "alice")
    [info] = store.describe(None, NOW)
    assert (info.owner, info.requester, info.renewers) == ("User:alice", "User:alice", ("User:bob",))


def test_create_v3_for_another_owner_records_the_requester(store: TokenStore) -> None:
    # The policy already checked CREATE_TOKENS on User:bob; the handler creates the token for bob.
    response = create(store, ALICE, owner=BOB)
    assert (response["principal_name"], response["token_requester_principal_name"]) == ("bob", "alice")
    [info] = store.describe(None, NOW)
    assert (info.owner, info.requester) == ("User:bob", "User:alice")


def test_create_honours_the_configured_lifetimes(store: TokenStore) -> None:
    settings = TokenSettings(expiry_time_ms=HOUR, max_lifetime_ms=3 * HOUR)
    request = create_request(3, max_lifetime_ms=10 * HOUR)
    response = create_delegation_token(ctx(store, settings=settings), request, 3)
    assert (response["expiry_timestamp_ms"], response["max_timestamp_ms"]) == (NOW + HOUR, NOW + 3 * HOUR)


@pytest.mark.parametrize("via,principal,token_authenticated", [
    ("PLAINTEXT", ANONYMOUS, False),
    ("PLAINTEXT", ALICE, False),
    ("SSL", ANONYMOUS, False),  # 1-way TLS
    ("SASL", ALICE, True),  # the connection authenticated with a token
    ("SASL", KafkaPrincipal("User", "alice", token_authenticated=True), False),
])
def test_create_is_not_allowed_on_plaintext_anonymous_or_token_connections(
        store: TokenStore, via: str, principal: KafkaPrincipal, token_authenticated: bool) -> None:
    for version in versions(ApiKey.CREATE_DELEGATION_TOKEN):
        response = create_delegation_token(ctx(store, principal, via=via, token_authenticated=token_authenticated),
                                           create_request(version), version)
        decoded = round_trip(ApiKey.CREATE_DELEGATION_TOKEN, version, response)
        assert decoded["error_code"] == KafkaError.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        assert (decoded["issue_timestamp_ms"], decoded["token_id"], decoded["hmac"]) == (-1, "", b"")
    assert store.describe(None, NOW) == []


def test_create_is_allowed_on_mutual_tls_and_sasl(store: TokenStore) -> None:
    cert_user = KafkaPrincipal("User", "CN=alice,OU=apps")
    assert create_delegation_token(ctx(store, cert_user, via="SSL"), create_request(3), 3)["error_code"] == 0
    assert create_delegation_token(ctx(store, ALICE, via="SASL"), create_request(3), 3)["error_code"] == 0


def test_create_refuses_renewers_that_are_not_users(store: TokenStore) -> None:
    response = create_delegation_token(ctx(store), create_request(3, [BOB, KafkaPrincipal("Group", "ops")]), 3)
    assert response["error_code"] == KafkaError.INVALID_PRINCIPAL_TYPE
    assert store.describe(None, NOW) == []


@pytest.mark.parametrize("version", versions(ApiKey.CREATE_DELEGATION_TOKEN))
def test_create_without_a_secret_key_is_disabled(version: int) -> None:
    response = create_delegation_token(ctx(None), create_request(version), version)
    decoded = round_trip(ApiKey.CREATE_DELEGATION_TOKEN, version, response)
    assert decoded["error_code"] == KafkaError.DELEGATION_TOKEN_AUTH_DISABLED


def test_create_with_a_null_owner_type_is_an_unknown_server_error(store: TokenStore) -> None:
    request = create_request(3) | {"owner_principal_type": None, "owner_principal_name": "bob"}
    response = create_delegation_token(ctx(store), request, 3)
    assert response["error_code"] == -1
    round_trip(ApiKey.CREATE_DELEGATION_TOKEN, 3, response)


# --- RenewDelegationToken / ExpireDelegationToken ------------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.RENEW_DELEGATION_TOKEN))
def test_renew_by_owner_and_renewer_in_every_version(store: TokenStore, version: int) -> None:
    mac = create(store, ALICE, [BOB])["hmac"]
    for who, now in ((ALICE, NOW + HOUR), (BOB, NOW + 2 * HOUR)):
        response = renew_delegation_token(ctx(store, who, now_ms=now), {"hmac": mac, "renew_period_ms": -1}, version)
        decoded = round_trip(ApiKey.RENEW_DELEGATION_TOKEN, version, response)
        assert (decoded["error_code"], decoded["expiry_timestamp_ms"]) == (0, now + 86_400_000)


def test_renew_errors_follow_kafka(store: TokenStore) -> None:
    mac = create(store, ALICE, [BOB])["hmac"]
    request = {"hmac": mac, "renew_period_ms": -1}
    assert renew_delegation_token(ctx(store, CAROL), request, 2)["error_code"] == 63
    assert renew_delegation_token(ctx(store), {"hmac": b"nope", "renew_period_ms": -1}, 2)["error_code"] == 62
    late = renew_delegation_token(ctx(store, now_ms=NOW + 86_400_001), request, 2)
    assert (late["error_code"], late["expiry_timestamp_ms"]) == (66, 0)
    refused = renew_delegation_token(ctx(store, via="PLAINTEXT"), request, 2)
    assert (refused["error_code"], refused["expiry_timestamp_ms"]) == (64, -1)
    assert renew_delegation_token(ctx(store, token_authenticated=True), request, 2)["error_code"] == 64
    assert renew_delegation_token(ctx(None), request, 2)["error_code"] == 61


@pytest.mark.parametrize("version", versions(ApiKey.EXPIRE_DELEGATION_TOKEN))
def test_expire_now_removes_the_token_in_every_version(store: TokenStore, version: int) -> None:
    created = create(store, ALICE, [BOB])
    request = {"hmac": created["hmac"], "expiry_time_period_ms": -1}
    response = expire_delegation_token(ctx(store, BOB, now_ms=NOW + 7), request, version)
    decoded = round_trip(ApiKey.EXPIRE_DELEGATION_TOKEN, version, response)
    assert (decoded["error_code"], decoded["expiry_timestamp_ms"]) == (0, NOW + 7)
    assert store.token_lookup(created["token_id"], "SCRAM-SHA-512", NOW + 7) is None
    assert expire_delegation_token(ctx(store), request, version)["error_code"] == 62


def test_expire_errors_follow_kafka(store: TokenStore) -> None:
    mac = create(store, ALICE)["hmac"]
    request = {"hmac": mac, "expiry_time_period_ms": HOUR}
    assert expire_delegation_token(ctx(store, BOB), request, 1)["error_code"] == 63
    assert expire_delegation_token(ctx(store, ALICE, via="SSL"), request, 1)["expiry_timestamp_ms"] == NOW + HOUR
    assert expire_delegation_token(ctx(store, ANONYMOUS, via="SSL"), request, 1)["error_code"] == 64
    assert expire_delegation_token(ctx(None), request, 1)["error_code"] == 61


# --- DescribeDelegationToken ----------------------------------------------------------------


class FakeView:
    """An AuthzView granting exactly ``grants``."""

    def __init__(self, principal: KafkaPrincipal, grants: Iterable[Action] = ()) -> None:
        self._principal = principal
        self._grants = set(grants)

    @property
    def principal(self) -> KafkaPrincipal:
        return self._principal

    def allowed(self, action: Action) -> bool:
        return action in self._grants

    def allowed_any(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        return False

    def authorized_operations(self, resource_type: ResourceType, name: str,
                              candidates: Iterable[AclOperation]) -> int:
        return 0

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return None


def describe_through_policy(store: TokenStore, view: FakeView, request: Body, version: int) -> Body:
    """What the client gets: the policy's verdict, the handler's answer, then the policy's response hook."""
    verdict = authorize_describe_delegation_token(request, version, view)
    assert isinstance(verdict, Relay)
    response = describe_delegation_token(ctx(store, view.principal), request, version)
    return verdict.on_response(response) if verdict.on_response is not None else response


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_DELEGATION_TOKEN))
def test_describe_returns_every_candidate_in_every_version(store: TokenStore, version: int) -> None:
    alices = create(store, ALICE, [BOB])
    carols = create(store, CAROL)
    response = describe_delegation_token(ctx(store, BOB), {"owners": None}, version)
    decoded = round_trip(ApiKey.DESCRIBE_DELEGATION_TOKEN, version, response)
    assert decoded["error_code"] == 0
    # The handler answers every candidate; the policy's hook removes what the caller may not see.
    tokens = {t["token_id"]: t for t in decoded["tokens"]}
    assert set(tokens) == {alices["token_id"], carols["token_id"]}
    first = tokens[alices["token_id"]]
    assert (first["principal_type"], first["principal_name"]) == ("User", "alice")
    assert first["renewers"] == [{"principal_type": "User", "principal_name": "bob"}]
    assert (first["issue_timestamp"], first["max_timestamp"]) == (NOW, NOW + 604_800_000)
    assert first["hmac"] == alices["hmac"]  # as Kafka's DescribeDelegationTokenResponse
    if version >= 3:
        assert first["token_requester_principal_name"] == "alice"


def test_describe_filters_by_the_requested_owners(store: TokenStore) -> None:
    alices = create(store, ALICE, [BOB])
    create(store, CAROL)
    by_renewer = describe_delegation_token(ctx(store), {"owners": owners_filter(BOB)}, 3)
    assert [t["token_id"] for t in by_renewer["tokens"]] == [alices["token_id"]]
    assert describe_delegation_token(ctx(store), {"owners": []}, 3)["tokens"] == []


def test_describe_errors_follow_kafka(store: TokenStore) -> None:
    create(store)
    for version in versions(ApiKey.DESCRIBE_DELEGATION_TOKEN):
        refused = describe_delegation_token(ctx(store, via="PLAINTEXT"), {"owners": None}, version)
        assert (refused["error_code"], refused["tokens"]) == (64, [])
        disabled = describe_delegation_token(ctx(None), {"owners": None}, version)
        assert (round_trip(ApiKey.DESCRIBE_DELEGATION_TOKEN, version, disabled)["error_code"], disabled["tokens"]) == (
            61, [])


@pytest.mark.parametrize("version", [0, 3])
def test_with_the_policy_hook_callers_see_their_own_renewable_and_acled_tokens(
        store: TokenStore, version: int) -> None:
    alices = create(store, ALICE, [BOB])
    carols = create(store, CAROL)
    dave = KafkaPrincipal("User", "dave")
    daves = create(store, dave)

    def seen(view: FakeView) -> set[str]:
        return {t["token_id"] for t in describe_through_policy(store, view, {"owners": None}, version)["tokens"]}

    assert seen(FakeView(BOB)) == {alices["token_id"]}  # a renewer
    assert seen(FakeView(CAROL)) == {carols["token_id"]}  # the owner
    by_token_acl = FakeView(BOB, [Action(AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN, carols["token_id"])])
    assert seen(by_token_acl) == {alices["token_id"], carols["token_id"]}
    by_owner_acl = FakeView(BOB, [Action(AclOperation.DESCRIBE_TOKENS, ResourceType.USER, "User:dave")])
    assert seen(by_owner_acl) == {alices["token_id"], daves["token_id"]}
    assert seen(FakeView(KafkaPrincipal("User", "eve"))) == set()


# --- ksgate tokens ------------------------------------------------------------------------------


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="ksgate")
    add_tokens_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(list(argv))
    assert args.func is run_tokens_command
    result: int = args.func(args)
    return result


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], Path]:
    secret_file = tmp_path / "secret.txt"
    secret_file.write_text(SECRET + "\n")
    monkeypatch.setattr(gateway.commands.tokens, "wall_clock_ms", lambda: NOW)
    return ["--store", str(tmp_path / "tokens.json"), "--secret-key-file", str(secret_file)], tmp_path


def test_cli_create_describe_renew_expire(cli: tuple[list[str], Path], capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    common, tmp_path = cli
    assert run("tokens", "create", *common, "--owner", "User:alice", "--renewer", "User:bob",
               "--max-life-time-period", str(48 * HOUR)) == 0
    out = capsys.readouterr().out
    token_id = re.search(r"Created delegation token with tokenId : (\S+)", out)
    assert token_id is not None
    path = tmp_path / "tokens.json"
    mac_text = hmac_password(TokenStore(path, SECRET).hmac(token_id.group(1)))
    assert mac_text in out
    for column in ("TOKENID", "HMAC", "OWNER", "REQUESTER", "RENEWERS", "ISSUEDATE", "EXPIRYDATE", "MAXDATE"):
        assert column in out
    assert "[User:bob]" in out

    assert run("tokens", "describe", *common, "--owner", "User:bob") == 0
    described = capsys.readouterr().out
    assert "Total number of tokens : 1" in described and token_id.group(1) in described
    assert mac_text not in described and "HMAC" not in described

    hmac_file = tmp_path / "token.hmac"
    hmac_file.write_text(mac_text + "\n")
    assert run("tokens", "renew", *common, "--hmac-file", str(hmac_file), "--principal", "User:bob",
               "--renew-time-period", str(HOUR)) == 0
    assert "Completed renew operation" in capsys.readouterr().out
    [info] = TokenStore(path, SECRET).describe(None, NOW)
    assert info.expiry_timestamp_ms == NOW + HOUR

    monkeypatch.setattr("sys.stdin", io.StringIO(mac_text))
    assert run("tokens", "expire", *common, "--hmac-stdin") == 0
    assert "Completed expire operation" in capsys.readouterr().out
    assert TokenStore(path, SECRET).describe(None, NOW) == []
    assert run("tokens", "describe", *common) == 0
    assert "Total number of tokens : 0" in capsys.readouterr().out


def test_cli_reports_kafka_errors(cli: tuple[list[str], Path], capsys: pytest.CaptureFixture[str]) -> None:
    common, tmp_path = cli
    assert run("tokens", "create", *common, "--owner", "User:alice") == 0
    token_id = re.search(r"tokenId : (\S+)", capsys.readouterr().out)
    assert token_id is not None
    hmac_file = tmp_path / "token.hmac"
    hmac_file.write_text(hmac_password(TokenStore(tmp_path / "tokens.json", SECRET).hmac(token_id.group(1))))
    assert run("tokens", "renew", *common, "--hmac-file", str(hmac_file), "--principal", "User:mallory") == 1
    assert "DELEGATION_TOKEN_OWNER_MISMATCH (63)" in capsys.readouterr().err
    hmac_file.write_text(base64.b64encode(b"unknown").decode())
    assert run("tokens", "expire", *common, "--hmac-file", str(hmac_file)) == 1
    assert "DELEGATION_TOKEN_NOT_FOUND (62)" in capsys.readouterr().err
    assert run("tokens", "create", *common, "--owner", "User:alice", "--renewer", "Group:ops") == 1
    assert "INVALID_PRINCIPAL_TYPE (67)" in capsys.readouterr().err


def test_cli_never_takes_an_hmac_or_secret_from_argv(cli: tuple[list[str], Path],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    common, tmp_path = cli
    with pytest.raises(SystemExit):
        run("tokens", "renew", *common, "--hmac", "c2VjcmV0")
    with pytest.raises(SystemExit):
        run("tokens", "renew", *common)  # an HMAC source is required
    empty = tmp_path / "empty"
    empty.write_text("\n")
    assert run("tokens", "describe", "--store", str(tmp_path / "t.json"), "--secret-key-file", str(empty)) == 1
    assert "disabled" in capsys.readouterr().err


def test_error_codes_are_kafkas() -> None:
    codes = {e.name: int(e) for e in KafkaError if 61 <= e <= 67}  # the delegation-token errors
    assert codes == {"DELEGATION_TOKEN_AUTH_DISABLED": 61, "DELEGATION_TOKEN_NOT_FOUND": 62,
                     "DELEGATION_TOKEN_OWNER_MISMATCH": 63, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED": 64,
                     "DELEGATION_TOKEN_AUTHORIZATION_FAILED": 65, "DELEGATION_TOKEN_EXPIRED": 66,
                     "INVALID_PRINCIPAL_TYPE": 67}


def test_authenticated_via_maps_listener_protocols() -> None:
    assert [authenticated_via(p) for p in ("SASL_SSL", "SASL_PLAINTEXT", "SSL", "PLAINTEXT")] == [
        "SASL", "SASL", "SSL", "PLAINTEXT"]
    with pytest.raises(ValueError):
        TokenRequestContext(ALICE, False, "TLS", NOW, None, TokenSettings())
