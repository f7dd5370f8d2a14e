"""Field-by-field differences between two normalised answers, each named by its path."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True, frozen=True)
class FieldDifference:
    path: str  # e.g. "topics[1].partitions[0].error_code"
    kafka: Any
    ksgate: Any

    def __str__(self) -> str:
        return f"{self.path}: kafka={_short(self.kafka)} ksgate={_short(self.ksgate)}"


def differences(kafka: Any, ksgate: Any, path: str = "") -> list[FieldDifference]:
    if isinstance(kafka, dict) and isinstance(ksgate, dict):
        found: list[FieldDifference] = []
        for key in list(kafka) + [k for k in ksgate if k not in kafka]:
            where = f"{path}.{key}" if path else str(key)
            if key not in kafka or key not in ksgate:
                found.append(FieldDifference(where, kafka.get(key, "<absent>"), ksgate.get(key, "<absent>")))
            else:
                found.extend(differences(kafka[key], ksgate[key], where))
        return found
    if isinstance(kafka, list) and isinstance(ksgate, list):
        if len(kafka) != len(ksgate):
            return [FieldDifference(f"{path}.length", len(kafka), len(ksgate)), *_first_items(kafka, ksgate, path)]
        found = []
        for index, (left, right) in enumerate(zip(kafka, ksgate, strict=True)):
            found.extend(differences(left, right, f"{path}[{index}]"))
        return found
    return [] if kafka == ksgate else [FieldDifference(path or "<body>", kafka, ksgate)]


def _first_items(kafka: list[Any], ksgate: list[Any], path: str) -> list[FieldDifference]:
    """With lengths that differ, the first items that do not match (what the report shows)."""
    for index, (left, right) in enumerate(zip(kafka, ksgate, strict=False)):
        if left != right:
            return [FieldDifference(f"{path}[{index}]", left, right)]
    shorter = min(len(kafka), len(ksgate))
    extra = kafka[shorter:] or ksgate[shorter:]
    return [FieldDifference(f"{path}[{shorter}]", kafka[shorter] if len(kafka) > shorter else "<absent>",
                            ksgate[shorter] if len(ksgate) > shorter else "<absent>")] if extra else []


def _short(value: Any, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
