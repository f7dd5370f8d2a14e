"""The upstream half of /readyz, without sockets: answers in, a reason (or None) out."""

from __future__ import annotations

from gateway.upstream.health import FEATURES_REFRESH_S, MAX_PROBE_INTERVAL_S, UpstreamHealth


def test_not_ready_before_any_answer_and_ready_right_after_one() -> None:
    health = UpstreamHealth(timeout_s=10.0)
    assert health.problem(100.0) == "no upstream bootstrap server has answered yet"
    health.answered(100.0)
    assert health.problem(100.0) is None
    assert health.problem(110.0) is None  # exactly the timeout: still ready


def test_silence_longer_than_the_timeout_is_a_problem_naming_the_key_until_the_next_answer() -> None:
    health = UpstreamHealth(timeout_s=10.0)
    health.answered(100.0)
    problem = health.problem(110.5)
    assert problem is not None and "10500 ms" in problem and "ksgate.readiness.upstream.timeout.ms" in problem
    health.answered(111.0)
    assert health.problem(111.0) is None


def test_probes_run_a_third_of_the_timeout_apart_at_most_every_five_seconds() -> None:
    assert UpstreamHealth(timeout_s=3.0).probe_interval_s == 1.0
    assert UpstreamHealth(timeout_s=600.0).probe_interval_s == MAX_PROBE_INTERVAL_S


def test_a_recent_answer_from_a_client_link_makes_the_probe_unnecessary() -> None:
    health = UpstreamHealth(timeout_s=3.0)
    assert health.needs_probe(0.0)
    health.answered(10.0)
    assert not health.needs_probe(10.5)
    assert health.needs_probe(11.0)


def test_the_problem_names_the_latest_probe_failure_until_an_answer() -> None:
    health = UpstreamHealth(timeout_s=1.0)
    health.answered(100.0)
    health.probe_failed("upstream refused the gateway's credentials: invalid credentials")
    assert health.problem(100.5) is None  # within the timeout a failed probe alone is no outage
    problem = health.problem(102.0)
    assert problem is not None and "no upstream broker has answered" in problem
    assert problem.endswith("the latest probe: upstream refused the gateway's credentials: invalid credentials")
    health.answered(102.5)
    assert health.problem(104.0) is not None and "latest probe" not in (health.problem(104.0) or "")


def test_under_client_traffic_the_probe_still_rereads_the_feature_levels_once_a_minute() -> None:
    health = UpstreamHealth(timeout_s=3.0)
    health.features_read = 0.0
    for now in (10.0, 30.0, FEATURES_REFRESH_S - 0.5):  # client links keep answering
        health.answered(now)
        assert not health.needs_probe(now + 0.1)
    health.answered(FEATURES_REFRESH_S)
    assert health.needs_probe(FEATURES_REFRESH_S)
