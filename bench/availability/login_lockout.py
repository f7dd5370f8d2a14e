"""Issue #18, item 1, as figures: how long admin's and alice's logins take from an address where bob
has just failed 30 times, per mechanism.

A benchmark, not a test (tests/gateway/edge/test_login_lockout_e2e.py asserts the outcome).  It
starts an embedded Tansu broker and one in-process gateway (SASL_PLAINTEXT: PLAIN, SCRAM-SHA-256,
SCRAM-SHA-512, OAUTHBEARER against a local JWKS, Kafka's default 100 ms failed-authentication
delay), then per mechanism: 30 failed logins for bob over the raw wire (new wrong passwords, or
forged tokens), then admin and alice each connect with a fresh confluent-kafka admin client and
fetch Metadata.  Printed per mechanism: bob's 30 failures (s), and each user's connect-to-Metadata
time, or "refused" when the client could not get in within --timeout.

    PYTHONPATH=. .venv/bin/python bench/availability/login_lockout.py [--failures 30] [--timeout 10]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from confluent_kafka import KafkaException  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

from gateway.commands.embedded_broker import EmbeddedBroker  # noqa: E402
from gateway.stores.file_users import FileCredentialStore  # noqa: E402
from tests.auth.test_tls_oauth_e2e import Jwks  # noqa: E402
from tests.harness import GatewayThread  # noqa: E402
from tests.login_attempts import MECHANISMS, PASSWORDS, client_settings, fail_once, gateway_settings  # noqa: E402


def login_ms(settings: dict[str, str | int | float | bool], timeout_s: float) -> float | None:
    """A fresh client's time to Metadata (ms), or None if it did not get in within the timeout."""
    start = time.perf_counter()
    try:
        AdminClient(settings).list_topics(timeout=timeout_s)
    except KafkaException:
        return None
    return (time.perf_counter() - start) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--failures", type=int, default=30)
    parser.add_argument("--timeout", type=float, default=10.0, help="each real client's own timeout (s)")
    args = parser.parse_args(argv)
    jwks = Jwks()
    jwks.add_key("k1")
    jwks.add_key("forger", publish=False)
    rows: list[tuple[str, float, dict[str, float | None]]] = []
    with tempfile.TemporaryDirectory(prefix="ksgate-lockout-") as tmp:
        credentials = Path(tmp) / "users.json"
        for user, password in PASSWORDS.items():
            FileCredentialStore(credentials).upsert_user(user, password)
        with EmbeddedBroker(log_path=Path(tmp) / "tansu.log") as broker:
            gateway = GatewayThread(broker.bootstrap, gateway_settings(str(credentials), jwks),
                                    protocol="SASL_PLAINTEXT").start()
            try:
                for mechanism in MECHANISMS:
                    start = time.perf_counter()
                    for attempt in range(args.failures):
                        fail_once(gateway, mechanism, attempt, jwks)
                    failing_s = time.perf_counter() - start
                    times = {user: login_ms(client_settings(gateway, mechanism, user, jwks), args.timeout)
                             for user in ("admin", "alice")}
                    rows.append((mechanism, failing_s, times))
            finally:
                gateway.stop()
                jwks.server.shutdown()
    print(f"{'mechanism':<14} {'bob: ' + str(args.failures) + ' failures':>18} {'admin login':>12} {'alice login':>12}")
    for mechanism, failing_s, times in rows:
        shown = {user: "refused" if ms is None else f"{ms:.0f} ms" for user, ms in times.items()}
        print(f"{mechanism:<14} {failing_s:>16.2f} s {shown['admin']:>12} {shown['alice']:>12}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
