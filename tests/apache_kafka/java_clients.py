"""Kafka's own Java clients and command-line tools, run in JVMs against ksgate (or Kafka) for tests.

``JavaRunner`` runs a tool class (org.apache.kafka.tools.TopicCommand, ...) on a Kafka jar folder, and
``KsgateJavaClient`` (tests/apache_kafka/java/KsgateJavaClient.java: producer, transactions, group
consumer), compiled once per jar folder against its kafka-clients jar: 4.x from scripts/kafka/fetch.sh,
3.x from ``fetch.sh clients-3`` (REFERENCE_KAFKA3_LIB).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tests.apache_kafka.broker import jar_folder

if TYPE_CHECKING:
    from tests.harness import GatewayThread

JAVA_SOURCE = Path(__file__).resolve().parent / "java" / "KsgateJavaClient.java"
TOOL_HEAP = "-Xmx256m"
TOOL_TIMEOUT_S = 120
_QUIET_LOG4J2 = (  # WARN and above on stderr: the tools' stdout stays what they print
    "status = warn\n"
    "appender.err.type = Console\nappender.err.name = ERR\nappender.err.target = SYSTEM_ERR\n"
    "appender.err.layout.type = PatternLayout\nappender.err.layout.pattern = %p %m (%c)%n\n"
    "rootLogger.level = WARN\nrootLogger.appenderRef.err.ref = ERR\n"
)


class JavaToolError(RuntimeError):
    """A tool or the test client exited non-zero; the message carries its output's tail."""


def kafka3_clients_lib() -> Path | None:
    """The 3.x kafka-clients jar folder: $REFERENCE_KAFKA3_LIB, else ``fetch.sh clients-3``, else None."""
    return jar_folder("REFERENCE_KAFKA3_LIB", ("clients-3",), "kafka-clients-3.*.jar")


@dataclass(slots=True)
class JavaRunner:
    """Runs Kafka's Java code from the jars in ``lib``; scratch files (classes, log4j2) under ``directory``."""

    lib: Path
    directory: Path
    _classes: Path | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "log4j2.properties").write_text(_QUIET_LOG4J2)

    def run(self, main_class: str, args: Sequence[str], stdin: str | None = None,
            extra_classpath: Path | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        classpath = f"{self.lib}/*" if extra_classpath is None else f"{extra_classpath}{os.pathsep}{self.lib}/*"
        done = subprocess.run(
            ["java", TOOL_HEAP, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             f"-Dlog4j2.configurationFile={self.directory / 'log4j2.properties'}",
             "-cp", classpath, main_class, *args],
            input=stdin, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, cwd=self.directory, check=False)
        if check and done.returncode != 0:
            raise JavaToolError(f"{main_class} {' '.join(args)} exited {done.returncode}:\n"
                                f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return done

    def tool(self, main_class: str, bootstrap: str, properties: Path, *args: str,
             stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """An admin or console tool with ``--bootstrap-server`` and ``--command-config`` (Kafka 4.x names)."""
        return self.run(main_class, ["--bootstrap-server", bootstrap, "--command-config", str(properties), *args],
                        stdin=stdin)

    def classes(self) -> Path:
        """KsgateJavaClient compiled (once) against this folder's kafka-clients jar, for Java 17."""
        if self._classes is None:
            out = self.directory / "classes"
            jar = next(self.lib.glob("kafka-clients-*.jar"))
            subprocess.run(["javac", "--release", "17", "-d", str(out), "-cp", str(jar), str(JAVA_SOURCE)],
                           check=True, capture_output=True, timeout=TOOL_TIMEOUT_S)
            self._classes = out
        return self._classes

    def client(self, command: str, properties: Path, bootstrap: str, *args: str,
               check: bool = True) -> subprocess.CompletedProcess[str]:
        """KsgateJavaClient COMMAND (produce, transact, consume: see its source) with these settings."""
        return self.run("KsgateJavaClient", [command, str(properties), bootstrap, *args],
                        extra_classpath=self.classes(), check=check)


CONFIG_COMMAND = "org.apache.kafka.tools.ConfigCommand"  # kafka-configs


def scram_properties(path: Path, user: str = "admin") -> Path:
    """A tool's ``--command-config``: ``user`` (password ``<user>-secret``, as tests.harness.secured_gateway's users)
    over SASL_PLAINTEXT with SCRAM-SHA-512."""
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config="
        f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" '
        f'password="{user}-secret";\n')
    return path


@dataclass(slots=True, frozen=True)
class ConfigsTool:
    """kafka-configs run through ``gateway`` with ``properties``; a call returns what the tool printed."""

    gateway: GatewayThread
    java: JavaRunner
    properties: Path

    def __call__(self, *args: str) -> str:
        return self.java.tool(CONFIG_COMMAND, self.gateway.bootstrap, self.properties, *args).stdout


def java_available() -> bool:
    return shutil.which("java") is not None and shutil.which("javac") is not None
