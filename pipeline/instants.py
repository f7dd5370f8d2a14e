"""Instants for --since/--until and the log's ``ts`` strings, always as aware UTC datetimes.

Free of pyspark, so the CLI can validate options before a JVM starts.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pipeline.errors import PipelineError


def parse_instant(text: str) -> datetime:
    """``2026-11-22``, ``2026-11-22T13:00``, ``…T13:00:00.123Z`` or with an offset; naive times are UTC."""
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise PipelineError(f"not an ISO 8601 date or time: {text!r}") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)
