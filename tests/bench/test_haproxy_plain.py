"""bench/anchors/haproxy_tls.py --plain: the HAProxy configurations, the options, and the comparison with direct.

No HAProxy is started here (the smoke test in test_haproxy_tls_smoke.py runs the whole bench); where Debian's
haproxy is installed, its own ``-c`` check validates the generated configurations.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from auth.cert_tools import write_tls_material
from bench import throughput
from bench.anchors.haproxy_tls import (
    PATHS,
    PLAIN_PATHS,
    PYRELAY,
    HAProxyProcess,
    PyRelayProcess,
    Report,
    comparison_lines,
    cpu_us_per_round_trip,
    haproxy_binary,
    parse_args,
    pipe_counters,
    relays,
)
from bench.latency import Run
from bench.throughput import PathRun


def config(tmp_path: Path, path: str, splice: bool = False, tls: bool = False) -> str:
    haproxy = HAProxyProcess("haproxy", tmp_path, write_tls_material(tmp_path / "tls") if tls else None, 0, path,
                             splice=splice)
    haproxy.upstream = "127.0.0.1:9092"
    text = haproxy.config_text()
    binary = haproxy_binary()
    if binary is not None:  # HAProxy's own parser: the keywords exist in this version, in these sections
        haproxy.config_path.write_text(text)
        check = subprocess.run([binary, "-c", "-f", str(haproxy.config_path)], capture_output=True, text=True,
                               check=False)
        assert check.returncode == 0, check.stdout + check.stderr
    return text


def bind_line(text: str) -> str:
    return next(line.strip() for line in text.splitlines() if line.strip().startswith("bind "))


def test_plain_haproxy_binds_without_tls_and_splices_only_in_the_splice_path(tmp_path: Path) -> None:
    plain, spliced = config(tmp_path, "haproxy"), config(tmp_path, "haproxy-splice", splice=True)
    for text in (plain, spliced):
        assert "ssl" not in bind_line(text) and "mode tcp" in text
        assert "stats socket " in text  # show info's pipe counters tell whether splice was used
        assert "server broker 127.0.0.1:9092" in text
    assert "splice" not in plain
    assert "option splice-request" in spliced and "option splice-response" in spliced


def test_tls_haproxy_config_is_unchanged_by_the_plain_mode(tmp_path: Path) -> None:
    text = config(tmp_path, "haproxy", tls=True)
    assert bind_line(text).endswith(f"ssl crt {tmp_path / 'haproxy.pem'}")
    assert "splice" not in text and "stats socket" not in text
    assert text.startswith("global\n  maxconn 1024\ndefaults\n  mode tcp\n")


def test_pipe_counters_are_read_from_show_info() -> None:
    show_info = "Name: HAProxy\nVersion: 2.6.12\nPipesUsed: 0\nPipesFree: 2\nTasks: 9\n"
    assert pipe_counters(show_info) == "PipesUsed=0 PipesFree=2"
    assert pipe_counters("Name: HAProxy\n") == "PipesUsed=? PipesFree=?"


def test_plain_mode_has_its_own_paths_and_runs_fixed_rates_by_default() -> None:
    plain = parse_args(["--plain"])
    assert plain.paths == list(PLAIN_PATHS) and plain.rates == [5000, 50000]
    assert parse_args(["--plain", "--rates", ""]).rates == []
    assert parse_args(["--plain", "--paths", "haproxy-splice,direct"]).paths == ["direct", "haproxy-splice"]
    tls = parse_args([])
    assert tls.paths == list(PATHS) and tls.rates == [] and not tls.plain
    with pytest.raises(SystemExit):
        parse_args(["--paths", "haproxy-splice"])  # a --plain path without --plain


def test_each_proxy_is_compared_with_direct_and_ksgate_with_haproxy() -> None:
    report = Report()
    fetch = {"direct": (100.0, 200.0, 300.0), "haproxy": (90.0, 210.0, 240.0), "ksgate": (80.0, 160.0, 270.0)}
    publish = {"direct": (3.0, 3.5, 4.0), "haproxy": (3.1, 3.8, 4.5), "ksgate": (3.5, 3.9, 4.2)}
    for repeat in range(3):
        for path in fetch:
            report.runs.append(PathRun(path, repeat, produce_mb_s=100.0, fetch_mb_s=fetch[path][repeat]))
            report.latency.append(Run(path, 5000, repeat, publish={"p50": publish[path][repeat], "p99": 9.0},
                                      end_to_end={"p50": 5.0, "p99": 9.0}))
    lines = comparison_lines(report, ["direct", "ksgate", "haproxy"], [5000])
    assert lines[0].split() == ["ksgate", "vs", "direct", "haproxy", "vs", "direct", "ksgate", "vs", "haproxy"]
    row = {line[:20].strip(): line[20:] for line in lines[2:]}
    # fetch: medians 200/160/210; each repeat's own: ksgate/direct 0.8 0.8 0.9, haproxy/direct 0.9 1.05 0.8
    assert row["fetch MB/s"].split() == ["0.80x", "[0.80x]", "1.05x", "[0.90x]", "0.76x", "[0.89x]"]
    # publish p50: medians 3.5/3.9/3.8; each repeat's own ksgate - direct: 0.5 0.4 0.2
    assert row["5000/s pub p50 ms"].split() == ["+0.40", "[+0.40]", "+0.30", "[+0.30]", "+0.10", "[+0.10]"]
    assert row["produce MB/s"].split()[:2] == ["1.00x", "[1.00x]"]


def test_other_cpu_is_known_on_a_path_without_a_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The direct path has no proxy pid (-1, whose CPU is nan): the rest of the machine is still measured."""
    seconds = {None: [1.0, 1.5], 10: [2.0, 2.2], -1: [float("nan"), float("nan")]}  # client, broker, no proxy
    machine = [100.0, 101.0]  # busy CPU seconds of the whole machine
    clock = [0.0, 1.0]
    monkeypatch.setattr(throughput, "cpu_seconds", lambda pid: seconds[pid].pop(0))
    monkeypatch.setattr(throughput, "machine_busy_seconds", lambda: machine.pop(0))
    monkeypatch.setattr(throughput.time, "perf_counter", lambda: clock.pop(0))
    used = throughput.CpuMeter(throughput.Pids(broker=10, gateway=-1)).stop()
    assert used["client"] == 50.0 and used["broker"] == 20.0
    assert used["other"] == 30.0  # 100 % of one core busy, less the client's 50 and the broker's 20


def test_each_pyrelay_path_runs_the_do_nothing_relay_on_its_own_loop(tmp_path: Path) -> None:
    found = relays(["direct", "ksgate", "haproxy", "pyrelay-uvloop", "pyrelay-asyncio"], "haproxy", tmp_path, None, 0)
    assert sorted(found) == ["haproxy", "pyrelay-asyncio", "pyrelay-uvloop"]  # direct and ksgate are no relays
    assert isinstance(found["haproxy"], HAProxyProcess)
    for path, loop in (("pyrelay-uvloop", "uvloop"), ("pyrelay-asyncio", "asyncio")):
        relay = found[path]
        assert isinstance(relay, PyRelayProcess)
        relay.upstream = "127.0.0.1:9092"
        command = relay.command()
        assert command[1] == str(PYRELAY) and PYRELAY.exists()
        assert command[2:] == ["--port", str(relay.port), "--upstream", "127.0.0.1:9092", "--loop", loop]


def test_ksgate_is_also_compared_with_the_python_floor() -> None:
    report = Report()
    publish = {"direct": (3.0, 3.5, 4.0), "pyrelay-uvloop": (3.1, 3.6, 4.3), "ksgate": (3.5, 3.9, 4.2)}
    for repeat in range(3):
        for path in publish:
            report.runs.append(PathRun(path, repeat, produce_mb_s=100.0, fetch_mb_s=100.0))
            report.latency.append(Run(path, 5000, repeat, publish={"p50": publish[path][repeat], "p99": 9.0},
                                      end_to_end={"p50": 5.0, "p99": 9.0}))
    lines = comparison_lines(report, ["direct", "ksgate", "pyrelay-uvloop"], [5000])
    assert lines[0].split()[-3:] == ["ksgate", "vs", "pyrelay-uvloop"]
    row = {line[:20].strip(): line[20:] for line in lines[2:]}
    # medians 3.9 - 3.6; each repeat's own ksgate - pyrelay: 0.4 0.3 -0.1
    assert row["5000/s pub p50 ms"].split()[-2:] == ["+0.30", "[+0.30]"]


def test_cpu_per_round_trip_is_the_proxy_share_of_the_back_to_back_round_trips() -> None:
    run = PathRun("ksgate", 0, latency_mean_ms=0.4, cpu_latency={"gateway": 25.0})
    assert cpu_us_per_round_trip(run) == pytest.approx(100.0)  # a quarter of a core over 400 us each
    assert cpu_us_per_round_trip(PathRun("direct", 0, latency_mean_ms=0.4)) != cpu_us_per_round_trip(run)
