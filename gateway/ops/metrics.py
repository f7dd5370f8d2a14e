"""Prometheus metrics for one gateway process: labelled counters, gauges and histograms.

``Metrics`` holds the series ksgate exports and the hot-path hooks that feed them;
``render()`` writes the Prometheus text exposition format 0.0.4 (no third-party client).

Cost model.  A series is a dict entry keyed by a tuple of label values.  The hooks look up
pre-built label tuples (per listener, per API key, per outcome) and do one ``dict.get`` and
one store per counter, so an increment is O(1) with no allocation once a label set has
been seen.  ``observe_latency`` adds a ``bisect`` over the (fixed, 15) bucket bounds and
two in-place updates.  Nothing is locked: one process runs one event loop, and every hook
is called from that loop.  ``render()`` is O(series) and runs only on a scrape.

Label values are bounded by construction: API names come from ``ApiKey`` (other keys are
``unknown``), mechanisms, outcomes and upstream-error kinds from fixed sets (others are
``other``); listener names come from the configuration.  Principals are never labels.

Bytes in/out are not labelled counters: each listener has a ``ListenerTraffic``, two plain
lists indexed by API key that connections add frame sizes to (one list index per frame);
``render()`` folds them into ``{listener, api}`` series.  Process metrics and the build info
are read at scrape time.

Why not ``prometheus_client`` (0.26): bench/metrics_cost.py times the updates made per
relayed request (authorization decision, relayed count, latency observation).  In three runs
on a busy 2-vCPU machine these hooks took 0.8–1.2 µs per request; the library took 1.9–2.6×
that with pre-bound children, 5–9× with a ``labels()`` lookup per update, and 5–10× in
multiprocess mode (what ``--workers`` would need to aggregate), a mode that also cannot
export process metrics (custom collectors do not work in it).  So each worker serves its
own endpoint with this registry.  The byte counters add about 0.2–0.3 µs per request.
"""

from __future__ import annotations

import importlib.metadata
import math
import platform
import re
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import ClassVar, TypeVar

from authz.shadow import ShadowAcls, divergence_counts
from gateway.config import SASL_MECHANISMS, SECURITY_PROTOCOLS
from gateway.ops.process_metrics import PROCESS_METRICS
from protocol.api_keys import ApiKey

LabelValues = tuple[str, ...]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")

# Request latency buckets (seconds): sub-millisecond local answers up to Fetch long polls.
LATENCY_BUCKETS: tuple[float, ...] = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                      1.0, 2.5, 5.0, 10.0, 30.0)
# Cyclic garbage collector pauses (seconds): a young collection takes microseconds, a full one
# with ~10k connections open tens of milliseconds (gateway/ops/collector.py).
GC_PAUSE_BUCKETS: tuple[float, ...] = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25)

# Outcomes of the authorize stage, one per request (authz.request_policy's verdicts):
# Relay → allowed, Rewrite → partial (denied parts answered by the gateway),
# Answer → denied (nothing relayed), Refuse → refused (connection closed).
AUTHZ_OUTCOMES = ("allowed", "partial", "denied", "refused")
# "success", or auth.sasl.server.Refused.failure_class, or "timeout" (authentication.timeout.ms).
# nonce_mismatch: SCRAM's client-final nonce was not this exchange's; throttled: answered unhashed because
# the same user from the same address already had its share of attempts waiting for a hash
# (auth.hash_budget); overloaded: the password-verification queue was full.
AUTH_OUTCOMES = ("success", "bad_credentials", "nonce_mismatch", "unsupported_mechanism", "illegal_state",
                 "reauthentication_refused", "malformed", "timeout", "throttled", "overloaded",
                 # a client certificate refused in the TLS handshake (auth/tls_handshake.py)
                 "no_certificate", "unknown_ca", "certificate_expired", "certificate_not_yet_valid", "bad_certificate")
AUTH_MECHANISMS = (*SASL_MECHANISMS, *SECURITY_PROTOCOLS)
# connect: one address refused/timed out; unreachable: no address of the node answered;
# authentication: the gateway's own SASL to the upstream failed; disconnected: the upstream
# closed a link in use; protocol: an upstream response could not be handled.
UPSTREAM_ERROR_KINDS = ("connect", "unreachable", "authentication", "disconnected", "protocol")
# Why a connection was refused at accept (gateway.edge.connection_limits.Refusal.metric_reason).
REFUSAL_REASONS = ("listener_max_connections", "max_connections", "listener_max_connection_creation_rate",
                   "max_connection_creation_rate", "max_connections_per_ip", "tls_handshake_queue_per_ip")
TLS_HANDSHAKE_FAILURES = ("timeout", "failed")


class MetricsError(ValueError):
    """A metric or label was declared wrongly (a programming error, raised at start-up)."""


def format_value(value: float) -> str:
    """A sample value as Prometheus writes it: integers without a fraction, +Inf, -Inf, NaN."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if isinstance(value, int) or (value.is_integer() and abs(value) < 2**53):
        return str(int(value))
    return repr(value)


def escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _label_text(names: Sequence[str], values: LabelValues, extra: str = "") -> str:
    pairs = [f'{name}="{escape_label_value(value)}"' for name, value in zip(names, values, strict=True)]
    if extra:
        pairs.append(extra)
    return "{" + ",".join(pairs) + "}" if pairs else ""


class _Family:
    """One metric name with its HELP text and label names; series keyed by label values."""

    __slots__ = ("help", "label_names", "name")
    kind: ClassVar[str]

    def __init__(self, name: str, help_text: str, label_names: Sequence[str] = ()) -> None:
        if not _METRIC_NAME.match(name):
            raise MetricsError(f"invalid metric name {name!r}")
        for label in label_names:
            if not _LABEL_NAME.match(label) or label.startswith("__"):
                raise MetricsError(f"{name}: invalid label name {label!r}")
        if len(set(label_names)) != len(label_names):
            raise MetricsError(f"{name}: duplicate label names {label_names!r}")
        self.name = name
        self.help = help_text
        self.label_names = tuple(label_names)

    def labels(self, *values: str) -> LabelValues:
        """The label tuple to pass to the hot-path methods (checked here, not there)."""
        if len(values) != len(self.label_names):
            raise MetricsError(f"{self.name}: expected labels {self.label_names}, got {values!r}")
        return tuple(values)

    def render(self) -> Iterator[str]:
        yield f"# HELP {self.name} {_escape_help(self.help)}"
        yield f"# TYPE {self.name} {self.kind}"
        yield from self._samples()

    def _samples(self) -> Iterator[str]:
        raise NotImplementedError


class _Scalar(_Family):
    __slots__ = ("_values",)

    def __init__(self, name: str, help_text: str, label_names: Sequence[str] = ()) -> None:
        super().__init__(name, help_text, label_names)
        self._values: dict[LabelValues, float] = {}
        if not self.label_names:
            self._values[()] = 0  # an unlabelled series exists from the start

    def declare(self, labels: LabelValues) -> None:
        """Export the series as 0 before its first event (so rate() sees the start)."""
        self.labels(*labels)  # checks the arity
        self._values.setdefault(labels, 0)

    def value(self, labels: LabelValues = ()) -> float:
        return self._values.get(labels, 0)

    def inc(self, labels: LabelValues = (), amount: float = 1) -> None:
        values = self._values
        values[labels] = values.get(labels, 0) + amount

    def _samples(self) -> Iterator[str]:
        for labels, value in sorted(self._values.items()):
            yield f"{self.name}{_label_text(self.label_names, labels)} {format_value(value)}"


class Counter(_Scalar):
    """Only goes up (``inc`` does not check the sign: that would cost on the hot path)."""

    __slots__ = ()
    kind = "counter"


class Gauge(_Scalar):
    __slots__ = ()
    kind = "gauge"

    def dec(self, labels: LabelValues = (), amount: float = 1) -> None:
        values = self._values
        values[labels] = values.get(labels, 0) - amount

    def set(self, labels: LabelValues, value: float) -> None:
        self._values[labels] = value


class Histogram(_Family):
    """Fixed buckets; each series keeps per-bucket counts (+Inf last) and the sum."""

    __slots__ = ("_cells", "bounds")
    kind = "histogram"

    def __init__(self, name: str, help_text: str, label_names: Sequence[str], bounds: Sequence[float]) -> None:
        super().__init__(name, help_text, label_names)
        if "le" in self.label_names:
            raise MetricsError(f"{name}: 'le' is reserved for histogram buckets")
        if not bounds or list(bounds) != sorted(set(bounds)) or math.isinf(bounds[-1]):
            raise MetricsError(f"{name}: bucket bounds must be finite, increasing and unique")
        self.bounds = tuple(float(b) for b in bounds)
        # labels → [count per bucket..., count above the last bound, sum]
        self._cells: dict[LabelValues, list[float]] = {}

    def observe(self, labels: LabelValues, value: float) -> None:
        cell = self._cells.get(labels)
        if cell is None:
            cell = self._cells[labels] = [0] * (len(self.bounds) + 2)
        cell[bisect_left(self.bounds, value)] += 1  # bisect_left: a value equal to a bound is in it (le)
        cell[-1] += value

    def count(self, labels: LabelValues = ()) -> int:
        cell = self._cells.get(labels)
        return int(sum(cell[:-1])) if cell is not None else 0

    def _samples(self) -> Iterator[str]:
        names = self.label_names
        for labels, cell in sorted(self._cells.items()):
            cumulative = 0.0
            for bound, count in zip((*self.bounds, math.inf), cell[:-1], strict=True):
                cumulative += count
                le = f'le="{format_value(bound)}"'
                yield f"{self.name}_bucket{_label_text(names, labels, le)} {format_value(cumulative)}"
            plain = _label_text(names, labels)
            yield f"{self.name}_sum{plain} {format_value(cell[-1])}"
            yield f"{self.name}_count{plain} {format_value(cumulative)}"


Samples = Callable[[], Iterable[tuple[LabelValues, float | None]]]


class _Collected(_Family):
    """Samples read when rendered (process state, per-listener byte tables); None values are skipped."""

    __slots__ = ("_collect",)

    def __init__(self, name: str, help_text: str, label_names: Sequence[str], collect: Samples) -> None:
        super().__init__(name, help_text, label_names)
        self._collect = collect

    def samples(self) -> list[tuple[LabelValues, float]]:
        return sorted((labels, value) for labels, value in self._collect() if value is not None)

    def _samples(self) -> Iterator[str]:
        for labels, value in self.samples():
            yield f"{self.name}{_label_text(self.label_names, labels)} {format_value(value)}"


class CollectedCounter(_Collected):
    __slots__ = ()
    kind = "counter"


class CollectedGauge(_Collected):
    __slots__ = ()
    kind = "gauge"


_F = TypeVar("_F", bound=_Family)


class Registry:
    """An ordered set of metric families rendered together."""

    __slots__ = ("_families",)

    def __init__(self) -> None:
        self._families: dict[str, _Family] = {}

    def _add(self, family: _F) -> _F:
        if family.name in self._families:
            raise MetricsError(f"metric {family.name} registered twice")
        self._families[family.name] = family
        return family

    def counter(self, name: str, help_text: str, label_names: Sequence[str] = ()) -> Counter:
        return self._add(Counter(name, help_text, label_names))

    def gauge(self, name: str, help_text: str, label_names: Sequence[str] = ()) -> Gauge:
        return self._add(Gauge(name, help_text, label_names))

    def histogram(self, name: str, help_text: str, label_names: Sequence[str],
                  bounds: Sequence[float]) -> Histogram:
        return self._add(Histogram(name, help_text, label_names, bounds))

    def collected(self, kind: str, name: str, help_text: str, label_names: Sequence[str],
                  collect: Samples) -> _Collected:
        family = CollectedCounter if kind == "counter" else CollectedGauge
        return self._add(family(name, help_text, label_names, collect))

    def render(self) -> str:
        lines: list[str] = []
        for family in self._families.values():
            lines.extend(family.render())
        return "\n".join(lines) + "\n"


def api_name(api_key: int) -> str:
    """Kafka's name for an API key (``ApiKey.DESCRIBE_ACLS`` → ``DescribeAcls``)."""
    try:
        return "".join(part.capitalize() for part in ApiKey(api_key).name.split("_"))
    except ValueError:
        return "unknown"


_API_NAMES: tuple[str, ...] = tuple(api_name(k) for k in range(max(ApiKey) + 1))
_N_APIS = len(_API_NAMES)


def ksgate_version() -> str:
    try:
        return importlib.metadata.version("ksgate")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def _unlabelled(read: Callable[[], float | None]) -> Samples:
    return lambda: [((), read())]


class ListenerTraffic:
    """Kafka frame bytes (size prefix included) from and to one listener's clients, by API key.

    Connections add to these lists directly: one index and one add per frame.  The last
    cell collects API keys ksgate does not know.
    """

    __slots__ = ("received", "sent")

    def __init__(self) -> None:
        self.received = [0] * (_N_APIS + 1)
        self.sent = [0] * (_N_APIS + 1)

    def request_frame(self, wire: memoryview) -> None:
        """A request frame as received (its API key is read from the header, if it has one)."""
        size = len(wire)
        if size < 6:
            self.received[-1] += size
            return
        key = wire[4] << 8 | wire[5]  # unsigned: a negative int16 key lands past _N_APIS, in the last cell
        self.received[key if key < _N_APIS else -1] += size

    def response(self, api_key: int, nbytes: int) -> None:
        self.sent[api_key if 0 <= api_key < _N_APIS else -1] += nbytes

    @staticmethod
    def series(cells: list[int], listener: str) -> Iterator[tuple[LabelValues, float]]:
        for index, value in enumerate(cells):
            if value:
                yield (listener, _API_NAMES[index] if index < _N_APIS else "unknown"), value


class Metrics:
    """The series ksgate exports, with one O(1) hook per event (see the module docstring)."""

    def __init__(self, listeners: Iterable[str] = (), *, process: bool = False) -> None:
        """``process``: also export this process's CPU, memory and file descriptors (read per scrape)."""
        r = self.registry = Registry()
        self.connections = r.gauge("ksgate_connections", "Open client connections.", ("listener",))
        self.connections_total = r.counter(
            "ksgate_connections_total", "Client connections accepted (TLS handshake completed).", ("listener",))
        self.authentications = r.counter(
            "ksgate_authentications_total",
            "Client authentication attempts by mechanism (SASL mechanism, or SSL/PLAINTEXT for "
            "listeners without SASL) and outcome (success or the failure class).", ("mechanism", "outcome"))
        self.authorization_decisions = r.counter(
            "ksgate_authorization_decisions_total",
            "Authorized requests by API and outcome (allowed, partial, denied, refused).", ("api", "outcome"))
        self.request_latency = r.histogram(
            "ksgate_request_latency_seconds",
            "Time from a request's arrival to its response being written to the client.", ("api",),
            LATENCY_BUCKETS)
        self.upstream_errors = r.counter("ksgate_upstream_errors_total", "Upstream failures by kind.", ("kind",))
        self.store_lag = r.gauge(
            "ksgate_store_lag_seconds",
            "How far the ACL/credential store is behind its source (0 for a local store).")
        self.relayed_requests = r.counter(
            "ksgate_relayed_requests_total", "Requests relayed to the upstream, by API.", ("api",))
        self.streamed_endpoints_dropped = r.counter(
            "ksgate_streamed_endpoints_dropped_total",
            "Streamed responses (Fetch v16+) whose rewritten node_endpoints would not fit the length already "
            "sent: left out, so the client asks Metadata instead, by API.", ("api",))
        self._traffic: dict[str, ListenerTraffic] = {}
        r.collected("counter", "ksgate_request_bytes_total",
                    "Kafka request bytes received from clients (whole frames), by listener and API.",
                    ("listener", "api"), lambda: self._traffic_series(sent=False))
        r.collected("counter", "ksgate_response_bytes_total",
                    "Kafka response bytes written to clients (whole frames), by listener and API.",
                    ("listener", "api"), lambda: self._traffic_series(sent=True))
        build = (ksgate_version(), platform.python_version())
        r.collected("gauge", "ksgate_build_info", "The running ksgate's version (the value is always 1).",
                    ("version", "python_version"), lambda: [(build, 1)])
        for metric in PROCESS_METRICS if process else ():
            r.collected(metric.kind, metric.name, metric.help, (), _unlabelled(metric.read))
        self.scram_legacy_nonces = r.counter(
            "ksgate_sasl_scram_legacy_nonce_total",
            "SCRAM logins accepted with librdkafka's pre-2.6.1 client-final nonce (the client nonce repeated), "
            "by mechanism.", ("mechanism",))
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            self.scram_legacy_nonces.declare((mechanism,))
        self.password_hashes = r.counter(
            "ksgate_password_hashes_total",
            "Password hashes (SASL/PLAIN's PBKDF2) computed on the verification threads, once however many "
            "connections wait for the same one; cached verdicts and attempts answered over the hash budget "
            "compute none.")
        self.connections_refused = r.counter(
            "ksgate_connections_refused_total",
            "Client connections closed at accept, before TLS, by the limit they hit (max.connections, "
            "max.connections.per.ip, max.connection.creation.rate, per listener or process-wide).",
            ("listener", "reason"))
        self.tls_handshake_failures = r.counter(
            "ksgate_tls_handshake_failures_total",
            "Client connections closed during the TLS handshake: timeout (not completed within "
            "ksgate.authentication.timeout.ms) or failed.", ("listener", "kind"))
        self.tls_handshakes_deferred = r.counter(
            "ksgate_tls_handshakes_deferred_total",
            "TLS connections whose handshake waited for their address's budget "
            "(ksgate.tls.handshake.rate.per.ip).", ("listener",))
        self.tls_handshakes_waiting = r.gauge(
            "ksgate_tls_handshakes_waiting",
            "TLS connections accepted and waiting for their address's handshake budget now.")
        self.tls_handshakes_waiting.declare(())

        self.gc_pauses = r.histogram(
            "ksgate_gc_pause_seconds",
            "Pauses of Python's cyclic garbage collector (the event loop waits), by generation; a generation 2 "
            "collection walks every object made since start-up.", ("generation",), GC_PAUSE_BUCKETS)

        self._listeners: dict[str, LabelValues] = {}
        for name in listeners:
            self._listener(name)
        self._api: tuple[LabelValues, ...] = tuple((name,) for name in _API_NAMES)
        self._api_unknown: LabelValues = ("unknown",)
        self._authz: dict[str, tuple[LabelValues, ...]] = {
            outcome: tuple((name, outcome) for name in _API_NAMES) for outcome in AUTHZ_OUTCOMES}
        self._auth: dict[tuple[str, str], LabelValues] = {
            (m, o): (m, o) for m in AUTH_MECHANISMS for o in AUTH_OUTCOMES}
        self._upstream_kinds: dict[str, LabelValues] = {kind: (kind,) for kind in UPSTREAM_ERROR_KINDS}
        self._upstream_other: LabelValues = ("other",)
        for kind in self._upstream_kinds.values():
            self.upstream_errors.declare(kind)

    def watch_request_memory(self, in_use: Callable[[], int], waiting: Callable[[], int]) -> None:
        """Export the request-memory budget (queued.max.request.bytes), read per scrape."""
        self.registry.collected("gauge", "ksgate_request_memory_bytes",
                                "Bytes of large requests being received, granted from queued.max.request.bytes.",
                                (), lambda: [((), in_use())])
        self.registry.collected("gauge", "ksgate_request_memory_waiting",
                                "Connections paused until queued.max.request.bytes has room for their next request.",
                                (), lambda: [((), waiting())])

    def watch_shadow(self, shadow: ShadowAcls | None) -> None:
        """Export the shadow ACL set's divergences from the live one (authz/shadow.py), read per scrape."""
        self.registry.collected(
            "counter", "ksgate_shadow_divergences_total",
            "Authorization decisions on which the shadow ACL set disagrees with the live one, by direction "
            "(would_deny: live allowed, shadow denied; would_allow: the reverse) and whether the check was "
            "implicit (Metadata filtering, listing), all counted, rate-limited or not.",
            ("direction", "implicit"), lambda: divergence_counts(shadow))

    def traffic(self, listener: str) -> ListenerTraffic:
        """The byte counters of ``listener``, for its connections to add to."""
        traffic = self._traffic.get(listener)
        if traffic is None:
            traffic = self._traffic[listener] = ListenerTraffic()
        return traffic

    def api_bytes(self, api_key: int, sent: bool) -> int:
        """Frame bytes of one API from (or to) clients, all listeners together (read per scrape)."""
        index = api_key if 0 <= api_key < _N_APIS else -1
        return sum((t.sent if sent else t.received)[index] for t in self._traffic.values())

    def _traffic_series(self, sent: bool) -> Iterator[tuple[LabelValues, float]]:
        for listener, traffic in self._traffic.items():
            yield from ListenerTraffic.series(traffic.sent if sent else traffic.received, listener)

    def _listener(self, name: str) -> LabelValues:
        labels = self._listeners.get(name)
        if labels is None:
            labels = self._listeners[name] = (name,)
            self.connections.declare(labels)
            self.connections_total.declare(labels)
            for reason in REFUSAL_REASONS:
                self.connections_refused.declare((name, reason))
            for kind in TLS_HANDSHAKE_FAILURES:
                self.tls_handshake_failures.declare((name, kind))
            self.tls_handshakes_deferred.declare(labels)
        return labels

    def _api_labels(self, api_key: int) -> LabelValues:
        api = self._api
        return api[api_key] if 0 <= api_key < len(api) else self._api_unknown

    # --- hooks (hot path) ----------------------------------------------------------

    def connection_opened(self, listener: str) -> None:
        labels = self._listener(listener)
        self.connections.inc(labels)
        self.connections_total.inc(labels)

    def connection_closed(self, listener: str) -> None:
        self.connections.dec(self._listener(listener))

    def connection_refused(self, listener: str, reason: str) -> None:
        """``reason`` is one of REFUSAL_REASONS (a Refusal's metric_reason)."""
        self.connections_refused.inc((self._listener(listener)[0], reason if reason in REFUSAL_REASONS else "other"))

    def tls_handshake_failed(self, listener: str, kind: str) -> None:
        """``kind`` is one of TLS_HANDSHAKE_FAILURES."""
        bounded = kind if kind in TLS_HANDSHAKE_FAILURES else "other"
        self.tls_handshake_failures.inc((self._listener(listener)[0], bounded))

    def tls_handshake_deferred(self, listener: str) -> None:
        """A TLS connection waits for its address's handshake budget (until tls_handshake_resumed)."""
        self.tls_handshakes_deferred.inc(self._listener(listener))
        self.tls_handshakes_waiting.inc()

    def tls_handshake_resumed(self) -> None:
        self.tls_handshakes_waiting.dec()

    def authentication(self, mechanism: str | None, outcome: str) -> None:
        """``outcome``: "success" or a failure class; unknown mechanisms/outcomes become "other"."""
        labels = self._auth.get((mechanism or "", outcome))
        if labels is None:
            bounded = mechanism if mechanism in AUTH_MECHANISMS else "unknown" if mechanism is None else "other"
            labels = (bounded, outcome if outcome in AUTH_OUTCOMES else "other")
        self.authentications.inc(labels)

    def scram_legacy_nonce(self, mechanism: str) -> None:
        """A SCRAM login (or re-authentication) used librdkafka's legacy nonce form."""
        self.scram_legacy_nonces.inc((mechanism if mechanism in SASL_MECHANISMS else "other",))

    def authorization_decision(self, api_key: int, outcome: str) -> None:
        """``outcome`` is one of AUTHZ_OUTCOMES."""
        by_api = self._authz.get(outcome)
        labels = by_api[api_key] if by_api is not None and 0 <= api_key < len(by_api) else \
            (self._api_labels(api_key)[0], outcome if by_api is not None else "other")
        self.authorization_decisions.inc(labels)

    def observe_latency(self, api_key: int, seconds: float) -> None:
        api = self._api  # _api_labels inline: this and relayed() run once per relayed request
        self.request_latency.observe(api[api_key] if 0 <= api_key < len(api) else self._api_unknown, seconds)

    def password_hashed(self) -> None:
        self.password_hashes.inc()

    def relayed(self, api_key: int) -> None:
        api = self._api
        self.relayed_requests.inc(api[api_key] if 0 <= api_key < len(api) else self._api_unknown)

    def endpoints_dropped(self, api_key: int) -> None:
        self.streamed_endpoints_dropped.inc(self._api_labels(api_key))  # rare: the helper, not its inlined copy

    def upstream_error(self, kind: str) -> None:
        """``kind`` is one of UPSTREAM_ERROR_KINDS (anything else is counted as "other")."""
        self.upstream_errors.inc(self._upstream_kinds.get(kind, self._upstream_other))

    def set_store_lag(self, seconds: float) -> None:
        self.store_lag.set((), seconds)

    def render(self) -> str:
        return self.registry.render()
