"""bench/authorizer_bench.py --shadow runs end to end on a tiny ACL set (it measures through the
gateway's ConnectionAuthzView, whose signature it must keep up with)."""

from __future__ import annotations

from pathlib import Path

from bench.authorizer_bench import measure_shadow


def test_shadow_bench_measures_every_variant(tmp_path: Path) -> None:
    result = measure_shadow(50, 200, 50, seed=1, repeat=1, workdir=str(tmp_path))
    assert sorted(result["rates"]) == ["different", "equal", "none"]
    assert all(len(rates) == 1 and rates[0] > 0 for rates in result["rates"].values())
    assert result["divergences_counted"] > 0  # the 'different' set disagrees with the live one somewhere
