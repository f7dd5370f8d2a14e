"""Backpressure towards a client that does not read, with the socket-free driver: a full client
socket pauses reading it and the upstream, local answers keep their place in queued.max.requests,
and frames beyond it wait for a free slot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gateway.session import actions as act
from gateway.stores.file_acls import FileAclStore
from protocol.api_keys import ApiKey
from protocol.messages import request_frame
from tests.authz.test_policies_data import request
from tests.gateway.session.session_driver import Driver, gateway_for
from tests.gateway.session.test_session import METADATA_V, metadata, metadata_answer

API_VERSIONS = {"client_software_name": "t", "client_software_version": "1"}


def api_versions(count: int, first_id: int = 0) -> bytes:
    return b"".join(request_frame(ApiKey.API_VERSIONS, 3, first_id + i, API_VERSIONS) for i in range(count))


def test_a_full_client_socket_pauses_reading_and_its_local_answers_hold_their_slots(tmp_path: Path) -> None:
    driver = Driver.connect(gateway_for(tmp_path, **{"queued.max.requests": 4}))
    driver.record(driver.session.client_write_paused(True))
    assert driver.reading_paused and driver.upstream_reading_paused
    driver.send(api_versions(10))  # one read's worth, already in the gateway's buffer
    assert driver.client_bytes == b""  # nothing more goes to a transport that is full
    assert driver.session.queued_requests == 4  # the answers count against queued.max.requests
    assert driver.session.held_frames == 6  # the rest of the read waits for a slot

    driver.record(driver.session.client_write_paused(False))
    assert driver.correlation_ids() == list(range(10))  # all of them, in order
    assert driver.session.queued_requests == 0 and driver.session.held_frames == 0
    assert not driver.reading_paused and not driver.upstream_reading_paused


def test_a_client_pause_before_the_upstream_link_exists_applies_once_it_does(tmp_path: Path) -> None:
    driver = Driver.connect(gateway_for(tmp_path), upstream_up=False)
    driver.record(driver.session.client_write_paused(True))
    ready = driver.session.upstream_ready("10.9.9.9:9092")
    driver.record(ready)
    assert act.PauseUpstreamReading(True) in ready  # the link that did not exist at the pause is paused now
    assert driver.reading_paused  # and the client, whose socket is still full, is not read either


def test_answers_held_for_a_full_client_go_out_before_a_refusal_closes(tmp_path: Path) -> None:
    driver = Driver.connect(gateway_for(tmp_path))
    driver.record(driver.session.client_write_paused(True))
    driver.send(api_versions(2))
    assert driver.client_bytes == b""  # held for the full client
    driver.send(b"\x00\x00\x00\x02\x7f\x7f")  # not Kafka: refused, the connection closes
    assert driver.closed is not None
    assert driver.correlation_ids() == [0, 1]  # answered before the refusal, as when nothing is full


def test_frames_beyond_queued_max_requests_wait_for_a_slot(tmp_path: Path) -> None:
    driver = Driver.connect(gateway_for(tmp_path, **{"queued.max.requests": 2}))
    driver.send(b"".join(request_frame(ApiKey.METADATA, METADATA_V, i, metadata(name))
                         for i, name in enumerate("abc")))
    first, second = driver.upstream_requests()  # c, in the same read, waits
    assert driver.reading_paused and driver.session.held_frames == 1
    driver.answer(first, metadata_answer("a"))
    [third] = driver.upstream_requests()
    assert third.body["topics"][0]["name"] == "c"
    driver.answer(second, metadata_answer("b"))
    driver.answer(third, metadata_answer("c"))
    assert driver.correlation_ids() == [0, 1, 2] and not driver.reading_paused


def _acl_body(key: ApiKey) -> dict[str, Any]:
    if key == ApiKey.CREATE_ACLS:
        return request(key, 3, creations=[{
            "resource_type": 2, "resource_name": "t", "resource_pattern_type": 3, "principal": "User:x",
            "host": "*", "operation": 3, "permission_type": 3}])
    return request(key, 3, resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                   principal_filter=None, host_filter=None, operation=1, permission_type=1)


def test_a_store_write_that_frees_the_last_slot_resumes_reading(tmp_path: Path) -> None:
    FileAclStore(tmp_path / "acls.json")
    driver = Driver.connect(gateway_for(tmp_path, **{
        "authorizer.class.name": "StandardAuthorizer", "ksgate.acl.file": str(tmp_path / "acls.json"),
        "super.users": "User:ANONYMOUS", "queued.max.requests": 1}))
    driver.send(request_frame(ApiKey.CREATE_ACLS, 3, 1, _acl_body(ApiKey.CREATE_ACLS))
                + request_frame(ApiKey.DESCRIBE_ACLS, 3, 2, _acl_body(ApiKey.DESCRIBE_ACLS)))
    assert driver.reading_paused  # the store write holds the only slot
    driver.run_job(act.JobKind.STORE)
    assert driver.correlation_ids() == [1, 2]
    assert not driver.reading_paused  # the freed slot is seen, not only an upstream answer's
