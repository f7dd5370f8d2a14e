"""The one exception type of the audit pipeline, and the one install hint every "pyspark missing" path prints.

Raised for bad options and unusable inputs; the CLI prints it and exits with status 1.
"""

from __future__ import annotations

# As the README says to install the pipeline extra (from a checkout of ksgate).
INSTALL_HINT = "pip install -e '.[pipeline]'"


class PipelineError(Exception):
    """An audit pipeline job cannot run as asked; the message says what to change."""


def missing_pyspark(what: str = "ksgate audit") -> str:
    """The message for a missing ``pipeline`` extra."""
    return f"{what}: needs the pipeline extra (pyspark, matplotlib; Java 17+): {INSTALL_HINT}"
