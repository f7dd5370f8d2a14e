"""tag_scan: the top-level tags of every response and request, found without decoding, agree with the codec."""

from __future__ import annotations

import random

import pytest

from protocol.codec import default_value
from protocol.errors import DecodeError
from protocol.registry import all_apis
from protocol.schema import MessageSpec
from protocol.tag_scan import compile_tag_scan
from tests.protocol.sample_values import sample_message

_CASES = [(spec, version) for schema in all_apis().values() for spec in (schema.request, schema.response)
          for version in range(spec.versions.low, spec.versions.high + 1)]


def _expected_tags(spec: MessageSpec, version: int, value: dict[str, object]) -> frozenset[int]:
    # The codec writes a tagged field only when it differs from its default.
    return frozenset(f.tag for f in spec.fields if f.tag is not None and version in f.tagged_versions
                     and version in f.versions and value.get(f.name) != default_value(f, version))


@pytest.mark.parametrize(("spec", "version"), _CASES, ids=[f"{s.name}-v{v}" for s, v in _CASES])
def test_scan_finds_exactly_the_tags_the_codec_wrote(spec: MessageSpec, version: int) -> None:
    rng = random.Random(f"{spec.name}{version}")
    codec = all_apis()[spec.api_key].response_codec(version) if spec.kind == "response" \
        else all_apis()[spec.api_key].request_codec(version)
    scan = compile_tag_scan(spec, version)
    for _ in range(8):
        value = sample_message(spec, version, rng)
        data = bytes(codec.encode(value))
        assert scan(data) == _expected_tags(spec, version, value)
        # Truncated or padded, the scan refuses what the decoder refuses.
        for broken in ((data[:-1], data + b"\x00") if data else (b"\x00",)):
            with pytest.raises(DecodeError):
                codec.decode(broken)
            with pytest.raises(DecodeError):
                scan(broken)
