"""The SparkSession every audit job runs in: ``local[*]`` unless a master is already chosen (spark-submit).

Local runs get few shuffle partitions; logs are quiet and all times are UTC.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from pyspark import SparkContext
from pyspark.sql import SparkSession

LOCAL_MASTER = "local[*]"
APP_NAME = "ksgate-audit"
DEFAULT_LOG_LEVEL = "ERROR"


def master_is_configured(env: Mapping[str, str]) -> bool:
    """Has the environment already chosen a master (spark-submit, ``--master`` in PYSPARK_SUBMIT_ARGS, MASTER)?"""
    if SparkContext._active_spark_context is not None:
        return True
    if "PYSPARK_GATEWAY_PORT" in env:  # Python was started by spark-submit: its JVM holds spark.master
        return True
    return "--master" in env.get("PYSPARK_SUBMIT_ARGS", "") or bool(env.get("MASTER"))


def local_cores(master: str) -> int | None:
    """The worker threads of a local master (``local``, ``local[4]``, ``local[*]``); None if not local."""
    match = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\d+)?\])?", master)
    if match is None:
        return None
    threads = match.group(1)
    if threads is None:
        return 1
    if threads == "*":
        return os.cpu_count() or 1
    return int(threads)


def build_session(master: str | None = None, conf: Mapping[str, str] | None = None,
                  log_level: str = DEFAULT_LOG_LEVEL) -> SparkSession:
    """Get or create the session; ``master`` overrides whatever is configured."""
    builder = (SparkSession.builder.appName(APP_NAME)
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.showConsoleProgress", "false"))
    if master is not None:
        builder = builder.master(master)
    elif not master_is_configured(os.environ):
        builder = builder.master(LOCAL_MASTER)
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    cores = local_cores(spark.sparkContext.master or "")
    if cores is not None and not (conf and "spark.sql.shuffle.partitions" in conf):
        spark.conf.set("spark.sql.shuffle.partitions", str(max(2, 2 * cores)))
    return spark


def launches_jvm(env: Mapping[str, str]) -> bool:
    """Will the next session start its own JVM (not under spark-submit, none running in this process)?"""
    return SparkContext._gateway is None and "PYSPARK_GATEWAY_PORT" not in env


@contextmanager
def jvm_output_to(log: Path) -> Iterator[None]:
    """While the JVM is launched, point this process's stderr at ``log``: the JVM inherits it for good.

    Spark writes its start-up chatter (log4j's default profile, NativeCodeLoader, hostname warnings, the
    JDK's incubator notice) to the JVM's stderr before any log level can be set; the user's terminal only
    gets ksgate's own lines. A JVM that is already running (or spark-submit's) is left alone.
    """
    if not launches_jvm(os.environ):
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    target = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.dup2(target, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)
