"""``ksgate audit generate``: synthetic audit logs in exactly the documented schema, partitioned by date.

Large logs are computed by Spark from hashes of the row number (10M events is fine); small ones in plain Python.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from authz.acl_json import encode_acl_file
from pipeline.errors import PipelineError
from pipeline.scenario import Scenario, Template, build_scenario
from pipeline.schema import AUTHENTICATION_FIELDS, AUTHORIZATION, AUTHORIZATION_FIELDS, SCHEMA_VERSION, iso_text

PYTHON_ENGINE_MAX = 200_000  # --engine auto: plain Python up to this many events
PYTHON_ENGINE_LIMIT = 2_000_000  # --engine python keeps every event in memory to sort it
SLOTS = 10_000  # weights are scaled to this many slots for the per-event template choice
EVENTS_PER_TASK = 1_000_000
MS_PER_DAY = 86_400_000


@dataclass(slots=True, frozen=True)
class GenerateOptions:
    output: str
    events: int
    seed: int = 1
    days: int = 7
    start: date | None = None  # default: `days` days before today (UTC)
    engine: str = "auto"  # auto | python | spark
    acls_out: str | None = None  # also write the scenario's ACLs (authz.acl_json format)

    def first_day(self) -> date:
        return self.start or (datetime.now(UTC).date() - timedelta(days=self.days))

    def use_spark(self) -> bool:
        if self.engine not in ("auto", "python", "spark"):
            raise PipelineError(f"unknown engine {self.engine!r} (auto, python or spark)")
        if self.engine == "python" and self.events > PYTHON_ENGINE_LIMIT:
            raise PipelineError(f"--engine python holds every event in memory: at most {PYTHON_ENGINE_LIMIT:,} "
                                "events (use --engine spark)")
        return self.engine == "spark" or (self.engine == "auto" and self.events > PYTHON_ENGINE_MAX)


def slot_counts(templates: Sequence[Template]) -> list[int]:
    """Integer weights (at least 1 each) summing to about SLOTS."""
    total = sum(t.weight for t in templates)
    return [max(1, round(t.weight / total * SLOTS)) for t in templates]


def _start_ms(first_day: date) -> int:
    return int(datetime(first_day.year, first_day.month, first_day.day, tzinfo=UTC).timestamp() * 1000)


def format_ts(ms: int) -> str:
    """Epoch milliseconds as the log writes them: ``2026-11-22T23:59:01.123Z``."""
    moment = datetime.fromtimestamp(ms // 1000, UTC)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{ms % 1000:03d}Z"


def event_record(t: Template, ts_ms: int, host: str, port: int, name: str | None, user: str | None) -> dict[str, Any]:
    """One event in the documented field order of its kind."""
    common = {"schema": SCHEMA_VERSION, "ts": format_ts(ts_ms), "event": t.event, "principal": t.principal}
    if t.event == AUTHORIZATION:
        assert t.api is not None
        return {**common, "client_host": host, "client_port": port, "listener": t.listener, "api_key": t.api[0],
                "api_name": t.api[1], "api_version": t.api[2], "operation": t.operation,
                "resource_type": t.resource_type, "resource_name": name, "pattern_type": t.pattern_type,
                "decision": t.decision, "rule": t.rule}
    return {**common, "attempted_user": user, "client_host": host, "client_port": port, "listener": t.listener,
            "mechanism": t.mechanism, "decision": t.decision, "failure": t.failure}


def python_events(scenario: Scenario, options: GenerateOptions) -> Iterator[dict[str, Any]]:
    """``options.events`` events drawn with ``random.Random(seed)``."""
    rng = random.Random(options.seed)
    templates = scenario.templates
    start, period = _start_ms(options.first_day()), options.days * MS_PER_DAY
    chosen = rng.choices(range(len(templates)), weights=slot_counts(templates), k=options.events)
    for index in chosen:
        t = templates[index]
        offset = t.window[0] + rng.random() * (t.window[1] - t.window[0])
        yield event_record(t, start + int(offset * period), rng.choice(t.hosts), 32768 + rng.randrange(28000),
                           rng.choice(t.names), rng.choice(t.attempted_users))


def write_python(scenario: Scenario, options: GenerateOptions) -> None:
    """Group by UTC date and write ``date=YYYY-MM-DD/part-00000.json``, each sorted by time."""
    by_date: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in python_events(scenario, options):
        by_date[record["ts"][:10]].append(record)
    root = Path(options.output)
    root.mkdir(parents=True, exist_ok=True)
    for day, records in sorted(by_date.items()):
        directory = root / f"date={day}"
        directory.mkdir(exist_ok=True)
        records.sort(key=lambda r: str(r["ts"]))
        lines = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records)
        (directory / "part-00000.json").write_text(lines, encoding="utf-8")


_TEMPLATE_SCHEMA = T.StructType([
    T.StructField("slot_start", T.LongType()), T.StructField("slot_end", T.LongType()),
    T.StructField("event", T.StringType()),
    T.StructField("principal", T.StringType()), T.StructField("hosts", T.ArrayType(T.StringType())),
    T.StructField("listener", T.StringType()), T.StructField("api_key", T.IntegerType()),
    T.StructField("api_name", T.StringType()), T.StructField("api_version", T.IntegerType()),
    T.StructField("operation", T.StringType()), T.StructField("resource_type", T.StringType()),
    T.StructField("names", T.ArrayType(T.StringType())), T.StructField("decision", T.StringType()),
    T.StructField("rule", T.StringType()), T.StructField("pattern_type", T.StringType()),
    T.StructField("users", T.ArrayType(T.StringType())), T.StructField("mechanism", T.StringType()),
    T.StructField("failure", T.StringType()), T.StructField("window_start", T.DoubleType()),
    T.StructField("window_length", T.DoubleType()),
])


def template_frame(spark: SparkSession, templates: Sequence[Template]) -> DataFrame:
    """One row per template with its slots ``[slot_start, slot_end)``."""
    rows: list[tuple[Any, ...]] = []
    end = 0
    for t, slots in zip(templates, slot_counts(templates), strict=True):
        start, end = end, end + slots
        api = t.api or (None, None, None)
        rows.append((start, end, t.event, t.principal, list(t.hosts), t.listener, api[0], api[1], api[2], t.operation,
                     t.resource_type, list(t.names), t.decision, t.rule, t.pattern_type, list(t.attempted_users),
                     t.mechanism, t.failure, t.window[0], t.window[1] - t.window[0]))
    return spark.createDataFrame(rows, _TEMPLATE_SCHEMA)


def _pick(array: str, h: Column) -> Column:
    return F.element_at(F.col(array), (F.pmod(h, F.size(array)) + 1).cast("int"))


def spark_events(spark: SparkSession, scenario: Scenario, options: GenerateOptions) -> DataFrame:
    """``options.events`` rows of (date, value = the JSON line), computed from xxhash64(seed, id, k)."""
    def h(k: int) -> Column:
        return F.xxhash64(F.lit(options.seed), F.col("id"), F.lit(k))

    total = sum(slot_counts(scenario.templates))
    # One row per slot (about SLOTS rows), broadcast: the template choice is a hash join.
    slots = template_frame(spark, scenario.templates).withColumn(
        "slot", F.explode(F.sequence(F.col("slot_start"), F.col("slot_end") - 1)))
    partitions = max(spark.sparkContext.defaultParallelism, -(-options.events // EVENTS_PER_TASK))
    ids = spark.range(0, options.events, numPartitions=partitions).withColumn("slot", F.pmod(h(1), F.lit(total)))
    joined = ids.join(F.broadcast(slots), "slot")
    uniform = F.pmod(h(2), F.lit(1_000_000_007)) / F.lit(1_000_000_007.0)
    offset = (F.col("window_start") + uniform * F.col("window_length")) * (options.days * MS_PER_DAY)
    ts_ms = F.lit(_start_ms(options.first_day())) + F.floor(offset)
    events = joined.select(
        F.lit(SCHEMA_VERSION).alias("schema"), F.timestamp_millis(ts_ms).alias("time"), "event", "principal",
        _pick("hosts", h(3)).alias("client_host"), (F.lit(32768) + F.pmod(h(4), F.lit(28000))).cast("int")
        .alias("client_port"), "listener", "api_key", "api_name", "api_version", "operation", "resource_type",
        _pick("names", h(5)).alias("resource_name"), "pattern_type", "decision", "rule",
        _pick("users", h(6)).alias("attempted_user"), "mechanism", "failure",
    ).withColumn("ts", iso_text(F.col("time")))
    options_json = {"ignoreNullFields": "false"}
    value = F.when(F.col("event") == AUTHORIZATION, F.to_json(F.struct(*AUTHORIZATION_FIELDS), options_json)) \
        .otherwise(F.to_json(F.struct(*AUTHENTICATION_FIELDS), options_json))
    return events.select(F.date_format("time", "yyyy-MM-dd").alias("date"), F.col("time"), value.alias("value"))


def write_spark(spark: SparkSession, scenario: Scenario, options: GenerateOptions) -> None:
    """Write ``date=YYYY-MM-DD/part-*.txt`` JSON lines, each file sorted by time."""
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    (spark_events(spark, scenario, options).sortWithinPartitions("date", "time").select("date", "value")
     .write.mode("overwrite").partitionBy("date").text(options.output))


def generate(spark: SparkSession | None, options: GenerateOptions) -> str:
    """Write ``options.events`` events; returns the engine used (``python`` needs no session)."""
    if options.events < 1 or options.days < 1:
        raise PipelineError("--events and --days must be at least 1")
    scenario = build_scenario(options.days)
    if options.acls_out is not None:
        Path(options.acls_out).write_bytes(encode_acl_file(scenario.acls))
    if options.use_spark():
        if spark is None:
            raise PipelineError("the spark engine needs a SparkSession")
        write_spark(spark, scenario, options)
        return "spark"
    write_python(scenario, options)
    return "python"
