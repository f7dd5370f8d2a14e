"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554), served by the gateway.

Clients send a salt and a salted password; the store keeps only StoredKey/ServerKey.
Validation and error codes follow Kafka's controller (ScramControlManager).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from auth.credentials import CredentialStore
from auth.sasl.scram import MAX_ITERATIONS, MIN_ITERATIONS, scram_credential_from_salted
from authz.response_defaults import default_response
from gateway.stores.file_users import valid_user_name
from protocol.api_keys import ApiKey
from protocol.kafka_errors import KafkaError

Body = dict[str, Any]
MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
CODES = {name: code for code, name in MECHANISMS.items()}


def describe_user_scram_credentials(store: CredentialStore, request: Body, version: int) -> Body:
    response = default_response(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, version)
    requested = request["users"]
    # Kafka (ScramImage.describe): a null *and* an empty user list both mean every user.
    names = [u["name"] for u in requested] if requested else _all_users(store)
    counts = Counter(names)
    results = []
    for name in dict.fromkeys(names):
        if counts[name] > 1:
            results.append(_result(name, KafkaError.DUPLICATE_RESOURCE, f"Cannot describe SCRAM credentials for the "
                                                                        f"same user twice in a single request: {name}"))
            continue
        infos = [{"mechanism": CODES[m], "iterations": credential.iterations}
                 for m in MECHANISMS.values() if (credential := store.scram_credential(name, m)) is not None]
        if not infos:
            results.append(_result(name, KafkaError.RESOURCE_NOT_FOUND, f"Attempt to describe a user credential "
                                                                        f"that does not exist: {name}"))
            continue
        results.append({**_result(name, KafkaError.NONE, None), "credential_infos": infos})
    response["results"] = results
    return response


def _all_users(store: CredentialStore) -> list[str]:
    users = getattr(store, "users", None)
    return [u for u in users() if any(store.scram_credential(u, m) for m in MECHANISMS.values())] if users else []


def _result(user: str, code: int, message: str | None) -> Body:
    return {"user": user, "error_code": code, "error_message": message, "credential_infos": []}


def alter_user_scram_credentials(store: CredentialStore, request: Body, version: int) -> Body:
    response = default_response(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, version)
    errors: dict[str, tuple[int, str]] = {}
    seen = Counter((item["name"], item["mechanism"]) for key in ("deletions", "upsertions") for item in request[key])
    for (name, _), count in seen.items():
        if count > 1:
            errors.setdefault(name, (KafkaError.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in "
                                                                   "the same request"))
    for item in request["deletions"]:
        _check_deletion(store, item, errors)
    for item in request["upsertions"]:
        _check_upsertion(item, errors)
    users = list(dict.fromkeys(item["name"] for key in ("deletions", "upsertions") for item in request[key]))
    alter = getattr(store, "alter_scram", None)  # file and topic stores can be altered
    if callable(alter):
        deletions = [(i["name"], MECHANISMS[i["mechanism"]]) for i in request["deletions"] if i["name"] not in errors]
        upsertions = [(i["name"], MECHANISMS[i["mechanism"]], scram_credential_from_salted(
            MECHANISMS[i["mechanism"]], bytes(i["salt"]), bytes(i["salted_password"]), i["iterations"]))
            for i in request["upsertions"] if i["name"] not in errors]
        try:
            alter(upsertions, deletions)
        except (OSError, ValueError) as exc:
            for name in users:
                errors.setdefault(name, (KafkaError.UNKNOWN_SERVER_ERROR, f"credential store: {exc}"))
    else:
        for name in users:
            errors.setdefault(name, (KafkaError.UNKNOWN_SERVER_ERROR, "this credential store cannot be altered"))
    response["results"] = [{"user": name, "error_code": errors.get(name, (KafkaError.NONE, None))[0],
                            "error_message": errors.get(name, (KafkaError.NONE, None))[1]} for name in users]
    return response


def _check_deletion(store: CredentialStore, item: Body, errors: dict[str, tuple[int, str]]) -> None:
    name, mechanism = item["name"], MECHANISMS.get(item["mechanism"])
    if not name:
        errors.setdefault(name, (KafkaError.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"))
    elif mechanism is None:
        errors.setdefault(name, (KafkaError.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"))
    elif store.scram_credential(name, mechanism) is None:
        errors.setdefault(name, (KafkaError.RESOURCE_NOT_FOUND,
                                 "Attempt to delete a user credential that does not exist"))


def _check_upsertion(item: Body, errors: dict[str, tuple[int, str]]) -> None:
    name = item["name"]
    if not name:
        errors.setdefault(name, (KafkaError.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"))
    elif not valid_user_name(name):  # refused here, the other users of the request still land
        errors.setdefault(name, (KafkaError.UNACCEPTABLE_CREDENTIAL, "Username must not contain control "
                                                                     "characters"))
    elif item["mechanism"] not in MECHANISMS:
        errors.setdefault(name, (KafkaError.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"))
    elif item["iterations"] < MIN_ITERATIONS:
        errors.setdefault(name, (KafkaError.UNACCEPTABLE_CREDENTIAL, f"Too few iterations ({MIN_ITERATIONS} at least)"))
    elif item["iterations"] > MAX_ITERATIONS:
        errors.setdefault(name, (KafkaError.UNACCEPTABLE_CREDENTIAL, f"Too many iterations ({MAX_ITERATIONS} at most)"))
    elif not item["salt"] or not item["salted_password"]:
        errors.setdefault(name, (KafkaError.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"))
