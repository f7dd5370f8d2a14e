"""``ksgate audit replay`` as one call: read the candidate ACL file, replay the log against it, write DIR."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from authz.acl_json import AclStoreError, decode_acl_file
from authz.model import AclBinding
from pipeline.errors import PipelineError
from pipeline.progress import QUIET, Progress
from pipeline.replay.settings import GivenSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pipeline.schema import LinesRead


def read_candidate(path: str) -> list[AclBinding]:
    """The bindings of a candidate ACL file (authz.acl_json format: the gateway's and ``recommend``'s)."""
    try:
        return decode_acl_file(Path(path).read_bytes())
    except (OSError, AclStoreError) as exc:
        raise PipelineError(f"cannot read ACL file {path}: {exc}") from None


def replay(spark: SparkSession, inputs: Sequence[str], output: str, acl_file: str, given: GivenSettings,
           since: datetime | None = None, until: datetime | None = None, *,
           progress: Progress = QUIET, candidate: Sequence[AclBinding] | None = None,
           lines: LinesRead | None = None) -> dict[str, Any]:
    """Run the whole job and write ``output``; returns replay.json's content. ``lines``: the inputs'
    ``job.read_decision_lines`` if the caller read them already (the command line, for its survey)."""
    from pipeline.replay.job import replay_decisions
    from pipeline.replay.output import write_replay

    bindings = list(candidate) if candidate is not None else read_candidate(acl_file)
    result = replay_decisions(spark, inputs, bindings, given, since, until, progress=progress, lines=lines)
    try:
        summary = write_replay(result, Path(output), inputs, acl_file, len(bindings))
    finally:
        result.release()
    progress.stage(f"written to {output}")
    return summary
