"""The replicated security store's link to Kafka: tails the compacted topic, appends to it.

One background thread runs its own event loop with two upstream connections: a tail that
long-polls Fetch from the next offset and applies every record in log order to an immutable
``SecuritySnapshot`` (swapped whole), and a writer that appends records with acks=all.
``append`` blocks until the tail has applied what it wrote, so an instance reads its own
writes; every other instance applies the same records in the same order a Fetch later.

The gateway's threads only read ``snapshot`` (one attribute load) and call ``append`` from
worker threads; nothing here runs on the gateway's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import struct
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.config import UpstreamConfig
from gateway.stores.listeners import Listeners
from gateway.stores.security_records import (
    AppliedRecords,
    SecuritySnapshot,
    StoreRecord,
    StoreRecordError,
    apply_records,
)
from gateway.upstream.client import CLIENT_SOFTWARE, ErrorSink, UpstreamClient, UpstreamError
from gateway.upstream.login import UpstreamAuthError
from protocol.api_keys import ApiKey
from protocol.errors import DecodeError
from protocol.record_batch import MAX_DECOMPRESSED_BATCH_BYTES, batches, decode_batches, encode_batch

log = logging.getLogger("ksgate.store")

DEFAULT_TOPIC = "_ksgate_security"
# Highest versions this client speaks (name-based topics; later versions switch to topic ids).
_VERSION_CAPS = {ApiKey.METADATA: 12, ApiKey.CREATE_TOPICS: 7, ApiKey.PRODUCE: 9, ApiKey.FETCH: 12}
_NONE, _OFFSET_OUT_OF_RANGE, _UNKNOWN_TOPIC, _NOT_LEADER, _TOPIC_EXISTS = 0, 1, 3, 6, 36
_RETRIABLE = frozenset({_UNKNOWN_TOPIC, _NOT_LEADER, 5, 7, 13, 14, 15, 19, 20, 74, 75})
# A write retries a moved leader this often (~6 s with the default backoff), well inside append's
# timeout; the tail retries for ever, but stays at INFO for its first few (a leader election
# takes a moment, and a new topic's first Fetch may meet one).
_WRITE_RETRIES, _QUIET_RETRIES, _LEADER_BACKOFF_MS = 8, 3, 100
_I64, _I32 = struct.Struct(">q"), struct.Struct(">i")
ChangeListener = Callable[[AppliedRecords], None]
# One change (one admin request) is one gzip record batch, which every instance must be able to
# read back: under Kafka's default message.max.bytes (1 MiB) compressed, and well within the
# tail's inflation bound uncompressed.  ~40,000 ACLs of typical names fit in one request.
MAX_BATCH_BYTES = 1_000_000
MAX_CHANGE_BYTES = MAX_DECOMPRESSED_BATCH_BYTES // 2
_RECORD_OVERHEAD = 16  # a record's length, attributes, deltas and field lengths, at most


def encode_change(records: Sequence[StoreRecord], timestamp_ms: int) -> bytes:
    """``records`` as one gzip batch; StoreWriteError (nothing written) when it would be too large to read back."""
    size = sum(len(r.key) + len(r.value or b"") + _RECORD_OVERHEAD for r in records)
    if size > MAX_CHANGE_BYTES:
        raise StoreWriteError(f"a change of {len(records)} records ({size} bytes) is more than one write to the "
                              f"security topic may hold ({MAX_CHANGE_BYTES} bytes): split the request")
    batch = encode_batch([(r.key, r.value) for r in records], timestamp_ms=timestamp_ms, gzip=True)
    if len(batch) > MAX_BATCH_BYTES:
        raise StoreWriteError(f"a change of {len(records)} records compresses to {len(batch)} bytes, more than "
                              f"one write to the security topic may hold ({MAX_BATCH_BYTES} bytes): split the request")
    return batch


class StoreWriteError(OSError):
    """A change could not be written to (or read back from) the security topic; nothing was applied."""


class _UpstreamRefused(RuntimeError):
    """The upstream answered with an error code the tail cannot continue past."""


class _LeaderMoving(_UpstreamRefused):
    """A partition error a Kafka client retries once it has found the leader again: the leader moved
    (a broker restarts, a new topic's leader is still being elected) or its replicas are catching up."""


def _refused(what: str, error: int) -> _UpstreamRefused:
    kind = _LeaderMoving if error in _RETRIABLE else _UpstreamRefused
    return kind(f"{what} failed with error code {error}")


def _leader_backoff_s(retries: int, cap_ms: int) -> float:
    """Kafka's retry.backoff.ms (100) doubling per retry up to ``cap_ms``: a moved leader is found again at once."""
    return min(_LEADER_BACKOFF_MS << min(retries, 16), cap_ms) / 1000


@dataclass(slots=True, frozen=True)
class StoreTopicSettings:
    topic: str = DEFAULT_TOPIC
    replication_factor: int = -1  # the cluster's default.replication.factor
    fetch_max_wait_ms: int = 500  # how long a tail Fetch waits for new records
    retry_backoff_ms: int = 1000


class SecurityTopic:
    """Tails ``settings.topic`` into ``snapshot``; ``append`` writes records and waits until they apply."""

    def __init__(self, upstream: UpstreamConfig, ssl_context: ssl.SSLContext | None,
                 settings: StoreTopicSettings) -> None:
        self._upstream = upstream
        self._ssl = ssl_context
        self.settings = settings
        self.snapshot = SecuritySnapshot()
        self.next_offset = 0  # the next offset to apply: everything before it is in ``snapshot``
        self.high_watermark = 0  # as the last Fetch answered
        self.behind_since: float | None = 0.0  # monotonic time the tail fell behind (None: caught up)
        self.stalled: str | None = None  # why applying stopped (a record that cannot be read)
        self.lock = threading.RLock()  # held while a run of records is applied and listeners run
        self._listeners: Listeners[[AppliedRecords]] = Listeners(self.lock, "security store listener", log)
        self._applied = threading.Condition(self.lock)
        self._loaded = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._writer: UpstreamClient | None = None
        self._write_lock: asyncio.Lock | None = None
        self._versions: dict[int, int] = {}
        self._leader: tuple[str, int] | None = None
        self._brokers: dict[int, tuple[str, int]] = {}
        self._fetches = 0  # Fetch answers the tail applied: tells a new leader move from a run of them
        # Told each upstream failure's kind, from the store's thread (the gateway hops it onto its loop).
        self.on_upstream_error: ErrorSink = lambda kind: None

    # --- life cycle ----------------------------------------------------------------

    def start(self) -> None:
        started = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(started,), name="ksgate-security-store", daemon=True)
        self._thread.start()
        started.wait()

    def _run(self, started: threading.Event) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            self._write_lock = asyncio.Lock()
            started.set()
            await self._tail_forever()

        asyncio.run(main())

    def stop(self, timeout_s: float = 5.0) -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join(timeout_s)
        with self._applied:
            self._applied.notify_all()

    @property
    def loaded(self) -> bool:
        """True once the topic has been replayed to its end (the state every instance agrees on)."""
        return self._loaded.is_set()

    def wait_loaded(self, timeout_s: float) -> bool:
        return self._loaded.wait(timeout_s)

    def lag_seconds(self, now: float | None = None) -> float:
        """How long the tail has been behind the topic's end (0 when caught up)."""
        since = self.behind_since
        return 0.0 if since is None else max(0.0, (time.monotonic() if now is None else now) - since)

    # --- listeners -----------------------------------------------------------------

    def subscribe(self, listener: ChangeListener) -> Callable[[], None]:
        """Call ``listener`` (on the store's thread, under ``lock``) after each applied run of records."""
        return self._listeners.subscribe(listener)

    # --- writing -------------------------------------------------------------------

    def append(self, records: Sequence[StoreRecord], timeout_s: float = 30.0) -> int:
        """Write ``records`` as one batch (all or none), then wait until the tail applied them; their last offset.

        Blocking: call it from a worker thread, never from an event loop.
        """
        if not records:
            return self.next_offset - 1
        loop = self._loop
        if loop is None or loop.is_closed():
            raise StoreWriteError("the security store is not running")
        if self.stalled is not None:
            raise StoreWriteError(f"the security store is stalled: {self.stalled}")
        batch = encode_change(records, int(time.time() * 1000))  # here, on the caller's thread
        future = asyncio.run_coroutine_threadsafe(self._produce(batch, len(records)), loop)
        try:
            last_offset = future.result(timeout_s)
        except TimeoutError:
            future.cancel()
            raise StoreWriteError("the security topic did not acknowledge the write in time") from None
        except (UpstreamError, UpstreamAuthError, DecodeError, _UpstreamRefused) as exc:
            raise StoreWriteError(f"cannot write to the security topic: {exc}") from None
        deadline = time.monotonic() + timeout_s
        with self._applied:
            while self.next_offset <= last_offset:
                left = deadline - time.monotonic()
                if left <= 0 or self.stalled is not None:
                    raise StoreWriteError("written to the security topic but not applied yet; it will apply "
                                          "when the store catches up")
                self._applied.wait(left)
        return last_offset

    async def _produce(self, batch: bytes, count: int) -> int:
        assert self._write_lock is not None
        async with self._write_lock:
            # A kept writer connection may have been closed by the broker meanwhile (its
            # connections.max.idle.ms): one retry on a fresh connection. Writing the same
            # records twice is harmless, since each record sets an entity's whole state.
            # A moved leader (the broker restarting, an election) is found again and the write
            # retried, as Kafka's producer retries it, rather than failing the admin request.
            lost = moved = 0
            while True:
                reused = self._writer is not None
                try:
                    if self._writer is None:
                        self._writer = await self._connect()
                    return await self._produce_on(self._writer, batch, count)
                except (UpstreamError, OSError) as exc:
                    await self._drop_writer()
                    lost += 1
                    if lost == 2 or not reused:
                        raise
                    log.info("security store: writer connection lost (%s); reconnecting", exc)
                except _LeaderMoving as exc:
                    await self._drop_writer()
                    if moved == _WRITE_RETRIES:
                        raise
                    log.info("security store: %s; finding the leader again", exc)
                    await asyncio.sleep(_leader_backoff_s(moved, self.settings.retry_backoff_ms))
                    moved += 1
                except BaseException:
                    await self._drop_writer()
                    raise

    async def _drop_writer(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            await writer.close()

    async def _produce_on(self, client: UpstreamClient, batch: bytes, count: int) -> int:
        response = await client.request(ApiKey.PRODUCE, self._versions[ApiKey.PRODUCE], {
            "transactional_id": None, "acks": -1, "timeout_ms": 30_000,
            "topic_data": [{"name": self.settings.topic, "partition_data": [{"index": 0, "records": batch}]}]})
        partition = response["responses"][0]["partition_responses"][0]
        if partition["error_code"] != _NONE:
            raise _refused(f"produce to {self.settings.topic}", partition["error_code"])
        last: int = partition["base_offset"] + count - 1
        return last

    # --- the tail ------------------------------------------------------------------

    async def _tail_forever(self) -> None:
        assert self._stop is not None
        moved = 0  # leader moves met in a row: quiet and quick at first, as a Kafka consumer
        while not self._stop.is_set():
            client: UpstreamClient | None = None
            backoff_s, fetches = self.settings.retry_backoff_ms / 1000, self._fetches
            try:
                client = await self._connect()
                await self._tail(client)
            except _LeaderMoving as exc:
                moved = moved + 1 if self._fetches == fetches else 1  # in a row: no Fetch answered between
                backoff_s = _leader_backoff_s(moved - 1, self.settings.retry_backoff_ms)
                level = logging.INFO if moved <= _QUIET_RETRIES else logging.WARNING
                log.log(level, "security store: %s; finding the leader again in %d ms", exc, backoff_s * 1000)
            except (UpstreamError, UpstreamAuthError, DecodeError, _UpstreamRefused, OSError) as exc:
                log.warning("security store: %s; retrying in %d ms", exc, self.settings.retry_backoff_ms)
            except Exception:  # a bug: keep the last state and keep trying rather than die silently
                log.exception("security store: unexpected error; retrying in %d ms", self.settings.retry_backoff_ms)
            finally:
                if client is not None:
                    await client.close()
            if self.behind_since is None:
                self.behind_since = time.monotonic()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), backoff_s)
        if self._writer is not None:
            await self._writer.close()

    async def _tail(self, client: UpstreamClient) -> None:
        assert self._stop is not None
        stop = asyncio.ensure_future(self._stop.wait())
        try:
            while not self._stop.is_set():
                fetch = asyncio.ensure_future(self._fetch(client))
                await asyncio.wait({fetch, stop}, return_when=asyncio.FIRST_COMPLETED)
                if not fetch.done():
                    fetch.cancel()
                    return
                partition = fetch.result()
                self._take(partition)
                self._fetches += 1
        finally:
            stop.cancel()

    async def _fetch(self, client: UpstreamClient) -> dict[str, Any] | None:
        response = await client.request(ApiKey.FETCH, self._versions[ApiKey.FETCH], {
            "cluster_id": None, "replica_id": -1, "replica_state": {"replica_id": -1, "replica_epoch": -1},
            # While loading, a short wait (not 0: some Kafka-compatible brokers, Tansu, answer a
            # zero wait with no partitions at all, so the end of the topic would stay unknown).
            "max_wait_ms": self.settings.fetch_max_wait_ms if self.loaded else 100, "min_bytes": 1,
            "max_bytes": 8 * 1024 * 1024, "isolation_level": 1,  # read committed: never an aborted write
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": self.settings.topic, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": self.next_offset,
                "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 4 * 1024 * 1024}]}]})
        if response.get("error_code", _NONE) != _NONE:
            raise _refused("fetch", response["error_code"])
        for topic in response["responses"]:
            for partition in topic["partitions"]:
                if topic["topic"] == self.settings.topic and partition["partition_index"] == 0:
                    found: dict[str, Any] = partition
                    return found
        return None  # nothing said about the partition: ask again

    def _take(self, partition: dict[str, Any] | None) -> None:
        """Apply one Fetch answer's records (or note its error), then wake writers waiting for them."""
        if partition is None:
            return
        error = partition["error_code"]
        if error == _OFFSET_OUT_OF_RANGE:
            # The topic lost records we had applied (deleted and re-created): keeping the last
            # state is safer than dropping DENY rules; an operator must look.
            self._stall(f"offset {self.next_offset} is out of range: the security topic was truncated or "
                        "re-created")
            return
        if error != _NONE:
            raise _refused(f"fetch from {self.settings.topic}", error)
        high_watermark = partition["high_watermark"]
        assert isinstance(high_watermark, int)
        records = partition.get("records")
        if records and self.stalled is None:
            self._apply(records)
        self.high_watermark = high_watermark
        caught_up = self.next_offset >= high_watermark and self.stalled is None
        if caught_up:
            self.behind_since = None
            if not self._loaded.is_set():
                log.info("security store loaded from %s: %d ACLs, %d users, %d tokens (offset %d)",
                         self.settings.topic, len(self.snapshot.acls), len(self.snapshot.users),
                         len(self.snapshot.tokens), self.next_offset)
                self._loaded.set()
        elif self.behind_since is None:
            self.behind_since = time.monotonic()

    def _apply(self, records: memoryview | bytes) -> None:
        try:
            fresh = [(r.key, r.value) for r in decode_batches(records) if r.offset >= self.next_offset]
        except DecodeError as exc:
            self._stall(f"a batch after offset {self.next_offset} cannot be decoded ({exc})")
            return
        end = max((_batch_end(b) for b in batches(records)), default=self.next_offset)
        with self._applied:
            try:
                applied = apply_records(self.snapshot, fresh)
            except StoreRecordError as exc:
                self._stall(f"a record after offset {self.next_offset} cannot be read ({exc})")
                return
            if applied.unknown:
                log.warning("security store: skipped %d records of a kind this version does not know",
                            applied.unknown)
            self.snapshot = applied.state
            self.next_offset = max(self.next_offset, end)
            self._listeners.notify(applied)
            self._applied.notify_all()

    def _stall(self, reason: str) -> None:
        if self.stalled is None:
            log.error("security store stalled, keeping the state at offset %d: %s", self.next_offset, reason)
        self.stalled = reason
        with self._applied:
            self._applied.notify_all()

    # --- connections ---------------------------------------------------------------

    async def _connect(self) -> UpstreamClient:
        """A connection to the partition's leader (found through the bootstrap servers), authenticated."""
        address, client = await self._bootstrap()
        try:
            await self._ensure_topic(client)
        except BaseException:
            await client.close()
            raise
        assert self._leader is not None
        if self._leader == address:  # the bootstrap server that answered leads the partition
            return client
        await client.close()
        return await self._open(*self._leader)

    async def _bootstrap(self) -> tuple[tuple[str, int], UpstreamClient]:
        """The first bootstrap server that answers, and a connection to it."""
        errors = []
        for host, port in self._upstream.bootstrap_servers:
            try:
                return (host, port), await self._open(host, port)
            except UpstreamError as exc:
                errors.append(str(exc))
        self.on_upstream_error("unreachable")
        raise UpstreamError("no upstream bootstrap server answered: " + "; ".join(errors))

    async def _open(self, host: str, port: int) -> UpstreamClient:
        client = await UpstreamClient.connect(host, port, self._ssl, self._upstream.connect_timeout_ms / 1000,
                                              self.on_upstream_error)
        try:
            versions = await client.request(ApiKey.API_VERSIONS, 3, CLIENT_SOFTWARE)
            offered = {a["api_key"]: (a["min_version"], a["max_version"]) for a in versions["api_keys"]}
            for key, cap in _VERSION_CAPS.items():
                low, high = offered.get(key, (0, -1))
                if high < low or min(cap, high) < low:
                    raise UpstreamError(f"the upstream offers no usable version of {ApiKey(key).name}")
                self._versions[key] = min(cap, high)
            if self._upstream.uses_sasl:
                await client.authenticate(self._upstream)
        except BaseException:
            await client.close()
            raise
        return client

    async def _ensure_topic(self, client: UpstreamClient) -> None:
        """Find the topic's leader, creating the topic (compacted, one partition) if it is missing."""
        for _ in range(20):
            topic = await self._describe(client)
            error = topic["error_code"]
            if error == _UNKNOWN_TOPIC:
                await self._create(client)
                continue
            if error in _RETRIABLE:
                await asyncio.sleep(0.25)
                continue
            if error != _NONE:
                raise _UpstreamRefused(f"metadata of {self.settings.topic}: error code {error}")
            partitions = {p["partition_index"]: p for p in topic["partitions"]}
            leader = partitions.get(0, {}).get("leader_id", -1)
            if leader in self._brokers:
                self._leader = self._brokers[leader]
                return
            await asyncio.sleep(0.25)
        raise UpstreamError(f"the security topic {self.settings.topic} has no leader")

    async def _describe(self, client: UpstreamClient) -> dict[str, Any]:
        response = await client.request(ApiKey.METADATA, self._versions[ApiKey.METADATA], {
            "topics": [{"name": self.settings.topic, "topic_id": uuid.UUID(int=0)}], "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False})
        self._brokers = {b["node_id"]: (b["host"], b["port"]) for b in response["brokers"]}
        for topic in response["topics"]:
            if topic["name"] == self.settings.topic:
                found: dict[str, Any] = topic
                return found
        return {"error_code": _UNKNOWN_TOPIC, "partitions": []}

    async def _create(self, client: UpstreamClient) -> None:
        response = await client.request(ApiKey.CREATE_TOPICS, self._versions[ApiKey.CREATE_TOPICS], {
            "topics": [{"name": self.settings.topic, "num_partitions": 1,
                        "replication_factor": self.settings.replication_factor, "assignments": [],
                        "configs": [{"name": "cleanup.policy", "value": "compact"}]}],
            "timeout_ms": 30_000, "validate_only": False})
        error = response["topics"][0]["error_code"]
        if error not in (_NONE, _TOPIC_EXISTS):  # exists: another instance won the race
            raise _UpstreamRefused(f"cannot create the security topic {self.settings.topic}: error code {error}")
        if error == _NONE:
            log.info("created the security topic %s (cleanup.policy=compact)", self.settings.topic)


def _batch_end(batch: memoryview) -> int:
    """The offset after a batch's last one (baseOffset + lastOffsetDelta + 1), compacted-away records included."""
    base: int = _I64.unpack_from(batch, 0)[0]
    last_delta: int = _I32.unpack_from(batch, 23)[0]
    return base + last_delta + 1
