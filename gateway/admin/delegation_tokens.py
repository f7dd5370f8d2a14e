"""Create/Renew/Expire/DescribeDelegationToken (KIP-48), answered by the gateway from its TokenStore.

As Kafka 4's KafkaApis.allowTokenRequests, ControllerApis and DelegationTokenControlManager; the ACL checks
(CREATE_TOKENS for another owner, which tokens describe may show) are authz/policies/admin.py's and run first.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from auth.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal
from authz.response_defaults import default_response
from gateway.ops.audit import bounded_name
from gateway.stores.file_tokens import (
    DEFAULT_EXPIRY_TIME_MS,
    DEFAULT_MAX_LIFETIME_MS,
    TokenInfo,
    TokenOutcome,
    TokenStore,
    TokenStoreError,
)
from protocol.api_keys import ApiKey
from protocol.kafka_errors import KafkaError

log = logging.getLogger("ksgate.tokens")

Body = dict[str, Any]
AUTHENTICATED_VIA = ("SASL", "SSL", "PLAINTEXT")
ERROR_TIMESTAMP = -1  # DelegationTokenManager.ErrorTimestamp: the broker's own refusals
# Errors the controller gives leave the response's timestamps at their default, 0.
CONTROLLER_ERROR_TIMESTAMP = 0

EXPIRY_TIME_KEY = "delegation.token.expiry.time.ms"
MAX_LIFETIME_KEY = "delegation.token.max.lifetime.ms"


@dataclass(slots=True, frozen=True)
class TokenSettings:
    """Kafka's token lifetimes: renew every ``expiry_time_ms``, for at most ``max_lifetime_ms``."""

    expiry_time_ms: int = DEFAULT_EXPIRY_TIME_MS
    max_lifetime_ms: int = DEFAULT_MAX_LIFETIME_MS

    def __post_init__(self) -> None:
        if self.expiry_time_ms <= 0 or self.max_lifetime_ms <= 0:
            raise ValueError(f"{EXPIRY_TIME_KEY} and {MAX_LIFETIME_KEY} must be positive")

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> TokenSettings:
        expiry, max_lifetime = settings.get(EXPIRY_TIME_KEY), settings.get(MAX_LIFETIME_KEY)
        return cls(DEFAULT_EXPIRY_TIME_MS if expiry is None else int(expiry),
                   DEFAULT_MAX_LIFETIME_MS if max_lifetime is None else int(max_lifetime))


def authenticated_via(security_protocol: str) -> str:
    """A listener's security protocol as the token rules see it: SASL, SSL or PLAINTEXT."""
    if security_protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        return "SASL"
    if security_protocol == "SSL":
        return "SSL"
    return "PLAINTEXT"


@dataclass(slots=True, frozen=True)
class TokenRequestContext:
    """What the token APIs need to know about one request's connection; ``store`` None = tokens disabled."""

    principal: KafkaPrincipal
    token_authenticated: bool
    authenticated_via: str  # "SASL" | "SSL" | "PLAINTEXT"
    now_ms: int
    store: TokenStore | None
    settings: TokenSettings = field(default_factory=TokenSettings)

    def __post_init__(self) -> None:
        if self.authenticated_via not in AUTHENTICATED_VIA:
            raise ValueError(f"authenticated_via must be one of {AUTHENTICATED_VIA}, got {self.authenticated_via!r}")

    @property
    def requester(self) -> str:
        return f"{self.principal.principal_type}:{self.principal.name}"


def allow_token_requests(ctx: TokenRequestContext) -> bool:
    """KafkaApis.allowTokenRequests: SASL or SSL-authenticated connections only, never one a token opened."""
    if ctx.token_authenticated or ctx.principal.token_authenticated:
        return False
    if ctx.authenticated_via == "PLAINTEXT":
        return False
    # 1-way SSL (no client certificate) is ANONYMOUS: no identity to own a token.
    return (ctx.principal.principal_type, ctx.principal.name) != (ANONYMOUS.principal_type, ANONYMOUS.name)


def _pair(principal: KafkaPrincipal) -> tuple[str, str]:
    return principal.principal_type, principal.name


def _split(principal: str) -> tuple[str, str]:
    parsed = KafkaPrincipal.parse(principal)
    return parsed.principal_type, parsed.name


# --- CreateDelegationToken ------------------------------------------------------------------


def _create_response(version: int, error: int, owner: tuple[str, str], requester: tuple[str, str],
                     timestamp: int) -> Body:
    """CreateDelegationTokenResponse.prepareResponse without a token: no id, no HMAC."""
    response = default_response(ApiKey.CREATE_DELEGATION_TOKEN, version)
    response.update(error_code=error, principal_type=owner[0], principal_name=owner[1],
                    issue_timestamp_ms=timestamp, expiry_timestamp_ms=timestamp, max_timestamp_ms=timestamp,
                    token_id="", hmac=b"")
    if version >= 3:
        response.update(token_requester_principal_type=requester[0], token_requester_principal_name=requester[1])
    return response


def create_delegation_token(ctx: TokenRequestContext, request: Body, version: int) -> Body:
    requester = ctx.principal
    owner_name = request.get("owner_principal_name")
    owner_type = request.get("owner_principal_type")
    if owner_name and owner_type is None:
        # new KafkaPrincipal(null, name) throws: UNKNOWN_SERVER_ERROR (the policy answers this first).
        anonymous = _pair(ANONYMOUS)
        return _create_response(version, KafkaError.UNKNOWN_SERVER_ERROR, anonymous, anonymous, ERROR_TIMESTAMP)
    owner = KafkaPrincipal(owner_type, owner_name) if owner_name and owner_type is not None else requester
    if not allow_token_requests(ctx):
        return _create_response(version, KafkaError.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, _pair(owner),
                                _pair(requester), ERROR_TIMESTAMP)
    # Here Kafka checks CREATE_TOKENS on User:<owner> for another owner: authorize_create_delegation_token did.
    renewers = [f"{r['principal_type']}:{r['principal_name']}" for r in request["renewers"]]
    if any(r["principal_type"] != USER_TYPE for r in request["renewers"]):
        return _create_response(version, KafkaError.INVALID_PRINCIPAL_TYPE, _pair(owner), _pair(requester),
                                ERROR_TIMESTAMP)
    if ctx.store is None:
        return _create_response(version, KafkaError.DELEGATION_TOKEN_AUTH_DISABLED, _pair(owner), _pair(requester),
                                CONTROLLER_ERROR_TIMESTAMP)
    try:
        info, mac = ctx.store.create(f"{owner.principal_type}:{owner.name}", ctx.requester, renewers,
                                     request["max_lifetime_ms"], ctx.now_ms, ctx.settings.expiry_time_ms,
                                     ctx.settings.max_lifetime_ms)
    except TokenStoreError as exc:
        return _create_response(version, exc.code, _pair(owner), _pair(requester), CONTROLLER_ERROR_TIMESTAMP)
    except (OSError, ValueError) as exc:
        log.error("delegation token for %s could not be created: %s", bounded_name(str(owner)), exc)
        return _create_response(version, KafkaError.UNKNOWN_SERVER_ERROR, _pair(owner), _pair(requester),
                                CONTROLLER_ERROR_TIMESTAMP)
    response = _create_response(version, KafkaError.NONE, _pair(owner), _pair(requester), 0)
    response.update(issue_timestamp_ms=info.issue_timestamp_ms, expiry_timestamp_ms=info.expiry_timestamp_ms,
                    max_timestamp_ms=info.max_timestamp_ms, token_id=info.token_id, hmac=mac)
    return response


# --- RenewDelegationToken and ExpireDelegationToken -------------------------------------------


def _outcome_response(api_key: ApiKey, version: int, outcome: TokenOutcome) -> Body:
    response = default_response(api_key, version)
    response.update(error_code=outcome.error, expiry_timestamp_ms=outcome.expiry_timestamp_ms)
    return response


def _change(api_key: ApiKey, ctx: TokenRequestContext, request: Body, version: int) -> Body:
    if not allow_token_requests(ctx):
        return _outcome_response(api_key, version,
                                 TokenOutcome(KafkaError.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, ERROR_TIMESTAMP))
    store = ctx.store
    if store is None:
        return _outcome_response(api_key, version, TokenOutcome(KafkaError.DELEGATION_TOKEN_AUTH_DISABLED))
    mac = bytes(request["hmac"])
    try:
        if api_key == ApiKey.RENEW_DELEGATION_TOKEN:
            outcome = store.renew(mac, ctx.requester, request["renew_period_ms"], ctx.now_ms,
                                  ctx.settings.expiry_time_ms)
        else:
            outcome = store.expire(mac, ctx.requester, request["expiry_time_period_ms"], ctx.now_ms)
    except (OSError, ValueError) as exc:
        log.error("delegation token store %s failed: %s", store.path, exc)
        outcome = TokenOutcome(KafkaError.UNKNOWN_SERVER_ERROR)
    return _outcome_response(api_key, version, outcome)


def renew_delegation_token(ctx: TokenRequestContext, request: Body, version: int) -> Body:
    return _change(ApiKey.RENEW_DELEGATION_TOKEN, ctx, request, version)


def expire_delegation_token(ctx: TokenRequestContext, request: Body, version: int) -> Body:
    return _change(ApiKey.EXPIRE_DELEGATION_TOKEN, ctx, request, version)


# --- DescribeDelegationToken -----------------------------------------------------------------


def _described(info: TokenInfo, mac: bytes) -> Body:
    owner, requester = _split(info.owner), _split(info.requester)
    # The requester fields exist from v3; older versions' encoders ignore them.
    return {"principal_type": owner[0], "principal_name": owner[1],
            "token_requester_principal_type": requester[0], "token_requester_principal_name": requester[1],
            "issue_timestamp": info.issue_timestamp_ms, "expiry_timestamp": info.expiry_timestamp_ms,
            "max_timestamp": info.max_timestamp_ms, "token_id": info.token_id, "hmac": mac,
            "renewers": [dict(zip(("principal_type", "principal_name"), _split(r), strict=True))
                         for r in info.renewers]}


def describe_delegation_token(ctx: TokenRequestContext, request: Body, version: int) -> Body:
    """Every unexpired token the request's owners filter selects (all of them for a null filter).

    Which of those the caller may see (its own, requested or renewable ones, or those DESCRIBE on the
    token / DESCRIBE_TOKENS on its owner allows) is decided by authorize_describe_delegation_token's
    response hook, which must run on this answer.
    """
    response = default_response(ApiKey.DESCRIBE_DELEGATION_TOKEN, version)
    if not allow_token_requests(ctx):
        response["error_code"] = KafkaError.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        return response
    store = ctx.store
    if store is None:
        response["error_code"] = KafkaError.DELEGATION_TOKEN_AUTH_DISABLED
        return response
    requested = request["owners"]
    if requested == []:
        return response  # Kafka: an empty owner list describes nothing
    owners = None if requested is None else [f"{o['principal_type']}:{o['principal_name']}" for o in requested]
    response["tokens"] = [_described(info, store.hmac(info.token_id)) for info in store.describe(owners, ctx.now_ms)]
    return response
