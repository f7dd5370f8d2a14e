"""bench/anchors/haproxy_tls.py's TLS mode: the CPython TLS floor paths (pyrelay --tls), the ratios that set
ksgate's TLS against that floor and the floor against HAProxy, and the direct reference of the fixed-rate runs.

No process is started here (test_haproxy_tls_smoke.py runs the whole bench).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from auth.cert_tools import write_tls_material
from bench.anchors.haproxy_tls import (
    PATHS,
    PYRELAY,
    TLS_MODE_PATHS,
    HAProxyProcess,
    PyRelayProcess,
    Report,
    ksgate_settings,
    parse_args,
    relays,
    tls_fixed_rate_lines,
    tls_ratio_lines,
)
from bench.anchors.kroxylicious import fixed_rate_lines, throughput_lines
from bench.latency import Run
from bench.throughput import PathRun


def test_the_tls_mode_runs_the_tls_floor_paths_by_default_and_refuses_the_plain_ones() -> None:
    assert parse_args([]).paths == list(PATHS)
    assert {"pyrelay-tls-uvloop", "pyrelay-tls-asyncio", "ksgate-ssl", "haproxy"} <= set(PATHS)
    picked = parse_args(["--paths", "pyrelay-tls-uvloop,ksgate-ssl"]).paths
    assert picked == ["ksgate-ssl", "pyrelay-tls-uvloop"]  # in PATHS' order
    with pytest.raises(SystemExit):
        parse_args(["--paths", "pyrelay-uvloop"])  # the plain relay is a --plain path
    with pytest.raises(SystemExit):
        parse_args(["--plain", "--paths", "pyrelay-tls-uvloop"])


def test_each_tls_pyrelay_path_terminates_tls_with_the_proxies_certificate_on_its_own_loop(tmp_path: Path) -> None:
    tls = write_tls_material(tmp_path / "tls")
    found = relays(list(PATHS), "haproxy", tmp_path, tls, 0)
    assert sorted(found) == ["haproxy", "pyrelay-tls-asyncio", "pyrelay-tls-uvloop"]  # ksgate: not a relay
    assert isinstance(found["haproxy"], HAProxyProcess) and found["haproxy"].pem is not None
    for path, loop in (("pyrelay-tls-uvloop", "uvloop"), ("pyrelay-tls-asyncio", "asyncio")):
        relay = found[path]
        assert isinstance(relay, PyRelayProcess)
        relay.upstream = "127.0.0.1:9092"
        assert relay.command()[1] == str(PYRELAY)
        assert relay.command()[2:] == ["--port", str(relay.port), "--upstream", "127.0.0.1:9092", "--loop", loop,
                                       "--tls", str(tls.server_cert), str(tls.server_key)]


def test_the_plain_pyrelay_paths_get_no_tls(tmp_path: Path) -> None:
    relay = relays(["pyrelay-uvloop"], "haproxy", tmp_path, None, 0)["pyrelay-uvloop"]
    assert isinstance(relay, PyRelayProcess) and "--tls" not in relay.command()


def run(path: str, repeat: int, produce_mb_s: float, produce_cpu: float, fetch_cpu: float) -> PathRun:
    return PathRun(path, repeat, produce_mb_s=produce_mb_s, fetch_mb_s=100.0,
                   cpu_produce={"gateway": produce_cpu}, cpu_fetch={"gateway": fetch_cpu})


def test_ksgate_tls_is_set_against_the_cpython_floor_per_mb_and_each_repeat() -> None:
    report = Report()
    # CPU % of a core at 100 MB/s fetched: ms per MB = % * 10 / MB/s
    for repeat, (ksgate, floor) in enumerate(((20.0, 10.0), (24.0, 16.0), (30.0, 10.0))):
        report.runs += [run("ksgate-ssl", repeat, 100.0, 50.0, ksgate), run("pyrelay-tls-uvloop", repeat, 100.0,
                                                                            25.0, floor),
                        run("haproxy", repeat, 100.0, 20.0, 8.0)]
    lines = {(line[:16].strip(), line[16:].split()[0]): " ".join(line[16:].split()[1:]) for line in
             tls_ratio_lines(report, ["haproxy", "ksgate-ssl", "pyrelay-tls-uvloop"])}
    assert not any(pair == "ksgate/haproxy" for _, pair in lines)  # no ksgate path in this run
    # medians 24 / 10 = 2.40; each repeat's own 2.00 1.50 3.00, median 2.00
    assert lines[("CPU ms/MB fetch", "ksgate-ssl/pyrelay-tls-uvloop")].split()[:1] == ["2.40x"]
    assert "2.00x (median of each repeat's ratio: 2.00 1.50 3.00)" in lines[
        ("CPU ms/MB fetch", "ksgate-ssl/pyrelay-tls-uvloop")]
    assert lines[("CPU ms/MB prod", "ksgate-ssl/pyrelay-tls-uvloop")].startswith("2.00x")
    assert lines[("CPU ms/MB prod", "pyrelay-tls-uvloop/haproxy")].startswith("1.25x")
    assert lines[("produce MB/s", "pyrelay-tls-uvloop/haproxy")].startswith("1.00x")


def test_the_tls_mode_runs_direct_only_when_named_and_first() -> None:
    assert "direct" not in parse_args([]).paths  # the default TLS run is unchanged
    picked = parse_args(["--paths", "pyrelay-tls-uvloop,haproxy,direct", "--rates", "5000"])
    assert picked.paths == ["direct", "haproxy", "pyrelay-tls-uvloop"] and picked.rates == [5000]


def fixed_rate_report(publish: Mapping[str, tuple[float, ...]], rate: int) -> Report:
    report = Report()
    for path, each in publish.items():
        for repeat, p50 in enumerate(each):
            report.latency.append(Run(path, rate, repeat, publish={"p50": p50, "p99": p50 + 1.0},
                                      end_to_end={"p50": p50 + 2.0, "p99": p50 + 4.0}))
    return report


def test_with_a_direct_path_the_tls_fixed_rates_say_what_each_proxy_adds() -> None:
    publish = {"direct": (3.0, 3.5, 4.0), "haproxy": (3.1, 3.6, 4.0), "pyrelay-tls-uvloop": (3.4, 3.5, 4.5)}
    report = fixed_rate_report(publish, 5000)
    paths = list(publish)
    lines = tls_fixed_rate_lines(report, paths, [5000])
    table = fixed_rate_lines(report.latency, paths, [5000])
    assert lines[:len(table)] == table  # the table the TLS mode printed before, then the comparison
    assert lines[len(table) + 1].split() == ["haproxy", "vs", "direct", "pyrelay-tls-uvloop", "vs", "direct"]
    row = {line[:20].strip(): line[20:].split() for line in lines[len(table) + 3:]}
    # medians 3.6 / 3.5 / 3.5; each repeat's own: haproxy 0.1 0.1 0.0, pyrelay 0.4 0.0 0.5
    assert row["5000/s pub p50 ms"] == ["+0.10", "[+0.10]", "+0.00", "[+0.40]"]
    assert row["5000/s pub p99 ms"] == ["+0.10", "[+0.10]", "+0.00", "[+0.40]"]
    assert row["5000/s e2e p50 ms"][:2] == ["+0.10", "[+0.10]"]


def test_without_direct_or_rates_the_tls_fixed_rate_output_is_as_before() -> None:
    publish = {"haproxy": (3.1, 3.6, 4.0), "ksgate": (3.4, 3.5, 4.5)}
    report = fixed_rate_report(publish, 5000)
    assert tls_fixed_rate_lines(report, list(publish), [5000]) == fixed_rate_lines(report.latency, list(publish),
                                                                                   [5000])
    assert tls_fixed_rate_lines(report, ["direct", *publish], []) == []


def test_the_authorizing_ksgate_path_allows_the_bench_user_the_fixed_rate_topics_and_groups(tmp_path: Path) -> None:
    protocol, keys = ksgate_settings("ksgate", tmp_path, write_tls_material(tmp_path / "tls"), "pw", {})
    assert protocol == "SASL_SSL" and keys["allow.everyone.if.no.acl.found"] is False  # still deny by default
    allowed = {(acl["resourceType"], acl["resourceName"], acl["patternType"]) for acl in
               json.loads(Path(keys["ksgate.acl.file"]).read_text())["acls"]
               if acl["principal"] == "User:bench" and acl["permissionType"] == "ALLOW"}
    # bench/latency.py's run_once: topic latency-<path>-<rate>-<id>, consumer group latency-<id>
    assert {("TOPIC", "latency-", "PREFIXED"), ("GROUP", "latency-", "PREFIXED")} <= allowed
    assert ("TOPIC", "bench-", "PREFIXED") in allowed  # throughput.py's topics, as before


def _aligned(header: str, rows: list[str], note: str) -> None:
    """Each row's figures end where the header's columns do (the columns are right-aligned and of fixed width):
    every row is as long as the header without its trailing note."""
    columns = header[:header.index(note)]
    for row in rows:
        assert len(row) == len(columns), f"{row!r} against {columns!r}"


def test_the_fixed_rate_table_keeps_its_columns_under_the_longest_path_name() -> None:
    publish = {path: (3.0, 3.5, 4.0) for path in TLS_MODE_PATHS}  # pyrelay-tls-asyncio: 19 characters
    header, *rows = fixed_rate_lines(fixed_rate_report(publish, 5000).latency, list(publish), [5000])
    _aligned(header, rows, "   (ms")
    assert {row.split()[1] for row in rows} == set(TLS_MODE_PATHS)


def test_the_throughput_table_keeps_its_columns_under_the_longest_path_name() -> None:
    runs = [PathRun(path, 0, produce_mb_s=100.0, fetch_mb_s=200.0, latency_p50_ms=1.0, latency_p99_ms=2.0)
            for path in TLS_MODE_PATHS]
    header, *rows = throughput_lines(runs, list(TLS_MODE_PATHS))
    _aligned(header, rows, "   (medians")
