"""What the comparison takes out before it compares: nothing a client acts on."""

from __future__ import annotations

import uuid

from protocol.api_keys import ApiKey
from tests.conformance.normalize import Placeholders, normalize_response


def _share_fetch(*partitions: dict[str, object]) -> dict[str, object]:
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "acquisition_lock_timeout_ms": 0,
            "responses": [{"topic_id": uuid.uuid4(), "partitions": list(partitions)}], "node_endpoints": []}


def _partition(index: int, error: int = 0, records: bytes | None = None) -> dict[str, object]:
    return {"partition_index": index, "error_code": error, "error_message": None, "acknowledge_error_code": 0,
            "acknowledge_error_message": None, "current_leader": {"leader_id": 1, "leader_epoch": 0},
            "records": records, "acquired_records": []}


def test_a_share_fetch_partition_that_answered_nothing_is_left_out_and_one_with_an_error_kept() -> None:
    quiet = normalize_response(ApiKey.SHARE_FETCH, 1, _share_fetch(_partition(0)), Placeholders())
    assert quiet["responses"] == []  # the broker's timing: its share partition was not ready yet
    refused = normalize_response(ApiKey.SHARE_FETCH, 1, _share_fetch(_partition(0), _partition(0, error=29)),
                                 Placeholders())
    [topic] = refused["responses"]
    assert [(p["partition_index"], p["error_code"]) for p in topic["partitions"]] == [(0, 29)]
    data = normalize_response(ApiKey.SHARE_FETCH, 1, _share_fetch(_partition(0, records=b"\x01")), Placeholders())
    assert len(data["responses"]) == 1  # records, compared as before
