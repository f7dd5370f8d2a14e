"""Runs every case at every version both sides offer, from every principal, on both sides in lockstep.

A pair of answers that differs while either side says "not ready yet" (a retriable error: a coordinator
loading, a leader being elected) is asked again on that side, a bounded number of times: readiness is
timing, not behaviour.  Everything else is compared as it came.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from protocol.api_keys import ApiKey
from tests.conformance.bodies import NotExpressible, request_body
from tests.conformance.cases import Case
from tests.conformance.compare import FieldDifference, differences
from tests.conformance.normalize import Placeholders, normalize_response
from tests.conformance.wire import Outcome
from tests.conformance.world import PRINCIPALS, Side, retriable

_RETRIES = 10


@dataclass(slots=True, frozen=True)
class Comparison:
    case: str
    api_key: int
    version: int
    principal: str
    kafka: str  # what the request got: "response" | "closed" | "timeout"
    ksgate: str
    differences: tuple[FieldDifference, ...]


@dataclass(slots=True)
class Run:
    comparisons: list[Comparison] = field(default_factory=list)
    # API key -> (kafka's range, ksgate's range) where the two offer different versions (None: not offered).
    version_gaps: dict[int, tuple[tuple[int, int] | None, tuple[int, int] | None]] = field(default_factory=dict)


def run(kafka: Side, ksgate: Side, cases: Iterable[Case], principals: Iterable[str] = PRINCIPALS) -> Run:
    result = Run()
    names = {side.name: Placeholders() for side in (kafka, ksgate)}
    offered = _offered(kafka, ksgate, result)
    for case in cases:
        for version in offered.get(case.api_key, range(0)):
            if version < case.min_version:
                continue
            try:
                request_body(case.api_key, version, case.template(kafka))
            except NotExpressible:
                continue
            for principal in principals:
                result.comparisons.append(_compare(kafka, ksgate, case, version, principal, names))
    return result


def _offered(kafka: Side, ksgate: Side, result: Run) -> dict[int, range]:
    """The versions both sides offer, per API; the gaps go into the run."""
    left = kafka.connection(PRINCIPALS[0]).exchange(ApiKey.API_VERSIONS, 3, _API_VERSIONS_BODY)
    right = ksgate.connection(PRINCIPALS[0]).exchange(ApiKey.API_VERSIONS, 3, _API_VERSIONS_BODY)
    a, b = _ranges(left), _ranges(right)
    both: dict[int, range] = {}
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            result.version_gaps[key] = (a.get(key), b.get(key))
        if key in a and key in b:
            low, high = max(a[key][0], b[key][0]), min(a[key][1], b[key][1])
            both[key] = range(low, high + 1)
    return both


_API_VERSIONS_BODY = {"client_software_name": "ksgate-conformance", "client_software_version": "1"}


def _ranges(outcome: Outcome) -> dict[int, tuple[int, int]]:
    assert outcome.body is not None, f"ApiVersions: {outcome.kind}"
    return {item["api_key"]: (item["min_version"], item["max_version"]) for item in outcome.body["api_keys"]}


def _compare(kafka: Side, ksgate: Side, case: Case, version: int, principal: str,
             names: dict[str, Placeholders]) -> Comparison:
    answers = {side.name: _ask(side, case, version, principal) for side in (kafka, ksgate)}
    for _ in range(_RETRIES * (5 if case.eventual else 1)):
        found = _diff(case, version, answers, names)
        waiting = [side for side in (kafka, ksgate)
                   if case.eventual or retriable(answers[side.name].body)]
        if not found or not waiting:
            break
        time.sleep(0.2)
        for side in waiting:
            answers[side.name] = _ask(side, case, version, principal)
    found = _diff(case, version, answers, names)
    for side in (kafka, ksgate) if case.settles else ():
        side.settle(case.settles)
    return Comparison(case.name, case.api_key, version, principal, answers[kafka.name].kind,
                      answers[ksgate.name].kind, tuple(found))


def _ask(side: Side, case: Case, version: int, principal: str) -> Outcome:
    body = request_body(case.api_key, version, case.template(side))
    if case.before_login:
        return side.connection(principal).before_login(case.api_key, version, body)
    return side.connection(principal).exchange(case.api_key, version, body)


def _diff(case: Case, version: int, answers: dict[str, Outcome], names: dict[str, Placeholders]
          ) -> list[FieldDifference]:
    kafka, ksgate = answers["kafka"], answers["ksgate"]
    if kafka.body is None or ksgate.body is None:
        return [] if kafka.kind == ksgate.kind else [FieldDifference("<outcome>", kafka.kind, ksgate.kind)]
    # Fresh placeholders per comparison would hide an id that recurs across requests: keep them per side.
    left = normalize_response(case.api_key, version, kafka.body, names["kafka"])
    right = normalize_response(case.api_key, version, ksgate.body, names["ksgate"])
    if case.compared:
        left, right = ({k: v for k, v in side.items() if k in case.compared} for side in (left, right))
    return differences(left, right)
