"""Client settings for Kafka's Java clients and tools (kafka-topics.sh --command-config FILE, ...).

librdkafka takes ``sasl.username``/``sasl.password`` and ``ssl.ca.location``; the Java client takes a
JAAS line (``sasl.jaas.config``) and a truststore, which may be the same PEM file (``ssl.truststore.type=PEM``).
"""

from __future__ import annotations

from pathlib import Path

SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


def _jaas_quoted(text: str) -> str:
    # A JAAS option value is a double-quoted string in which \ and " are escaped.
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _properties_escaped(text: str) -> str:
    # java.util.Properties reads \ as an escape and a line end as the value's end.
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")


def java_client_properties(bootstrap: str, protocol: str, *, user: str | None = None, password: str | None = None,
                           mechanism: str = "SCRAM-SHA-512", ca_pem: Path | None = None) -> str:
    """The text of a Java client properties file for ``user`` on a ``protocol`` listener at ``bootstrap``."""
    settings = {"bootstrap.servers": bootstrap, "security.protocol": protocol}
    if protocol.startswith("SASL_"):
        if user is None or password is None:
            raise ValueError(f"{protocol} needs a user and a password")
        module = PLAIN_LOGIN_MODULE if mechanism == "PLAIN" else SCRAM_LOGIN_MODULE
        settings["sasl.mechanism"] = mechanism
        settings["sasl.jaas.config"] = (f"{module} required username={_jaas_quoted(user)} "
                                        f"password={_jaas_quoted(password)};")
    if protocol.endswith("SSL") and ca_pem is not None:
        settings.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca_pem.resolve())})
    return "".join(f"{key}={_properties_escaped(value)}\n" for key, value in settings.items())
