"""The Java client properties files: what ``ksgate quickstart`` writes for Kafka's own tools."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.commands.java_client_files import java_client_properties
from gateway.commands.quickstart import QuickstartPlan, write_client_files


def _read_java_properties(text: str) -> dict[str, str]:
    # The subset of java.util.Properties these files use: key=value lines, \\ and \\n escapes.
    values = {}
    for line in text.splitlines():
        key, _, value = line.partition("=")
        values[key] = value.replace("\\n", "\n").replace("\\\\", "\\")
    return values


def test_the_quickstart_writes_a_java_file_per_user_next_to_the_librdkafka_one(tmp_path: Path) -> None:
    plan = QuickstartPlan(tmp_path, 9092, "SASL_SSL")
    written = write_client_files(plan)
    assert {p.name for p in written} >= {"alice.properties", "alice.jaas.properties", "admin.jaas.properties"}
    alice = _read_java_properties((tmp_path / "alice.jaas.properties").read_text())
    assert alice == {
        "bootstrap.servers": "localhost:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                            'username="alice" password="alice-secret";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str((tmp_path / "ca.pem").resolve()),
    }
    assert (tmp_path / "alice.jaas.properties").stat().st_mode & 0o077 == 0, "a password file readable by others"


def test_a_plaintext_quickstart_writes_no_credentials(tmp_path: Path) -> None:
    write_client_files(QuickstartPlan(tmp_path, 9092, "PLAINTEXT"))
    assert _read_java_properties((tmp_path / "bob.jaas.properties").read_text()) == {
        "bootstrap.servers": "localhost:9092", "security.protocol": "PLAINTEXT"}


def test_quotes_and_backslashes_in_a_password_survive_jaas_and_properties_quoting() -> None:
    text = java_client_properties("h:1", "SASL_PLAINTEXT", user="u", password='a"b\\c', mechanism="PLAIN")
    jaas = _read_java_properties(text)["sasl.jaas.config"]
    assert jaas == ('org.apache.kafka.common.security.plain.PlainLoginModule required '
                    'username="u" password="a\\"b\\\\c";')


def test_sasl_without_a_password_is_refused() -> None:
    with pytest.raises(ValueError, match="needs a user and a password"):
        java_client_properties("h:1", "SASL_SSL", user="u")
