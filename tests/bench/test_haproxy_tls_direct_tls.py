"""bench/anchors/haproxy_tls.py's direct-tls path: the client's TLS straight to an Apache Kafka SSL listener with the
proxies' certificate, the reference from which each TLS path's added latency is taken.

No process is started here (test_haproxy_tls_smoke.py runs the whole bench against Kafka).
"""

from __future__ import annotations

import ssl
import stat
from pathlib import Path

import pytest

from auth.cert_tools import write_tls_material
from bench.anchors.haproxy_tls import (
    DIRECT_TLS,
    ExtraListener,
    direct_tls_properties,
    listener_properties,
    parse_args,
    speaks_tls,
    tls_fixed_rate_lines,
    write_direct_tls_keystore,
)
from bench.anchors.kroxylicious import fixed_rate_lines, tls_client
from tests.apache_kafka.properties import BrokerLayout
from tests.bench.test_haproxy_tls_paths import fixed_rate_report  # one fake report for both TLS-mode tables


def test_direct_tls_is_named_only_with_kafka_upstream_and_never_a_default() -> None:
    assert DIRECT_TLS not in parse_args([]).paths and DIRECT_TLS not in parse_args(["--upstream", "kafka"]).paths
    picked = parse_args(["--upstream", "kafka", "--paths", "haproxy,direct-tls,direct"])
    assert picked.paths == ["direct", DIRECT_TLS, "haproxy"]  # the references first
    with pytest.raises(SystemExit):
        parse_args(["--paths", "direct-tls,haproxy"])  # Tansu has no TLS listener
    with pytest.raises(SystemExit):
        parse_args(["--plain", "--upstream", "kafka", "--paths", "direct-tls"])  # a TLS path


def test_the_direct_tls_listener_is_ssl_and_advertises_itself_beside_the_relays_plaintext_ones() -> None:
    layout = BrokerLayout(Path("/nowhere"), {"CONTROLLER": 1, "PLAINTEXT": 2, "SASL_SSL": 3, "SSL": 4})
    keys = listener_properties(layout, [ExtraListener("HAPROXY", "127.0.0.1:5", "127.0.0.1:6"),
                                        ExtraListener("DIRECT_TLS", "127.0.0.1:7", "127.0.0.1:7", "SSL")])
    assert str(keys["listeners"]).split(",")[-2:] == ["HAPROXY://127.0.0.1:5", "DIRECT_TLS://127.0.0.1:7"]
    assert str(keys["advertised.listeners"]).split(",") == [
        "PLAINTEXT://127.0.0.1:2", "SASL_SSL://127.0.0.1:3", "SSL://127.0.0.1:4", "HAPROXY://127.0.0.1:6",
        "DIRECT_TLS://127.0.0.1:7"]
    assert str(keys["listener.security.protocol.map"]).split(",") == [
        "CONTROLLER:PLAINTEXT", "PLAINTEXT:PLAINTEXT", "SASL_SSL:SASL_SSL", "SSL:SSL", "HAPROXY:PLAINTEXT",
        "DIRECT_TLS:SSL"]


def test_the_direct_tls_listener_serves_the_proxies_certificate_tls13_aes256_and_asks_no_client_certificate(
        tmp_path: Path) -> None:
    tls = write_tls_material(tmp_path / "tls")
    keystore = write_direct_tls_keystore(tls, tmp_path)
    assert stat.S_IMODE(keystore.stat().st_mode) == 0o600  # it holds the private key
    # Kafka's PEM keystore: the PKCS#8 key, then the chain; the one the proxies serve, and the key matches it.
    assert keystore.read_text() == tls.server_key.read_text() + tls.server_cert.read_text()
    ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(keystore)
    keys = direct_tls_properties(keystore)
    assert keys == {
        "listener.name.direct_tls.ssl.keystore.type": "PEM",
        "listener.name.direct_tls.ssl.keystore.location": keystore,
        "listener.name.direct_tls.ssl.client.auth": "none",  # the kit's SSL listener requires one; the proxies not
        "listener.name.direct_tls.ssl.enabled.protocols": "TLSv1.3",
        "listener.name.direct_tls.ssl.cipher.suites": "TLS_AES_256_GCM_SHA384"}


def test_every_path_but_plaintext_direct_has_its_tls_reported(tmp_path: Path) -> None:
    tls = write_tls_material(tmp_path / "tls")
    assert not speaks_tls({"bootstrap.servers": "127.0.0.1:1"})
    assert speaks_tls(tls_client({"bootstrap.servers": "127.0.0.1:1"}, tls))  # direct-tls and the proxies
    assert speaks_tls({"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SASL_SSL"})  # ksgate
    assert not speaks_tls({"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SASL_PLAINTEXT"})


def rows(lines: list[str]) -> dict[str, list[str]]:
    return {line[:20].strip(): line[20:].split() for line in lines if line[:1] not in ("", " ", "(")}


def test_the_tls_paths_fixed_rates_are_also_set_against_direct_tls_in_a_table_of_their_own() -> None:
    publish = {"direct": (3.0, 3.2, 3.4), DIRECT_TLS: (3.5, 3.4, 3.9),
               "haproxy": (3.6, 3.6, 4.0), "ksgate": (4.5, 4.6, 5.1)}
    report = fixed_rate_report(publish, 5000)
    paths = list(publish)
    lines = tls_fixed_rate_lines(report, paths, [5000])
    table = fixed_rate_lines(report.latency, paths, [5000])
    assert lines[:len(table)] == table and lines[len(table)] == ""
    against_direct = lines[len(table) + 1:lines.index("", len(table) + 1)]
    against_tls = lines[len(against_direct) + len(table) + 2:]
    # Against PLAINTEXT direct as before, direct-tls itself included: the TLS the client and broker do.
    assert against_direct[0].split() == ["direct-tls", "vs", "direct", "haproxy", "vs", "direct", "ksgate", "vs",
                                         "direct", "ksgate", "vs", "haproxy"]
    assert "proxy - direct," in against_direct[1]
    # medians: direct 3.2, direct-tls 3.5, haproxy 3.6, ksgate 4.6; each repeat's own against direct-tls:
    # haproxy 0.1 0.2 0.1, ksgate 1.0 1.2 1.2
    assert rows(against_direct)["5000/s pub p50 ms"][:2] == ["+0.30", "[+0.50]"]
    assert against_tls[0].split() == ["haproxy", "vs", "direct-tls", "ksgate", "vs", "direct-tls"]
    assert "proxy - direct-tls," in against_tls[1]
    assert rows(against_tls)["5000/s pub p50 ms"] == ["+0.10", "[+0.10]", "+1.10", "[+1.20]"]
    assert rows(against_tls)["5000/s pub p99 ms"] == ["+0.10", "[+0.10]", "+1.10", "[+1.20]"]


def test_without_plaintext_direct_only_the_direct_tls_table_follows() -> None:
    publish = {DIRECT_TLS: (3.5, 3.4, 3.9), "pyrelay-tls-uvloop": (4.0, 3.8, 4.0)}
    report = fixed_rate_report(publish, 5000)
    lines = tls_fixed_rate_lines(report, list(publish), [5000])
    table = fixed_rate_lines(report.latency, list(publish), [5000])
    assert lines[:len(table) + 1] == [*table, ""]
    assert lines[len(table) + 1].split() == ["pyrelay-tls-uvloop", "vs", "direct-tls"]
    assert rows(lines[len(table) + 1:])["5000/s pub p50 ms"] == ["+0.50", "[+0.40]"]
