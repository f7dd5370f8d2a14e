"""Reading the audit log with the explicit schema: types, bad lines, the time window, date partitions."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession
from pyspark.sql import types as T

from pipeline.errors import PipelineError
from pipeline.instants import parse_instant
from pipeline.schema import (
    AUTHENTICATION_FIELDS,
    AUTHORIZATION_FIELDS,
    DECISIONS,
    authentications,
    authorizations,
    read_events,
)
from tests.pipeline.events import authentication, authorization, failure, write_events


def test_both_kinds_parse_with_their_documented_types(spark: SparkSession, tmp_path: Path) -> None:
    good = [authorization("User:alice", "WRITE", "TOPIC", "orders-1", rule="NoAclDefault", at=1),
            authentication(decision="SUCCEEDED", host="10.0.0.1", principal="User:alice", at=2),
            failure("10.9.9.9", "mallory", 3)]
    path = write_events(tmp_path, good)
    with open(path, "a", encoding="utf-8") as file:
        file.write("not json at all\n")
        file.write(json.dumps({**good[0], "ts": "yesterday"}) + "\n")  # unparseable time
        file.write(json.dumps({**good[0], "schema": 2}) + "\n")  # a schema this reader does not know
        file.write(json.dumps({**good[0], "event": "something-else"}) + "\n")
    events = read_events(spark, [path])
    types = {f.name: f.dataType for f in events.schema.fields}
    assert (types["ts"], types["client_port"], types["api_key"], types["date"]) == (
        T.TimestampType(), T.IntegerType(), T.IntegerType(), T.DateType())
    assert events.count() == 3
    authz = authorizations(events).collect()
    assert [tuple(r[f] for f in ("principal", "client_port", "api_name", "operation", "resource_name", "decision",
                                 "rule", "pattern_type", "date")) for r in authz] == [
        ("User:alice", 50000, "Produce", "WRITE", "orders-1", "ALLOWED", "NoAclDefault", None, date(2026, 11, 20))]
    assert authorizations(events).columns == [*AUTHORIZATION_FIELDS, DECISIONS, "date"]
    authn = authentications(events).orderBy("ts").collect()
    assert [(r["principal"], r["attempted_user"], r["decision"], r["failure"]) for r in authn] == [
        ("User:alice", None, "SUCCEEDED", None), (None, "mallory", "FAILED", "bad_credentials")]
    assert authentications(events).columns == [*AUTHENTICATION_FIELDS, DECISIONS, "date"]


def test_since_until_and_date_partitions(spark: SparkSession, tmp_path: Path) -> None:
    day = 24 * 60
    for n in range(3):  # date=2026-11-20 .. 22, one event at 12:00 each day
        write_events(tmp_path / f"date=2026-11-{20 + n}", [
            authorization("User:a", "READ", "TOPIC", f"t{n}", rule="NoAclDefault", at=n * day + 720)],
            name="part-00000.json")
    everything = read_events(spark, [str(tmp_path)])
    assert sorted((r["resource_name"], r["date"]) for r in everything.collect()) == [
        ("t0", date(2026, 11, 20)), ("t1", date(2026, 11, 21)), ("t2", date(2026, 11, 22))]
    window = read_events(spark, [str(tmp_path)], since=parse_instant("2026-11-21"),
                         until=parse_instant("2026-11-22T12:00:00Z"))
    assert [r["resource_name"] for r in window.collect()] == ["t1"]  # until is exclusive


def test_instants_are_utc() -> None:
    assert parse_instant("2026-11-22") == datetime(2026, 11, 22, tzinfo=UTC)
    assert parse_instant("2026-11-22T13:00:00.5+02:00") == datetime(2026, 11, 22, 11, 0, 0, 500000, tzinfo=UTC)
    assert parse_instant("2026-11-22T23:59:01.123Z").microsecond == 123000
    with pytest.raises(PipelineError):
        parse_instant("last tuesday")


def test_only_the_documented_time_shape_is_an_event_time(spark: SparkSession) -> None:
    from pyspark.sql import functions as F

    from pipeline.schema import event_time, iso_text

    texts = ["2026-11-20T10:00:00.123Z", "2026-11-20T11:00:00.123+01:00", "2026-11-20", "2026-11-20 10:00:00.123Z",
             "2026-11-20T10:00:00Z", "2026-11-20T25:00:00.123Z", "yesterday"]
    rows = spark.createDataFrame([(t,) for t in texts], "ts string").select(iso_text(event_time(F.col("ts"))))
    moment = "2026-11-20T10:00:00.123Z"
    assert [r[0] for r in rows.collect()] == [moment, moment, None, None, None, None, None]
