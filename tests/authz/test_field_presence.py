"""Field presence per version, as the policies ask it instead of version literals."""

from __future__ import annotations

import pytest

from authz.field_presence import request_has, response_has, response_nullable
from protocol.api_keys import ApiKey


@pytest.mark.parametrize(("version", "by_id"), [(12, False), (13, True)])
def test_fetch_names_topics_by_id_from_v13(version: int, by_id: bool) -> None:
    assert request_has(ApiKey.FETCH, version, "topics", "topic_id") is by_id
    assert request_has(ApiKey.FETCH, version, "topics", "topic") is not by_id


def test_offset_fetch_batches_groups_from_v8() -> None:
    assert not request_has(ApiKey.OFFSET_FETCH, 7, "groups")
    assert request_has(ApiKey.OFFSET_FETCH, 8, "groups")
    assert response_has(ApiKey.OFFSET_FETCH, 8, "groups")
    # a field inside a struct absent at that version is absent too
    assert not request_has(ApiKey.OFFSET_FETCH, 7, "groups", "topics", "topic_id")
    assert request_has(ApiKey.OFFSET_FETCH, 10, "groups", "topics", "topic_id")


def test_nullable_follows_the_schema() -> None:
    assert not response_nullable(ApiKey.JOIN_GROUP, 6, "protocol_name")
    assert response_nullable(ApiKey.JOIN_GROUP, 7, "protocol_name")


def test_a_misspelt_field_is_an_error_not_an_absent_field() -> None:
    with pytest.raises(KeyError):
        request_has(ApiKey.FETCH, 13, "topics", "topic_idd")
    with pytest.raises(KeyError):
        response_has(ApiKey.FIND_COORDINATOR, 4, "coordinator")
