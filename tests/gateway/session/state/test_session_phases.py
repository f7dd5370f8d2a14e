"""The session holds its phase as a value: the phases a connection goes through, and what an
impossible or late event does, driven without sockets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from authz.model import AclOperation
from gateway.server import Gateway
from gateway.session import actions as act
from gateway.session.session import ProxySession
from gateway.session.state.phase import Phase
from gateway.stores.file_acls import FileAclStore
from gateway.stores.file_users import FileCredentialStore
from protocol.api_keys import ApiKey
from protocol.messages import request_frame, response_frame
from tests.authz.helpers import acl
from tests.authz.test_policies_data import request
from tests.gateway.session.session_driver import Driver, gateway_for
from tests.gateway.session.test_session import (
    METADATA_V,
    PRODUCE_V,
    authenticated,
    log_in,
    metadata,
    metadata_answer,
)


def test_a_login_and_a_reauthentication(alice_sees_a: Gateway) -> None:
    driver = Driver.connect(alice_sees_a, "SASL_PLAINTEXT")
    assert driver.session.phase is Phase.AUTHENTICATING
    log_in(driver, "alice", "alice-secret")
    assert driver.session.phase is Phase.AUTHENTICATED
    driver.send(request_frame(ApiKey.SASL_HANDSHAKE, 1, 10, {"mechanism": "PLAIN"}))
    assert driver.session.phase is Phase.REAUTHENTICATING
    driver.send(request_frame(ApiKey.SASL_AUTHENTICATE, 2, 11, {"auth_bytes": b"\0alice\0alice-secret"}))
    if any(j.kind is act.JobKind.VERIFY for j in driver.jobs.values()):
        driver.run_job(act.JobKind.VERIFY)
    assert driver.session.phase is Phase.AUTHENTICATED and driver.closed is None


def test_a_failed_login_says_farewell_then_closes(alice_sees_a: Gateway) -> None:
    driver = Driver.connect(alice_sees_a, "SASL_PLAINTEXT")
    log_in(driver, "alice", "wrong")
    assert driver.session.phase is Phase.FAREWELL and driver.session.closing and driver.closed is None
    driver.fire("farewell")
    assert driver.session.phase is Phase.CLOSING and driver.closed is not None
    driver.record(driver.session.client_lost())
    assert driver.session.phase is Phase.CLOSED


def test_a_known_principal_skips_authentication_and_drains(tmp_path: Path) -> None:
    driver = Driver.connect(gateway_for(tmp_path))
    assert driver.session.phase is Phase.AUTHENTICATED
    driver.send(request_frame(ApiKey.METADATA, METADATA_V, 1, metadata("a")))
    driver.record(driver.session.drain())
    assert driver.session.phase is Phase.DRAINING and driver.reading_paused
    [sent] = driver.upstream_requests()
    driver.answer(sent, metadata_answer("a"))
    assert driver.session.phase is Phase.CLOSING and driver.correlation_ids() == [1]


def test_draining_before_a_login_closes_at_once(alice_sees_a: Gateway) -> None:
    driver = Driver.connect(alice_sees_a, "SASL_PLAINTEXT")
    driver.record(driver.session.drain())
    assert driver.session.phase is Phase.CLOSING and driver.closed is not None


def test_an_upstream_event_before_the_login_is_a_bug_that_closes_only_this_connection(
        alice_sees_a: Gateway) -> None:
    driver = Driver.connect(alice_sees_a, "SASL_PLAINTEXT")
    wire = response_frame(ApiKey.METADATA, METADATA_V, 1, metadata_answer("a"))
    driver.record(driver.session.upstream_frames([memoryview(wire)]))
    assert driver.closed is not None and driver.closed.reason == "internal error in the session"
    assert driver.client_bytes == b"" and driver.session.phase is Phase.CLOSING


def test_reports_after_the_close_are_ignored(alice_sees_a: Gateway) -> None:
    driver = authenticated(alice_sees_a)
    driver.send(request_frame(ApiKey.METADATA, METADATA_V, 1, metadata("a")))
    [sent] = driver.upstream_requests()
    driver.record(driver.session.client_lost())
    wire = response_frame(ApiKey.METADATA, METADATA_V, sent.upstream_id, metadata_answer("a"))
    assert driver.session.upstream_frames([memoryview(wire)]) == []
    assert driver.session.job_done(1, None) == [] and driver.session.drain() == []
    assert driver.session.timer_fired("authentication") == []
    assert driver.session.phase is Phase.CLOSED


def test_client_bytes_before_connected_are_a_bug_the_phase_table_catches(tmp_path: Path) -> None:
    # The steady phase skips the table for client bytes; every other phase must still ask it.
    session = ProxySession(gateway_for(tmp_path).ctx, "PLAINTEXT", None)
    driver = Driver(session)
    driver.send(request_frame(ApiKey.METADATA, METADATA_V, 1, metadata("a")))
    assert driver.closed is not None and driver.closed.reason == "internal error in the session"
    assert driver.upstream_bytes == b"" and session.phase is Phase.CLOSING


def test_client_bytes_after_the_close_are_not_even_framed(tmp_path: Path) -> None:
    driver = Driver.connect(gateway_for(tmp_path))
    driver.record(driver.session.abort("test"))
    assert driver.session.phase is Phase.CLOSING
    driver.send(request_frame(ApiKey.METADATA, METADATA_V, 1, metadata("a")))
    assert driver.session.held_frames == 0 and driver.upstream_bytes == b""


# --- refused in turn: an acks=0 Produce Kafka would answer by closing ---------------------------------------------

def _produce_acks0(*topics: str) -> dict[str, Any]:
    return request(ApiKey.PRODUCE, PRODUCE_V, acks=0, timeout_ms=1000, topic_data=[
        {"name": t, "partition_data": [{"index": 0, "records": b"x" * 61}]} for t in topics])


def test_a_denied_acks0_produce_closes_after_the_answers_owed_and_nothing_after_it_is_relayed(
        alice_sees_a: Gateway) -> None:
    driver = authenticated(alice_sees_a)  # alice may describe topic a, not write t
    driver.send(request_frame(ApiKey.METADATA, METADATA_V, 1, metadata("a"))
                + request_frame(ApiKey.PRODUCE, PRODUCE_V, 2, _produce_acks0("t"))
                + request_frame(ApiKey.METADATA, METADATA_V, 3, metadata("a")))
    [owed] = driver.upstream_requests()  # the Metadata before it; the one after it is never relayed
    assert owed.api_key == ApiKey.METADATA and driver.closed is None and driver.reading_paused
    assert driver.session.phase is Phase.REFUSED and not driver.session.closing
    driver.answer(owed, metadata_answer("a"))
    assert driver.correlation_ids() == [1] and driver.closed is not None
    assert driver.session.phase is Phase.CLOSING and driver.upstream_requests() == []


def test_a_denied_acks0_produce_counts_as_an_authorization_refusal(alice_sees_a: Gateway) -> None:
    """ksgate_authorization_decisions_total's "refused": the Refuse never reaches the session as a decision."""
    decisions = alice_sees_a.ctx.metrics.authorization_decisions
    driver = authenticated(alice_sees_a)  # alice may describe topic a, not write t
    driver.send(request_frame(ApiKey.METADATA, METADATA_V, 1, metadata("a"))
                + request_frame(ApiKey.PRODUCE, PRODUCE_V, 2, _produce_acks0("t")))
    assert driver.session.phase is Phase.REFUSED
    counted = {labels: decisions.value(labels) for labels in
               [("Produce", "refused"), ("Produce", "denied"), ("Metadata", "allowed"), ("Metadata", "refused")]}
    assert counted == {("Produce", "refused"): 1, ("Produce", "denied"): 0,
                       ("Metadata", "allowed"): 1, ("Metadata", "refused"): 0}


def test_a_partly_allowed_acks0_produce_relays_its_allowed_part_then_closes(tmp_path: Path) -> None:
    FileAclStore(tmp_path / "acls.json").add([acl("a", AclOperation.WRITE)])
    users = FileCredentialStore(tmp_path / "users.json")
    users.upsert_user("alice", "alice-secret")
    gateway = gateway_for(tmp_path, "SASL_PLAINTEXT", **{
        "authorizer.class.name": "StandardAuthorizer", "ksgate.acl.file": str(tmp_path / "acls.json"),
        "sasl.enabled.mechanisms": "PLAIN", "ksgate.credentials.file": str(tmp_path / "users.json"),
        "ksgate.sasl.plain.allow.insecure": True})
    driver = authenticated(gateway)
    driver.send(request_frame(ApiKey.PRODUCE, PRODUCE_V, 2, _produce_acks0("a", "t"))
                + request_frame(ApiKey.METADATA, METADATA_V, 3, metadata("a")))
    [relayed] = driver.upstream_requests()  # written as Kafka appends it, then closed: nothing was owed
    assert relayed.api_key == ApiKey.PRODUCE and [t["name"] for t in relayed.body["topic_data"]] == ["a"]
    assert relayed.body["acks"] == 0 and driver.closed is not None and driver.client_bytes == b""
    closing = next(i for i, a in enumerate(driver.actions) if isinstance(a, act.Close))
    assert any(isinstance(a, act.SendToUpstream) for a in driver.actions[:closing])  # sent before the close


def test_a_refusal_in_turn_before_the_upstream_link_is_up_waits_to_relay_what_came_before(
        alice_sees_a: Gateway) -> None:
    driver = Driver.connect(alice_sees_a, "SASL_PLAINTEXT")
    log_in(driver, "alice", "alice-secret")  # the link is opening: what is relayed waits in the backlog
    driver.client_bytes.clear()  # the login's answers
    driver.send(request_frame(ApiKey.METADATA, METADATA_V, 3, metadata("a"))
                + request_frame(ApiKey.PRODUCE, PRODUCE_V, 4, _produce_acks0("t")))
    assert driver.session.phase is Phase.REFUSED and driver.closed is None and driver.upstream_bytes == b""
    driver.record(driver.session.upstream_ready("10.9.9.9:9092"))  # not closed on it: the Metadata is owed
    [owed] = driver.upstream_requests()
    assert owed.api_key == ApiKey.METADATA and driver.closed is None
    driver.answer(owed, metadata_answer("a"))
    assert driver.correlation_ids() == [3] and driver.closed is not None
