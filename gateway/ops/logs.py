"""structlog logging: one line per event (JSON, or console rendering for a person), never a payload or a secret.

Standard-library loggers (ksgate's own, asyncio's, warnings) go through the same processors and renderer.
"""

from __future__ import annotations

import logging
import os
import stat
import sys
from typing import Any, Literal

import structlog

LogFormat = Literal["json", "console"]
LOG_FORMATS: tuple[LogFormat, ...] = ("json", "console")
PRIVATE_MODE = 0o600  # log files may hold user names and client addresses: the owner only


def open_private_log(path: str | os.PathLike[str]) -> int:
    """An append-only descriptor for a log file the gateway writes, kept at mode 0600.

    Whether new or existing, the file ends at exactly 0600, whatever the umask (``fchmod``
    after ``os.open``).  An existing file that group or others could read is narrowed with a
    warning: to let a log shipper read it, run the shipper as the gateway's user.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0), PRIVATE_MODE)
    try:
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        if mode != PRIVATE_MODE:
            os.fchmod(fd, PRIVATE_MODE)
            if mode & 0o077:
                logging.getLogger("ksgate.logs").warning(
                    "log file %s was mode %04o, readable beyond its owner; changed to %04o", path, mode, PRIVATE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


class _Handler(logging.StreamHandler):  # type: ignore[type-arg]
    """Ours, so a second configure_logging() replaces it and leaves other handlers (pytest's) alone.

    Writes to whatever sys.stderr is when a record is emitted (a replaced or closed stream is never kept).
    """

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _: Any) -> None:
        pass


class _StderrLogger:
    """structlog's output: one rendered line to the current sys.stderr, flushed."""

    def msg(self, message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    log = debug = info = warn = warning = err = error = critical = exception = fatal = msg


def _stderr_logger(*_: Any) -> _StderrLogger:
    return _StderrLogger()


def default_log_format() -> LogFormat:
    """Console rendering for a person at a terminal, JSON for everything else (files, pipes, collectors)."""
    return "console" if sys.stderr.isatty() else "json"


def configure_logging(level: str = "INFO", log_format: LogFormat | None = None) -> None:
    """Route structlog and the standard library's logging to stderr, one rendered line per event.

    May be called again (e.g. once the configuration's log.level is known); the last call wins.
    """
    numeric = getattr(logging, level.upper(), logging.INFO)
    fmt = log_format or default_log_format()
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Any = (structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty()) if fmt == "console"
                     else structlog.processors.JSONRenderer())
    # JSON keeps tracebacks as one "exception" field; the console renderer prints them itself.
    exc_info = [] if fmt == "console" else [structlog.processors.format_exc_info]
    structlog.configure(
        processors=[*shared, *exc_info, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=True,
    )
    handler = _Handler()
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *exc_info, renderer]))
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _Handler)]:  # a second call replaces the first's
        root.removeHandler(old)
    handler.setLevel(numeric)  # the level is the handler's: another handler (pytest's caplog) may want more
    root.addHandler(handler)
    root.setLevel(min(root.level, numeric) if root.level else numeric)
    logging.captureWarnings(True)  # warnings.warn(...) as log events, not bare "file:line: Warning" lines


def get_logger(**bound: object) -> structlog.typing.FilteringBoundLogger:
    # A lazy proxy: binding happens at first use, after configure_logging() has run.
    logger: structlog.typing.FilteringBoundLogger = structlog.get_logger("ksgate", **bound)
    return logger
