"""Kafka's Java client (4.x and 3.x) through ksgate in front of Apache Kafka: produce, consume in classic
and KIP-848 groups, transactions read back with read_committed, share groups; with the quickstart's files."""

from __future__ import annotations

import re
import uuid

import pytest

from tests.apache_kafka.java_clients import JavaRunner, kafka3_clients_lib
from tests.gateway.upstream.conftest import JavaGateway

TOPICS = "org.apache.kafka.tools.TopicCommand"
CONFIGS = "org.apache.kafka.tools.ConfigCommand"
SHARE_CONSOLE = "org.apache.kafka.tools.consumer.ConsoleShareConsumer"
WAIT_MS = "30000"


def _topic(java_gateway: JavaGateway, prefix: str, partitions: int = 1) -> str:
    topic = f"demo-{prefix}-{uuid.uuid4().hex[:6]}"  # alice owns demo-* (the quickstart's ACLs)
    java_gateway.java.tool(TOPICS, java_gateway.bootstrap, java_gateway.properties("alice"),
                           "--create", "--topic", topic, "--partitions", str(partitions))
    return topic


def _consume(java: JavaRunner, java_gateway: JavaGateway, user: str, topic: str, protocol: str,
             count: int, isolation: str = "read_uncommitted") -> list[str]:
    done = java.client("consume", java_gateway.properties(user), java_gateway.bootstrap, topic,
                       f"demo-{protocol}-{uuid.uuid4().hex[:6]}", protocol, isolation, str(count), WAIT_MS)
    return done.stdout.split()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_java_producer_and_group_consumer_pass_through_ksgate(java_gateway: JavaGateway, protocol: str) -> None:
    # alice writes (ALL on demo-*, IDEMPOTENT_WRITE), bob reads in a group (READ on topics and groups demo-*).
    topic = _topic(java_gateway, f"java-{protocol}", partitions=2)
    java = java_gateway.java
    java.client("produce", java_gateway.properties("alice"), java_gateway.bootstrap, topic, "12")
    got = _consume(java, java_gateway, "bob", topic, protocol, 12)
    assert sorted(got) == sorted(f"record-{i}" for i in range(12))


def test_java_consumer_is_refused_a_topic_its_user_may_not_read(java_gateway: JavaGateway) -> None:
    topic = f"private-{uuid.uuid4().hex[:6]}"  # outside demo-*: bob has no ACL on it
    java_gateway.java.tool(TOPICS, java_gateway.bootstrap, java_gateway.properties("admin"), "--create",
                           "--topic", topic)
    done = java_gateway.java.client("consume", java_gateway.properties("bob"), java_gateway.bootstrap, topic,
                                    "demo-denied", "classic", "read_uncommitted", "1", "15000", check=False)
    assert done.returncode != 0
    assert "TopicAuthorizationException" in done.stderr or "Not authorized" in done.stderr


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_read_committed_consumer_sees_exactly_the_committed_records(java_gateway: JavaGateway,
                                                                      protocol: str) -> None:
    topic = _topic(java_gateway, f"tx-{protocol}")
    java = java_gateway.java
    java.client("transact", java_gateway.properties("admin"), java_gateway.bootstrap, topic,
                f"tx-{uuid.uuid4().hex[:6]}", "commit:3,abort:2,commit:3")
    committed = [f"0-commit-{i}" for i in range(3)] + [f"2-commit-{i}" for i in range(3)]
    assert _consume(java, java_gateway, "bob", topic, protocol, 6, "read_committed") == committed
    # The aborted records are there for a read_uncommitted consumer: what read_committed hid was real.
    everything = _consume(java, java_gateway, "bob", topic, protocol, 8)
    assert everything == [*committed[:3], "1-abort-0", "1-abort-1", *committed[3:]]


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_the_3x_java_client_produces_and_consumes_through_ksgate(java_gateway: JavaGateway, protocol: str,
                                                                 tmp_path_factory: pytest.TempPathFactory) -> None:
    lib = kafka3_clients_lib()
    if lib is None:
        pytest.skip("no 3.x kafka-clients: scripts/kafka/fetch.sh clients-3 (or REFERENCE_KAFKA3_LIB)")
    java3 = JavaRunner(lib, tmp_path_factory.mktemp("java3"))
    topic = _topic(java_gateway, f"java3-{protocol}")
    java3.client("produce", java_gateway.properties("alice"), java_gateway.bootstrap, topic, "5")
    assert sorted(_consume(java3, java_gateway, "bob", topic, protocol, 5)) == [f"record-{i}" for i in range(5)]


def test_a_share_group_consumes_through_ksgate(java_gateway: JavaGateway) -> None:
    topic = _topic(java_gateway, "share")
    java = java_gateway.java
    java.client("produce", java_gateway.properties("alice"), java_gateway.bootstrap, topic, "4")
    group = f"demo-share-{uuid.uuid4().hex[:6]}"
    # A share group starts at the log's end unless its group config says otherwise (KIP-932).
    java.tool(CONFIGS, java_gateway.bootstrap, java_gateway.properties("admin"), "--alter", "--entity-type",
              "groups", "--entity-name", group, "--add-config", "share.auto.offset.reset=earliest")
    done = java.tool(SHARE_CONSOLE, java_gateway.bootstrap, java_gateway.properties("bob"), "--topic", topic,
                     "--group", group, "--max-messages", "4", "--timeout-ms", WAIT_MS)
    assert sorted(done.stdout.split()) == [f"record-{i}" for i in range(4)]


_NETWORK_DEBUG = (  # the client's NetworkClient at DEBUG on stderr: every request header it sends, every answer
    "status = warn\n"
    "appender.err.type = Console\nappender.err.name = ERR\nappender.err.target = SYSTEM_ERR\n"
    "appender.err.layout.type = PatternLayout\nappender.err.layout.pattern = %p %m (%c)%n\n"
    "rootLogger.level = WARN\nrootLogger.appenderRef.err.ref = ERR\n"
    "logger.net.name = org.apache.kafka.clients.NetworkClient\nlogger.net.level = DEBUG\n"
)


def test_the_4x_java_client_gets_api_versions_v5_answered_at_once(java_gateway: JavaGateway,
                                                                   tmp_path_factory: pytest.TempPathFactory) -> None:
    """Kafka 4.4's client asks ApiVersions v5 (KIP-1242) on every connection, naming the cluster and node once it
    knows them: each is answered at v5 without an error, so no UNSUPPORTED_VERSION round trip and no re-bootstrap."""
    java = JavaRunner(java_gateway.java.lib, tmp_path_factory.mktemp("java-debug"))
    (java.directory / "log4j2.properties").write_text(_NETWORK_DEBUG)
    topic = _topic(java_gateway, "apiv5")
    done = java.client("produce", java_gateway.properties("alice"), java_gateway.bootstrap, topic, "3")
    sent = re.findall(r"Sending API_VERSIONS request with header RequestHeader\(apiKey=API_VERSIONS, "
                      r"apiVersion=(\d+)[^\n]*?: (ApiVersionsRequestData\([^\n]*?\))", done.stderr)
    answered = re.findall(r"Received API_VERSIONS response from node \S+ for request with header "
                          r"RequestHeader\(apiKey=API_VERSIONS, apiVersion=(\d+)[^\n]*?: "
                          r"ApiVersionsResponseData\(errorCode=(-?\d+)", done.stderr)
    assert sent and {version for version, _ in sent} == {"5"}
    assert answered and set(answered) == {("5", "0")}, answered
    # Connections to brokers the metadata named say which cluster and node they mean to reach (KIP-1242).
    assert any("nodeId=-1" not in body for _, body in sent), sent
