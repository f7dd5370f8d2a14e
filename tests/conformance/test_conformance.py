"""ksgate answers as Apache Kafka does: every case, at every version both offer, from every principal.

Each difference that remains is either fixed or written down in docs/kafka-differences.md with its reason
(tests/conformance/known.py); this test fails on any other.  The report goes to the test's tmp folder and,
with ``python -m tests.conformance --output DIR``, wherever you like.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.apache_kafka import kafka_lib
from tests.conformance.cases import all_cases
from tests.conformance.known import DELIBERATE, VERSION_GAPS
from tests.conformance.report import Summary, markdown, summarize
from tests.conformance.runner import run
from tests.conformance.stage import stage

DOC = Path(__file__).resolve().parents[2] / "docs" / "kafka-differences.md"

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def summary(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Summary]:
    lib = kafka_lib()
    if lib is None:
        pytest.skip("no Apache Kafka jars (REFERENCE_KAFKA_LIB; scripts/test.sh sets it)")
    directory = tmp_path_factory.mktemp("conformance")
    with stage(lib, directory) as sides:
        result = summarize(run(sides.kafka, sides.ksgate, all_cases()))
    (directory / "conformance.md").write_text(markdown(result))
    yield result


def test_every_case_was_compared(summary: Summary) -> None:
    never = {case.name for case in all_cases()} - summary.cases
    assert not never, f"cases no version of which both sides offer: {sorted(never)}"


def test_no_undocumented_difference(summary: Summary) -> None:
    undocumented = summary.undocumented
    listing = "\n".join(f"{g.case} {g.path} v{sorted(g.versions)} {sorted(g.principals)}: {g.example}"
                        for g in undocumented)
    assert not undocumented, f"{len(undocumented)} undocumented differences from Kafka:\n{listing}"


def test_no_undocumented_version_gap(summary: Summary) -> None:
    gaps = {name: gap for name, gap in summary.version_gaps.items() if gap["documented"] is None}
    assert not gaps, f"versions offered unlike Kafka, undocumented: {gaps}"


def test_every_deliberate_difference_is_in_the_doc() -> None:
    headings = set(re.findall(r"^### `([a-z0-9-]+)`", DOC.read_text(), flags=re.MULTILINE))
    ids = {entry.id for entry in DELIBERATE} | set(VERSION_GAPS.values())
    assert ids <= headings, f"not in docs/kafka-differences.md: {sorted(ids - headings)}"
