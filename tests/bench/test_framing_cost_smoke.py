"""bench/framing_cost.py runs against this tree (it drives FrameReceiver and UpstreamLink directly, whose
signatures it must keep up with) and prints one figure per case."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_framing_cost_prints_a_time_for_every_case() -> None:
    run = subprocess.run([sys.executable, str(REPO / "bench" / "framing_cost.py"), "--number", "20", "--repeat", "1"],
                         capture_output=True, text=True, timeout=60, check=True)
    figures = re.findall(r"^  (\S.*?)\s+(\d+) ns$", run.stdout, re.MULTILINE)
    assert [name.split(":")[0] for name, _ in figures] == ["FrameReceiver", "FrameReceiver",
                                                         "UpstreamLink (FrameSplitter)", "Frame(view) alone"]
    assert all(int(ns) > 0 for _, ns in figures)
