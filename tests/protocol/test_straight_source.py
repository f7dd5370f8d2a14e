"""Pins the source the straight-line emitter writes, for every request and response at every version.

A refactoring of protocol/straight_decode.py must leave the generated decode and skip functions
byte-identical; a change meant to alter them (or a schema change) regenerates the fingerprint with
``python -m tests.protocol.test_straight_source --write`` and says why in its commit.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from protocol.registry import all_apis
from protocol.straight_decode import straight_decoder_source, straight_skip_source

_FINGERPRINT = Path(__file__).with_name("straight_source_fingerprint.json")


def _generated_sources() -> dict[str, str]:
    """One sha256 (first 16 hex digits) per (message, version) over its decode and skip sources."""
    digests: dict[str, str] = {}
    for schema in all_apis().values():
        for spec in (schema.request, schema.response):
            for version in range(spec.versions.low, spec.versions.high + 1):
                decode, _ = straight_decoder_source(spec, version)
                skip, _ = straight_skip_source(spec, version)
                both = f"{decode}\n\0\n{skip}".encode()
                digests[f"{spec.name} v{version}"] = hashlib.sha256(both).hexdigest()[:16]
    return digests


def test_generated_source_matches_the_committed_fingerprint() -> None:
    committed = json.loads(_FINGERPRINT.read_text())
    generated = _generated_sources()
    changed = sorted(key for key in committed.keys() & generated.keys() if committed[key] != generated[key])
    assert not changed, f"generated source differs for {len(changed)} message versions, e.g. {changed[:5]}"
    assert generated.keys() == committed.keys(), "the fingerprint does not cover the same message versions"


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    _FINGERPRINT.write_text(json.dumps(_generated_sources(), indent=0, sort_keys=True) + "\n")
