"""What rate Kafka's quota algorithm lets a client have, with no network and no client noise.

A model, not a measurement of a gateway: the gateway's own ``SampledRate`` and ``throttle_time_ms``
(gateway/quotas/rate.py, Kafka's windowed Rate and throttle formula) drive an ideal client that sends
one request of ``--request-bytes`` whenever it is not muted, one round trip (``--rtt-ms``) apart, and
is muted for each answer's throttle time (KIP-219). Virtual time, so the run is exact and instant.

It prints the rate over the first 20 s, over the whole run after ``--warmup`` seconds, and the least
and most over any 20 s after the warm-up (1 s steps), as multiples of the quota, per request size.
The point it makes: a new client may send ``quota.window.num - 1`` windows' worth at once, and that
burst returns every time its sample leaves the window (``num × size`` later), so over 20 s the rate
swings around the quota while over minutes it holds it. bench/availability/quotas.py measures the
same with real clients, on Kafka itself and through ksgate.

    PYTHONPATH=. .venv/bin/python bench/availability/quota_model.py [--seconds 400] \
        [--request-bytes 1000000,100000,16384]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from gateway.quotas.rate import QuotaWindow, SampledRate, throttle_time_ms  # noqa: E402

SPAN_S = 20  # the "over 20 s"


@dataclass(slots=True, frozen=True)
class Sent:
    at_ms: float
    size: int


def ideal_client(quota: float, request_bytes: int, seconds: float, rtt_ms: float,
                 window: QuotaWindow) -> list[Sent]:
    """Every request the client gets in, in order: sent as soon as it is not muted."""
    rate = SampledRate(window)
    sent: list[Sent] = []
    now = 0.0
    while now < seconds * 1000:
        rate.record(request_bytes, now)
        sent.append(Sent(now, request_bytes))
        muted = throttle_time_ms(rate.measure(now), quota, rate.window_ms(now))
        now += max(rtt_ms, muted)  # the answer comes back at once; the mute holds the next request
    return sent


def rate_between(sent: list[Sent], start_s: float, end_s: float, quota: float) -> float:
    total = sum(s.size for s in sent if start_s * 1000 <= s.at_ms < end_s * 1000)
    return total / (end_s - start_s) / quota


def summary(sent: list[Sent], quota: float, seconds: float, warmup: float) -> dict[str, float]:
    windows = [rate_between(sent, t, t + SPAN_S, quota) for t in range(int(warmup), int(seconds) - SPAN_S + 1)]
    return {"first_20s": rate_between(sent, 0, SPAN_S, quota),
            "sustained": rate_between(sent, warmup, seconds, quota),
            "any_20s_min": min(windows), "any_20s_max": max(windows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quota", type=float, default=1_000_000, help="bytes per second")
    parser.add_argument("--request-bytes", default="1000000,100000,16384",
                        help="request sizes, comma-separated (librdkafka sends up to 1 MB, kafka-python 16 KiB)")
    parser.add_argument("--seconds", type=float, default=400.0)
    parser.add_argument("--warmup", type=float, default=22.0)
    parser.add_argument("--rtt-ms", type=float, default=1.0)
    args = parser.parse_args()
    window = QuotaWindow()
    print(f"quota {args.quota:,.0f} B/s, quota.window.num {window.num}, quota.window.size {window.size_ms} ms, "
          f"{args.seconds:.0f} s, warm-up {args.warmup:.0f} s, rtt {args.rtt_ms} ms; rates as multiples of the quota")
    print(f"{'request bytes':>14} {'first 20 s':>11} {'after warm-up':>14} {'any 20 s after warm-up':>24}")
    for size in (int(s) for s in args.request_bytes.split(",")):
        got = summary(ideal_client(args.quota, size, args.seconds, args.rtt_ms, window), args.quota,
                      args.seconds, args.warmup)
        print(f"{size:>14,} {got['first_20s']:>10.2f}x {got['sustained']:>13.3f}x "
              f"{got['any_20s_min']:>14.2f}x – {got['any_20s_max']:.2f}x")


if __name__ == "__main__":
    main()
