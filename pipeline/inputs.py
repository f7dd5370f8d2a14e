"""What the CLI can tell about local inputs before a JVM starts: missing paths, empty or non-JSON files.

Remote inputs (hdfs://, s3a://, …), Spark-only globs and compressed files are left to Spark's own reading.
"""

from __future__ import annotations

import glob
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.errors import PipelineError

SNIFF_BYTES = 1 << 20  # enough for any audit line; a longer first line is not an audit event anyway
COMPRESSED = (".gz", ".bz2", ".deflate", ".lz4", ".snappy", ".zst", ".zstd")


@dataclass(slots=True)
class LocalInputs:
    """The local files behind the inputs; ``complete`` when every input was local and inspected."""

    complete: bool = True
    files: int = 0
    size: int = 0
    not_json: list[str] = field(default_factory=list)  # "<file> line N" whose first line is not a JSON object
    readable: int = 0  # files whose first line is a JSON object

    @property
    def empty(self) -> bool:
        return self.complete and self.size == 0

    @property
    def all_not_json(self) -> bool:
        return self.complete and self.readable == 0 and bool(self.not_json)


def _local_path(path: str) -> str | None:
    if path.startswith("file:"):
        return path.removeprefix("file://") if path.startswith("file://") else path.removeprefix("file:")
    return None if "://" in path else path


def _spark_visible(root: Path) -> Iterator[Path]:
    """The files Spark reads under a directory: hidden and ``_``-prefixed names are skipped."""
    for path in sorted(root.rglob("*")):
        parts = path.relative_to(root).parts
        if path.is_file() and not any(p.startswith((".", "_")) for p in parts):
            yield path


def _expand(path: str) -> list[Path] | None:
    if "{" in path:  # a Hadoop glob Python cannot expand: Spark's business
        return None
    matches = [Path(p) for p in sorted(glob.glob(path))] if glob.has_magic(path) else [Path(path)]
    if not matches or not all(m.exists() for m in matches):
        raise PipelineError(f"no such file or directory: {path}")
    files: list[Path] = []
    for match in matches:
        files.extend(_spark_visible(match) if match.is_dir() else [match])
    return files


def _first_line(path: Path) -> tuple[int, str] | None:
    """The first non-blank line (number, text) of a file, None if it has none."""
    read = 0
    with path.open("rb") as handle:
        for number, line in enumerate(iter(lambda: handle.readline(SNIFF_BYTES), b""), start=1):
            if line.strip():
                return number, line.decode("utf-8", errors="replace")
            read += len(line)
            if read >= SNIFF_BYTES:  # a megabyte of blank lines: let Spark have its say
                break
    return None


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


def inspect_local(inputs: Sequence[str]) -> LocalInputs:
    """Look at the local inputs; PipelineError for a local path that does not exist."""
    found = LocalInputs()
    for given in inputs:
        local = _local_path(given)
        files = _expand(local) if local is not None else None
        if files is None:
            found.complete = False
            continue
        for path in files:
            found.files += 1
            try:
                size = path.stat().st_size
                first = None if path.suffix in COMPRESSED or size == 0 else _first_line(path)
            except OSError as exc:
                raise PipelineError(f"cannot read {path}: {exc.strerror or exc}") from None
            found.size += size
            if path.suffix in COMPRESSED:
                found.complete = False
            elif first is not None and _is_json_object(first[1]):
                found.readable += 1
            elif first is not None:
                found.not_json.append(f"{path} line {first[0]}")
    return found
