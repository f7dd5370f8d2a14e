"""The one exception type of the audit pipeline.

Raised for bad options and unusable inputs; the CLI prints it and exits with status 1.
"""

from __future__ import annotations


class PipelineError(Exception):
    """An audit pipeline job cannot run as asked; the message says what to change."""
