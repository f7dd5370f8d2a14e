"""Our codec against kio's, byte for byte, for every API version both know, and the headers.

kio (PyPI) generates its dataclasses from Apache Kafka's message JSON and has its own
readers and writers, so it is a second, independent implementation of the wire format.
For every (api key, version, request/response) both sides know, two property tests run:

* a random body built from our schema, encoded by us, decodes in kio (all bytes used) and
  kio re-encodes it to the very same bytes;
* a random kio entity, encoded by kio, decodes with our codec and we re-encode the very
  same bytes.

What only one side knows is pinned below, so that a new Kafka version in either codec
shows up here as a coverage finding rather than silently going unchecked.
"""

from __future__ import annotations

import dataclasses
import io
import typing
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map, schema_name_map
from kio.schema.request_header.v1.header import RequestHeader as KioRequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as KioRequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as KioResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as KioResponseHeaderV1
from kio.schema.types import BrokerId, GroupId, ProducerId, TopicName, TransactionalId
from kio.serial import entity_reader, entity_writer

from protocol.codec import MessageCodec
from protocol.header import (
    RequestHeader,
    decode_request_header,
    decode_response_header,
    encode_request_header,
    encode_response_header,
)
from protocol.registry import all_apis, codec_for
from protocol.schema import FieldSpec, MessageSpec
from tests.protocol.kio_strategies import kio_entities
from tests.protocol.spec_strategies import message_bodies

# Seeded and small: the whole sweep (about a thousand cases) must stay well under a minute.
SWEEP = settings(max_examples=8, derandomize=True, database=None, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Versions we parse that kio 0.6.5 does not have: Apache Kafka 4.0 removed them from its
# message JSON (KIP-896), and kio is generated from 4.x.  The gateway keeps them because
# clients older than 4.0 still send them.
ONLY_OURS: dict[int, set[int]] = {
    0: {0, 1, 2}, 1: {0, 1, 2, 3}, 2: {0}, 8: {0, 1}, 9: {0}, 19: {0, 1}, 20: {0},
    23: {0, 1}, 29: {0}, 30: {0}, 31: {0}, 32: {0}, 34: {0}, 35: {0},
    38: {0}, 39: {0}, 40: {0}, 41: {0},
    # The early-access share-group v0 (Kafka 4.0); 4.1 replaced it with v1.
    76: {0}, 77: {0}, 78: {0}, 79: {0},
    # Newer than kio 0.6.5: DeleteGroups v3 (Kafka 4.4, a per-group error message), checked against the
    # broker itself by the conformance suite (tests/conformance).
    42: {3},
    # Also newer than kio 0.6.5: ApiVersions v5 (KIP-1242), TxnOffsetCommit v6 (KIP-1319, topics by id),
    # StreamsGroupHeartbeat and StreamsGroupDescribe v1 (KIP-1331), Kafka 4.4, checked against the broker likewise.
    18: {5}, 28: {6}, 88: {1}, 89: {1},
    # And StreamsGroupTopologyDescriptionUpdate (KIP-1331, Kafka 4.4), an API kio 0.6.5 does not have at all.
    93: {0},
}
# APIs kio has and we do not: broker-to-broker and controller (KRaft) RPCs that a client
# never sends, so the gateway refuses them without parsing.
ONLY_KIO = {27, 52, 53, 54, 55, 56, 58, 59, 62, 63, 64, 67, 70, 73, 80, 81, 82, 83, 84, 85, 86, 87}
# (api key, version, kind) pairs kio gets wrong, with the reason; none so far.
KIO_WRONG: dict[tuple[int, int, str], str] = {}
# kio types some integers by meaning and refuses, on read, values outside it: error codes
# must be ones it knows (a gateway must relay codes newer than itself, so this alone rules
# kio out as the gateway's codec), timestamps are datetimes (from the epoch to year 9999;
# -1 only where Kafka says "none"), and int64 durations are timedeltas (which kio writes
# back through a float number of seconds, exact up to 2**53 microseconds).  Our bodies
# stay inside those domains; every other field ranges over its whole wire type.
_KIO_ERROR_CODES = st.sampled_from(sorted(int(code) for code in ErrorCode))
_KIO_TIMESTAMPS = st.integers(0, 253_402_300_799_999)
_KIO_DURATIONS = st.integers(-(2**53 // 1000), 2**53 // 1000)
KIO_DOMAINS: dict[str, st.SearchStrategy[Any]] = {
    "error_code": _KIO_ERROR_CODES, "partition_error_code": _KIO_ERROR_CODES,
    "log_append_time_ms": st.just(-1) | _KIO_TIMESTAMPS,
    **{name: _KIO_TIMESTAMPS for name in ("expiry_timestamp_ms", "issue_timestamp_ms",
                                           "max_timestamp_ms", "transaction_start_time_ms")},
    **{name: _KIO_DURATIONS for name in ("expiry_time_period_ms", "max_lifetime_ms", "renew_period_ms",
                                          "retention_time_ms", "session_lifetime_ms")},
}
# 262 (api, version) pairs were shared when this was written; versions are only added.
MIN_SHARED_PAIRS = 262


def _kio_versions(api_key: int) -> set[int]:
    return set(schema_name_map[api_key_map[api_key]])


@dataclass(frozen=True)
class Case:
    spec: MessageSpec
    version: int

    @property
    def codec(self) -> MessageCodec:
        return codec_for(self.spec, self.version)

    @property
    def kio_type(self) -> Any:
        if self.spec.kind == "request":
            return load_request_schema(self.spec.api_key, self.version)
        return load_response_schema(self.spec.api_key, self.version)

    @property
    def id(self) -> str:
        return f"{self.spec.name}-v{self.version}"

    def __repr__(self) -> str:
        return self.id

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # hypothesis' falsifying-example report
        printer.text(self.id)


def _cases() -> list[Case]:
    cases = []
    for key, schema in sorted(all_apis().items()):
        if key not in api_key_map:
            continue
        shared = _kio_versions(key) & set(range(schema.min_version, schema.max_version + 1))
        for version in sorted(shared):
            for spec in (schema.request, schema.response):
                if (key, version, spec.kind) not in KIO_WRONG:
                    cases.append(Case(spec, version))
    return cases


CASES = _cases()


def _kio_encode(kio_type: Any, value: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(kio_type)(buffer, value)
    return buffer.getvalue()


def _kio_decode(kio_type: Any, wire: bytes) -> Any:
    value, used = entity_reader(kio_type)(wire, 0)
    assert used == len(wire), f"kio used {used} of {len(wire)} bytes"
    return value


# --- coverage ------------------------------------------------------------------------

def test_versions_only_one_codec_knows_are_the_known_ones() -> None:
    apis = all_apis()
    only_ours: dict[int, set[int]] = {}
    for key, schema in apis.items():
        ours = set(range(schema.min_version, schema.max_version + 1))
        theirs = _kio_versions(key) if key in api_key_map else set()
        assert not theirs - ours, f"{schema.name}: kio has versions {sorted(theirs - ours)} we lack"
        if ours - theirs:
            only_ours[key] = ours - theirs
    assert only_ours == ONLY_OURS
    assert set(api_key_map) - set(apis) == ONLY_KIO


def test_the_sweep_covers_every_shared_pair() -> None:
    pairs = {(c.spec.api_key, c.version) for c in CASES}
    assert len(pairs) >= MIN_SHARED_PAIRS
    assert len(CASES) == 2 * len(pairs) - len(KIO_WRONG)


# --- bodies --------------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
@SWEEP
@given(data=st.data())
def test_our_encoding_reencodes_identically_in_kio(case: Case, data: st.DataObject) -> None:
    body = data.draw(message_bodies(case.spec, case.version, KIO_DOMAINS))
    wire = bytes(case.codec.encode(body))
    assert _kio_encode(case.kio_type, _kio_decode(case.kio_type, wire)) == wire


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
@SWEEP
@given(data=st.data())
def test_kio_encoding_reencodes_identically_with_ours(case: Case, data: st.DataObject) -> None:
    wire = _kio_encode(case.kio_type, data.draw(kio_entities(case.kio_type)))
    assert bytes(case.codec.encode(case.codec.decode(wire))) == wire


# --- entity annotations ----------------------------------------------------------------

# kio carries Kafka's entityType in its field types; each must be our entity= on that field.
_KIO_ENTITIES: dict[type, str] = {TopicName: "topicName", GroupId: "groupId", TransactionalId: "transactionalId",
                                  ProducerId: "producerId", BrokerId: "brokerId"}


def _kio_parts(hint: Any) -> tuple[type | None, type | None]:
    """(entity type, nested dataclass) a kio field hint carries, through ``| None`` and tuples."""
    args = typing.get_args(hint)
    inner = [a for a in args if a is not type(None) and a is not Ellipsis] if args else [hint]
    leaf = inner[0] if len(inner) == 1 else hint
    if typing.get_args(leaf):
        return _kio_parts(leaf)
    if dataclasses.is_dataclass(leaf):
        return None, leaf  # type: ignore[return-value]
    return (leaf if leaf in _KIO_ENTITIES else None), None


def _missing_entities(fields: list[FieldSpec], kio_type: type, version: int, where: str) -> list[str]:
    ours = {f.name: f for f in fields if version in f.versions}
    missing = []
    for name, hint in typing.get_type_hints(kio_type).items():
        if name.startswith("__") or name not in ours:
            continue
        entity, nested = _kio_parts(hint)
        if entity is not None and ours[name].entity != _KIO_ENTITIES[entity]:
            missing.append(f"{where}.{name}: {_KIO_ENTITIES[entity]}, ours {ours[name].entity}")
        if nested is not None:
            missing += _missing_entities(ours[name].fields, nested, version, f"{where}.{name}")
    return missing


def test_every_entity_kafka_names_is_annotated_in_our_schemas() -> None:
    """The guards find ids through entity=; Kafka's entityType (as kio carries it) must not be richer."""
    missing = [m for case in CASES for m in _missing_entities(case.spec.fields, case.kio_type, case.version, case.id)]
    assert missing == []


# --- headers -------------------------------------------------------------------------

_CLIENT_IDS = st.none() | st.text(max_size=12)
_I16 = st.integers(-(1 << 15), (1 << 15) - 1)
_I32 = st.integers(-(1 << 31), (1 << 31) - 1)


@pytest.mark.parametrize(("header_version", "kio_type"), [(1, KioRequestHeaderV1), (2, KioRequestHeaderV2)])
@SWEEP
@given(api_key=_I16, api_version=_I16, correlation_id=_I32, client_id=_CLIENT_IDS)
def test_request_headers_agree_with_kio(header_version: int, kio_type: Any, api_key: int, api_version: int,
                                        correlation_id: int, client_id: str | None) -> None:
    ours = bytes(encode_request_header(
        RequestHeader(api_key, api_version, correlation_id, client_id, header_version, 0)))
    theirs = _kio_encode(kio_type, kio_type(request_api_key=api_key, request_api_version=api_version,
                                            correlation_id=correlation_id, client_id=client_id))
    assert ours == theirs
    decoded = _kio_decode(kio_type, ours)
    assert (decoded.request_api_key, decoded.correlation_id, decoded.client_id) == (api_key, correlation_id, client_id)


@pytest.mark.parametrize(("api_key", "version"), [(3, 8), (3, 9), (18, 2), (18, 3), (0, 9)])
@SWEEP
@given(correlation_id=_I32, client_id=_CLIENT_IDS)
def test_our_request_header_decoder_reads_kios_headers(api_key: int, version: int, correlation_id: int,
                                                        client_id: str | None) -> None:
    kio_type = KioRequestHeaderV2 if all_apis()[api_key].is_flexible(version) else KioRequestHeaderV1
    wire = _kio_encode(kio_type, kio_type(request_api_key=api_key, request_api_version=version,
                                          correlation_id=correlation_id, client_id=client_id))
    header, _ = decode_request_header(memoryview(wire))
    assert (header.correlation_id, header.client_id, header.size) == (correlation_id, client_id, len(wire))


@pytest.mark.parametrize(("header_version", "kio_type"), [(0, KioResponseHeaderV0), (1, KioResponseHeaderV1)])
@SWEEP
@given(correlation_id=_I32)
def test_response_headers_agree_with_kio(header_version: int, kio_type: Any, correlation_id: int) -> None:
    ours = encode_response_header(correlation_id, header_version)
    assert ours == _kio_encode(kio_type, kio_type(correlation_id=correlation_id))
    assert decode_response_header(memoryview(ours), header_version) == (correlation_id, len(ours))
    assert _kio_decode(kio_type, ours).correlation_id == correlation_id
