"""bench/kafka_perf.py reads the figures Kafka's perf tools print, and refuses output without a summary."""

from __future__ import annotations

import pytest

from bench.kafka_perf import ToolOutputError, parse_consumer_summary, parse_producer_summary

# ProducerPerformance prints a progress line every 5 s and then its summary, in the same shape.
PRODUCER_OUTPUT = """\
61231 records sent, 12243.8 records/sec (11.96 MB/sec), 1532.1 ms avg latency, 2140.0 ms max latency.
200000 records sent, 41562.759767 records/sec (40.59 MB/sec), 512.23 ms avg latency, 1024.00 ms max latency, \
500 ms 50th, 900 ms 95th, 1000 ms 99th, 1020 ms 99.9th.
"""
CONSUMER_OUTPUT = """\
start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, \
fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
2026-11-25 14:50:01:123, 2026-11-25 14:50:09:456, 195.3125, 23.4381, 200000, 24000.9601, 3012, 5321, \
36.7061, 37587.6715
"""


def test_producer_summary_figures_come_from_the_last_summary_line() -> None:
    figures = parse_producer_summary(PRODUCER_OUTPUT)
    assert (figures.records, figures.records_s, figures.mib_s) == (200000, 41562.759767, 40.59)
    assert (figures.avg_ms, figures.max_ms) == (512.23, 1024.0)
    assert (figures.p50_ms, figures.p95_ms, figures.p99_ms, figures.p999_ms) == (500, 900, 1000, 1020)


def test_consumer_summary_figures_are_read_by_column_name() -> None:
    figures = parse_consumer_summary(CONSUMER_OUTPUT)
    assert (figures.records, figures.mib_s, figures.records_s) == (200000, 23.4381, 24000.9601)
    assert (figures.rebalance_ms, figures.fetch_mib_s, figures.fetch_records_s) == (3012, 36.7061, 37587.6715)


@pytest.mark.parametrize("parse", [parse_producer_summary, parse_consumer_summary])
def test_output_without_a_summary_is_an_error_not_zeros(parse: object) -> None:
    progress_only = PRODUCER_OUTPUT.splitlines()[0] + "\n" + CONSUMER_OUTPUT.splitlines()[0] + "\n"
    with pytest.raises(ToolOutputError):
        parse(progress_only)  # type: ignore[operator]
