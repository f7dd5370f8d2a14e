"""Loads every schema file once and hands out compiled codecs per (api key, version)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources

from protocol.codec import MessageCodec, compile_message
from protocol.schema import MessageSpec, SchemaError, parse_schema_text
from protocol.straight_decode import compile_straight_decoder


@dataclass(slots=True)
class ApiSchema:
    """The request and response specs of one API key."""

    api_key: int
    name: str
    request: MessageSpec
    response: MessageSpec
    _codecs: dict[tuple[str, int], MessageCodec] = field(default_factory=dict)

    @property
    def min_version(self) -> int:
        return self.request.versions.low

    @property
    def max_version(self) -> int:
        high = self.request.versions.high
        assert high is not None, "request version ranges are always closed"
        return high

    def supports(self, version: int) -> bool:
        return version in self.request.versions

    def is_flexible(self, version: int) -> bool:
        return version in self.request.flexible

    def request_codec(self, version: int) -> MessageCodec:
        return self._codec(self.request, version)

    def response_codec(self, version: int) -> MessageCodec:
        return self._codec(self.response, version)

    def _codec(self, spec: MessageSpec, version: int) -> MessageCodec:
        key = (spec.kind, version)
        codec = self._codecs.get(key)
        if codec is None:
            # The interpreted encoder, the generated decoder (the same schema, a fraction of the calls).
            codec = replace(compile_message(spec, version), decode_from=compile_straight_decoder(spec, version))
            self._codecs[key] = codec
        return codec


@lru_cache(maxsize=1)
def all_apis() -> dict[int, ApiSchema]:
    """Every API ksgate can parse, keyed by api key."""
    requests: dict[int, MessageSpec] = {}
    responses: dict[int, MessageSpec] = {}
    folder = resources.files("protocol") / "schemas"
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".ks"):
            continue
        for spec in parse_schema_text(entry.read_text("utf-8"), entry.name):
            target = requests if spec.kind == "request" else responses
            if spec.api_key in target:
                raise SchemaError(f"{entry.name}: api key {spec.api_key} {spec.kind} defined twice")
            target[spec.api_key] = spec
    apis: dict[int, ApiSchema] = {}
    for key, request in requests.items():
        response = responses.get(key)
        if response is None:
            raise SchemaError(f"api key {key} has a request schema but no response schema")
        if response.versions != request.versions or response.flexible != request.flexible:
            raise SchemaError(f"api key {key}: request and response version ranges differ")
        apis[key] = ApiSchema(key, request.name.removesuffix("Request") or request.name, request, response)
    return apis


def api(api_key: int) -> ApiSchema | None:
    return all_apis().get(api_key)


def codec_for(spec: MessageSpec, version: int) -> MessageCodec:
    """The compiled codec of a request or response spec at ``version`` (cached with its API's)."""
    return all_apis()[spec.api_key]._codec(spec, version)
