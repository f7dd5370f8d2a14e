"""What the request-stage tests share: a watch on the full decoder."""

from __future__ import annotations

from typing import Any

import pytest

from protocol.codec import MessageCodec


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the messages fully decoded from now on (a walked request adds none)."""
    names: list[str] = []
    original = MessageCodec.decode_prefix

    def watched(codec: MessageCodec, data: Any) -> Any:
        names.append(codec.name)
        return original(codec, data)

    monkeypatch.setattr(MessageCodec, "decode_prefix", watched)
    return names
