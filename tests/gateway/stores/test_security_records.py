"""The replicated store's records and the state they add up to, without a broker."""

from __future__ import annotations

import json

import pytest

from auth.sasl.plain import plain_credential
from auth.sasl.scram import scram_credential
from authz.model import AclBinding, AclPermissionType
from gateway.stores.file_tokens import TokenEntry, TokenInfo
from gateway.stores.security_records import (
    SecuritySnapshot,
    StoreRecord,
    StoreRecordError,
    acl_record,
    apply_records,
    credential_record,
    decoy_secret_record,
    token_record,
)
from tests.authz.helpers import acl


def _binding(topic: str, permission: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:
    return acl(topic, permission=permission)


def _apply(state: SecuritySnapshot, *records: StoreRecord):  # type: ignore[no-untyped-def]
    return apply_records(state, [(r.key, r.value) for r in records])


def _token(token_id: str, expiry: int = 2000) -> TokenEntry:
    info = TokenInfo(token_id, "User:alice", "User:alice", ("User:bob",), 1000, expiry, 5000)
    return TokenEntry(info, b"h" * 32, {"SCRAM-SHA-256": scram_credential("SCRAM-SHA-256", "pw", iterations=4096)})


def test_the_same_binding_always_has_the_same_key_so_compaction_keeps_only_its_latest_record() -> None:
    assert acl_record(_binding("orders")).key == acl_record(_binding("orders"), present=False).key
    assert acl_record(_binding("orders")).key != acl_record(_binding("orders", AclPermissionType.DENY)).key
    assert json.loads(acl_record(_binding("orders")).key)["kind"] == "acl"
    assert acl_record(_binding("orders"), present=False).value is None


def test_acl_records_apply_in_log_order_and_report_the_net_change() -> None:
    deny, allow = _binding("orders", AclPermissionType.DENY), _binding("orders")
    first = _apply(SecuritySnapshot(), acl_record(deny), acl_record(allow))
    assert list(first.state.acls) == [deny, allow]
    assert first.acls_added == [deny, allow] and first.acls_removed == []
    # Added and removed within one run: no net change for the authorizer.
    second = _apply(first.state, acl_record(_binding("tmp")), acl_record(_binding("tmp"), present=False),
                    acl_record(deny, present=False))
    assert list(second.state.acls) == [allow]
    assert second.acls_added == [] and second.acls_removed == [deny]
    assert list(first.state.acls) == [deny, allow], "an applied snapshot is never changed afterwards"


def test_credentials_change_per_mechanism_and_a_user_without_any_disappears() -> None:
    scram256 = scram_credential("SCRAM-SHA-256", "pw", iterations=4096)
    scram512 = scram_credential("SCRAM-SHA-512", "pw", iterations=8192)
    plain = plain_credential("pw")
    state = _apply(SecuritySnapshot(), credential_record("carol", "SCRAM-SHA-256", scram256),
                   credential_record("carol", "SCRAM-SHA-512", scram512),
                   credential_record("carol", "PLAIN", plain)).state
    entry = state.users["carol"]
    assert entry.scram == {"SCRAM-SHA-256": scram256, "SCRAM-SHA-512": scram512} and entry.plain == plain
    state = _apply(state, credential_record("carol", "SCRAM-SHA-256", None)).state
    assert set(state.users["carol"].scram) == {"SCRAM-SHA-512"}
    state = _apply(state, credential_record("carol", "SCRAM-SHA-512", None),
                   credential_record("carol", "PLAIN", None)).state
    assert "carol" not in state.users


def test_credential_records_hold_derived_keys_never_the_password() -> None:
    record = credential_record("carol", "SCRAM-SHA-512", scram_credential("SCRAM-SHA-512", "s3cret-pw"))
    assert record.value is not None and b"s3cret-pw" not in record.value
    assert set(json.loads(record.value)) == {"v", "salt", "stored_key", "server_key", "iterations"}


def test_token_records_replace_and_delete_tokens() -> None:
    state = _apply(SecuritySnapshot(), token_record("t1", _token("t1")), token_record("t2", _token("t2"))).state
    assert set(state.tokens) == {"t1", "t2"}
    renewed = _token("t1", expiry=4000)
    state = _apply(state, token_record("t1", renewed), token_record("t2", None)).state
    assert state.tokens == {"t1": renewed}


def test_records_of_an_unknown_kind_are_skipped_and_counted() -> None:
    applied = apply_records(SecuritySnapshot(), [(b'{"kind":"from_a_newer_ksgate","user":"x"}', b'{"v":1}'),
                                                 (acl_record(_binding("a")).key, acl_record(_binding("a")).value)])
    assert applied.unknown == 1 and list(applied.state.acls) == [_binding("a")]


@pytest.mark.parametrize(("key", "value"), [
    (None, b'{"v":1}'),
    (b"not json", b'{"v":1}'),
    (b"[1]", None),
    (b'{"kind":"acl","resourceType":"TOPIC"}', b'{"v":1}'),
    (acl_record(_binding("a")).key, b'{"v":99}'),
    (b'{"kind":"credential","user":"u","mechanism":"SCRAM-SHA-256"}', b'{"v":1,"salt":"!!"}'),
    (b'{"kind":"credential","user":"","mechanism":"SCRAM-SHA-256"}', None),
    (b'{"kind":"credential","user":"u","mechanism":"MD5"}', b'{"v":1,"salt":"AA==","hash":"AA==","iterations":1}'),
    (b'{"kind":"token"}', None),
    (b'{"kind":"token","id":"t"}', b'{"v":1,"owner":"nobody"}'),
    (b'{"kind":"decoy_secret","id":"x"}', b'{"v":1,"secret":"c2hvcnQ="}'),
    (b'{"kind":"decoy_secret","id":"x"}', b'{"v":1}'),
])
def test_a_bad_record_of_a_known_kind_is_refused_and_the_state_is_kept(key: bytes | None,
                                                                        value: bytes | None) -> None:
    state = _apply(SecuritySnapshot(), acl_record(_binding("kept"))).state
    with pytest.raises(StoreRecordError):
        apply_records(state, [(acl_record(_binding("new")).key, acl_record(_binding("new")).value), (key, value)])
    assert list(state.acls) == [_binding("kept")]


def test_error_messages_never_contain_key_material() -> None:
    value = json.dumps({"v": 1, "salt": "c2VjcmV0LXNhbHQ=", "stored_key": "!!not-base64", "server_key": "AA==",
                        "iterations": 4096}).encode()
    with pytest.raises(StoreRecordError) as error:
        apply_records(SecuritySnapshot(), [(b'{"kind":"credential","user":"u","mechanism":"SCRAM-SHA-256"}', value)])
    assert "c2VjcmV0" not in str(error.value) and "not-base64" not in str(error.value)


def test_the_first_decoy_secret_in_log_order_wins_and_later_candidates_change_nothing() -> None:
    first, late = decoy_secret_record(b"1" * 32), decoy_secret_record(b"2" * 32)
    assert first.key != late.key  # racing instances' candidates all survive compaction, in log order
    state = _apply(SecuritySnapshot(), first, acl_record(_binding("a")), late).state
    assert state.decoy_secret == b"1" * 32 and list(state.acls) == [_binding("a")]
    assert _apply(state, decoy_secret_record(b"3" * 32), StoreRecord(late.key, None)).state.decoy_secret == b"1" * 32
    # Replaying from scratch (a restarted instance) converges on the same one.
    assert _apply(SecuritySnapshot(), first, late).state.decoy_secret == b"1" * 32


def test_the_decoy_secret_is_kept_out_of_reprs_and_error_messages() -> None:
    secret = b"decoy-secret-bytes-0123456789abc"
    record = decoy_secret_record(secret)
    state = _apply(SecuritySnapshot(), record).state
    encoded = record.value.decode() if record.value else ""
    assert "ZGVjb3kt" in encoded
    for text in (repr(state), repr(record)):
        assert "ZGVjb3kt" not in text and "decoy-secret" not in text
    with pytest.raises(StoreRecordError) as error:
        apply_records(SecuritySnapshot(), [(record.key, b'{"v":1,"secret":"ZGVjb3kt!!"}')])
    assert "ZGVjb3kt" not in str(error.value)
