"""Whether the upstream cluster still answers: the upstream half of /readyz.

Sans-IO: the gateway reports each answer (a probe's ApiVersions, a client's upstream link) with
the event loop's clock; ``problem(now)`` says why the gateway cannot serve, or None.
"""

from __future__ import annotations

from dataclasses import dataclass

# The periodic probe runs at most this often (and at least three times per timeout).
MAX_PROBE_INTERVAL_S = 5.0
MIN_PROBE_INTERVAL_S = 0.1
# The probe also reads the upstream's feature levels (ApiVersions), which clients get from the gateway: under
# steady client traffic it still runs this often, so a level changed with kafka-features reaches them within it.
FEATURES_REFRESH_S = 60.0


@dataclass(slots=True)
class UpstreamHealth:
    """Ready while some upstream broker answered within ``timeout_s`` (ksgate.readiness.upstream.timeout.ms)."""

    timeout_s: float
    last_answer: float | None = None  # loop time of the latest answer; None: none yet
    # Why the latest probe failed (cleared by an answer): /readyz names the cause, not only the silence.
    last_failure: str | None = None
    # Loop time the gateway last read the upstream's feature levels; None: never (start-up reads them).
    features_read: float | None = None

    @property
    def probe_interval_s(self) -> float:
        """How often to probe so that an answering upstream never looks silent for ``timeout_s``."""
        return max(MIN_PROBE_INTERVAL_S, min(MAX_PROBE_INTERVAL_S, self.timeout_s / 3))

    def answered(self, now: float) -> None:
        self.last_answer = now
        self.last_failure = None

    def probe_failed(self, reason: str) -> None:
        self.last_failure = reason

    def silent_for(self, now: float) -> float | None:
        return None if self.last_answer is None else now - self.last_answer

    def needs_probe(self, now: float) -> bool:
        """False when a client link proved the upstream alive recently enough and the feature levels were read
        less than FEATURES_REFRESH_S ago: no probe needed."""
        if self.features_read is not None and now - self.features_read >= FEATURES_REFRESH_S:
            return True
        silent = self.silent_for(now)
        return silent is None or silent >= self.probe_interval_s

    def problem(self, now: float) -> str | None:
        silent = self.silent_for(now)
        if silent is None:
            problem = "no upstream bootstrap server has answered yet"
        elif silent > self.timeout_s:
            problem = (f"no upstream broker has answered for {silent * 1000:.0f} ms "
                       f"(ksgate.readiness.upstream.timeout.ms: {self.timeout_s * 1000:.0f})")
        else:
            return None
        return problem if self.last_failure is None else f"{problem}; the latest probe: {self.last_failure}"
