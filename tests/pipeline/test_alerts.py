"""ksgate audit alerts: brute force, credential stuffing, new access and denial spikes on hand-built logs."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession

from pipeline.alerts import Alert, duration, run_alerts
from tests.pipeline.events import authentication, authorization, failure, write_events

DAY, HOUR = 24 * 60, 60


def _events() -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    # 30 failures for "admin" from one host in 2.5 minutes, on day 4: brute force.
    events += [failure("10.9.9.9", "admin", 3 * DAY + HOUR + i / 12) for i in range(30)]
    # A normal client mistyping now and then, and succeeding.
    events += [failure("10.1.1.1", "alice", 9 * HOUR + i * 3 * HOUR) for i in range(3)]
    events += [authentication(decision="SUCCEEDED", host="10.1.1.1", principal="User:alice", at=9 * HOUR + 1)]
    # Eight different user names from one host within two minutes: credential stuffing, not brute force.
    events += [failure("10.8.8.8", f"user{i}", DAY + 5 * HOUR + i / 4) for i in range(8)]
    # User:old reads topic a every day, topic b only on the last day.
    events += [authorization("User:old", "READ", "TOPIC", "a", rule="NoAclDefault", at=d * DAY + 8 * HOUR)
               for d in range(4)]
    events += [authorization("User:old", "READ", "TOPIC", "b", rule="NoAclDefault", at=3 * DAY + 8 * HOUR)]
    # Denials: one an hour for ten hours then 50 in an hour (spike); a steady 30 an hour (none).
    for hour in range(10):
        events.append(authorization("User:spiky", "DESCRIBE", "TOPIC", "x", decision="DENIED",
                                    rule="NoMatchingAcl", at=hour * HOUR + 5))
        events += [authorization("User:steady", "DESCRIBE", "TOPIC", "y", decision="DENIED", rule="NoMatchingAcl",
                                 at=hour * HOUR + i) for i in range(30)]
    events += [authorization("User:spiky", "DESCRIBE", "TOPIC", "x", decision="DENIED", rule="NoMatchingAcl",
                             at=10 * HOUR + i) for i in range(50)]
    return events


@pytest.fixture(scope="module")
def outdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("alerts")


@pytest.fixture(scope="module")
def alerts(spark: SparkSession, outdir: Path) -> list[Alert]:
    log = write_events(outdir / "in", _events())
    return run_alerts(spark, [log], str(outdir / "out"))


def _of(alerts: list[Alert], kind: str) -> list[Alert]:
    return [a for a in alerts if a.type == kind]


def test_brute_force_fires_for_the_hammering_host_only(alerts: list[Alert]) -> None:
    [alert] = _of(alerts, "brute_force")
    assert (alert.subject, alert.severity, alert.count) == ("host 10.9.9.9", "high", 30)
    assert alert.details["attempted_users"] == ["admin"]
    assert alert.first_seen == "2026-11-23T00:57:00.000Z"  # the first 5-minute window reaching 20 failures
    assert alert.last_seen == "2026-11-23T01:03:00.000Z"
    assert not any("10.1.1.1" in a.subject for a in alerts)


def test_brute_force_against_one_user(alerts: list[Alert]) -> None:
    assert [(a.subject, a.count, a.details["client_hosts"]) for a in _of(alerts, "brute_force_user")] == [
        ("user admin", 30, ["10.9.9.9"])]


def test_credential_stuffing_counts_distinct_users_per_host(alerts: list[Alert]) -> None:
    [alert] = _of(alerts, "credential_stuffing")
    assert (alert.subject, alert.count) == ("host 10.8.8.8", 8)
    assert alert.details["attempted_users"] == [f"user{i}" for i in range(8)]


def test_new_principal_resource_pairs_are_those_first_seen_on_the_last_day(alerts: list[Alert]) -> None:
    assert [(a.subject, a.count, a.severity) for a in _of(alerts, "new_access")] == [
        ("User:old → TOPIC b", 1, "low")]


def test_denial_spike_against_the_principals_own_median(alerts: list[Alert]) -> None:
    [spike] = _of(alerts, "denial_spike")
    assert (spike.subject, spike.count, spike.first_seen) == ("User:spiky", 50, "2026-11-20T10:00:00.000Z")
    assert spike.details["hourly_median"] == 1.0


def test_outputs_are_json_lines_and_markdown(alerts: list[Alert], outdir: Path) -> None:
    lines = (outdir / "out" / "alerts.jsonl").read_text().splitlines()
    assert [json.loads(line)["type"] for line in lines] == [a.type for a in alerts]
    markdown = (outdir / "out" / "alerts.md").read_text()
    assert "## Brute force (failed authentications from one host)" in markdown
    assert "host 10.9.9.9" in markdown and "**5** alerts." in markdown


def test_duration_is_readable() -> None:
    assert [duration(timedelta(minutes=5)), duration(timedelta(days=1)), duration(timedelta(days=2)),
            duration(timedelta(hours=3)), duration(timedelta(seconds=90))] == ["5 min", "1 day", "2 days", "3 h",
                                                                            "90 s"]
