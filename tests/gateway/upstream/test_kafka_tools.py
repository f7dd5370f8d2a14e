"""Kafka's command-line tools (their 4.4 classes on the JVM) through ksgate in front of Apache Kafka, with
the properties files the quickstart writes: topics, console producer and consumer, acls, configs for
SCRAM users, delegation tokens, consumer groups, transactions."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

from authz.model import AclOperation, ResourceType
from gateway.commands.java_client_files import java_client_properties
from gateway.stores.file_acls import FileAclStore
from tests.apache_kafka import KafkaBroker
from tests.gateway.upstream.conftest import JavaGateway

TOPICS = "org.apache.kafka.tools.TopicCommand"
PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
ACLS = "org.apache.kafka.tools.AclCommand"
CONFIGS = "org.apache.kafka.tools.ConfigCommand"
TOKENS = "org.apache.kafka.tools.DelegationTokenCommand"
GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"
FEATURES = "org.apache.kafka.tools.FeatureCommand"
_EPOCH = re.compile(r"\s*Epoch: -?\d+")  # the broker's metadata offset when it read the levels: moves on


def _name(prefix: str) -> str:
    return f"demo-{prefix}-{uuid.uuid4().hex[:6]}"


def test_kafka_topics_creates_lists_and_describes_through_ksgate(java_gateway: JavaGateway) -> None:
    java, bootstrap, alice = java_gateway.java, java_gateway.bootstrap, java_gateway.properties("alice")
    topic = _name("topics")
    assert f"Created topic {topic}." in java.tool(TOPICS, bootstrap, alice, "--create", "--topic", topic,
                                                  "--partitions", "3").stdout
    assert topic in java.tool(TOPICS, bootstrap, alice, "--list").stdout.split()
    described = java.tool(TOPICS, bootstrap, alice, "--describe", "--topic", topic).stdout
    assert "PartitionCount: 3" in described
    # bob may read demo-* but not see topics outside it: the listing is filtered, as Kafka filters it.
    private = f"private-{uuid.uuid4().hex[:6]}"
    java.tool(TOPICS, bootstrap, java_gateway.properties("admin"), "--create", "--topic", private)
    listed_by_bob = java.tool(TOPICS, bootstrap, java_gateway.properties("bob"), "--list").stdout.split()
    assert topic in listed_by_bob and private not in listed_by_bob


def test_console_producer_and_consumer_round_trip_and_consumer_groups_reset_offsets(
        java_gateway: JavaGateway) -> None:
    java, bootstrap = java_gateway.java, java_gateway.bootstrap
    topic, group = _name("console"), _name("group")
    java.tool(TOPICS, bootstrap, java_gateway.properties("alice"), "--create", "--topic", topic)
    lines = [f"line-{i}" for i in range(5)]
    java.tool(PRODUCER, bootstrap, java_gateway.properties("alice"), "--topic", topic, stdin="\n".join(lines) + "\n")
    consume = ("--topic", topic, "--group", group, "--from-beginning", "--max-messages", "5", "--timeout-ms", "30000")
    assert java.tool(CONSUMER, bootstrap, java_gateway.properties("bob"), *consume).stdout.split() == lines

    bob = java_gateway.properties("bob")
    assert group in java.tool(GROUPS, bootstrap, bob, "--list").stdout.split()
    described = java.tool(GROUPS, bootstrap, bob, "--describe", "--group", group).stdout
    assert re.search(rf"{group}\s+{topic}\s+0\s+5\s+5\s+0", described), described
    # Resetting needs DELETE-free rights only: READ on the group and the topic (bob has both).
    reset = java.tool(GROUPS, bootstrap, bob, "--reset-offsets", "--group", group, "--topic", topic,
                      "--to-earliest", "--execute").stdout
    assert re.search(rf"{group}\s+{topic}\s+0\s+0", reset), reset
    assert java.tool(CONSUMER, bootstrap, bob, *consume).stdout.split() == lines  # from the reset offset


def test_kafka_acls_adds_lists_and_removes_acls_in_ksgate(java_gateway: JavaGateway) -> None:
    java, bootstrap, admin = java_gateway.java, java_gateway.bootstrap, java_gateway.properties("admin")
    topic = f"acl-{uuid.uuid4().hex[:6]}"
    binding = ("--allow-principal", "User:bob", "--operation", "Write", "--topic", topic)
    java.tool(ACLS, bootstrap, admin, "--add", *binding)
    listed = java.tool(ACLS, bootstrap, admin, "--list", "--topic", topic).stdout
    assert "principal=User:bob, host=*, operation=WRITE, permissionType=ALLOW" in listed
    store = FileAclStore(java_gateway.plan.directory / "acls.json")  # ksgate serves ACLs itself
    assert any(b.pattern.resource_type == ResourceType.TOPIC and b.pattern.name == topic
               and b.entry.operation == AclOperation.WRITE for b in store.load())
    java.tool(ACLS, bootstrap, admin, "--remove", "--force", *binding)
    assert "User:bob" not in java.tool(ACLS, bootstrap, admin, "--list", "--topic", topic).stdout
    assert not any(b.pattern.name == topic for b in FileAclStore(java_gateway.plan.directory / "acls.json").load())


def test_kafka_configs_creates_a_scram_user_who_then_logs_in_through_ksgate(java_gateway: JavaGateway) -> None:
    java, bootstrap, admin = java_gateway.java, java_gateway.bootstrap, java_gateway.properties("admin")
    user, password = f"carol{uuid.uuid4().hex[:6]}", "carol-pw-1"
    java.tool(CONFIGS, bootstrap, admin, "--alter", "--entity-type", "users", "--entity-name", user,
              "--add-config", f"SCRAM-SHA-512=[iterations=8192,password={password}]")
    described = java.tool(CONFIGS, bootstrap, admin, "--describe", "--entity-type", "users", "--entity-name", user)
    assert "SCRAM-SHA-512=iterations=8192" in described.stdout
    carol = _write(java_gateway, f"{user}.jaas.properties", java_client_properties(
        bootstrap, "SASL_SSL", user=user, password=password, ca_pem=java_gateway.plan.directory / "ca.pem"))
    java.tool(TOPICS, bootstrap, carol, "--list")  # authenticates (an empty listing: carol has no ACLs)
    java.tool(CONFIGS, bootstrap, admin, "--alter", "--entity-type", "users", "--entity-name", user,
              "--delete-config", "SCRAM-SHA-512")
    refused = java.run(TOPICS, ["--bootstrap-server", bootstrap, "--command-config", str(carol), "--list"],
                       check=False)
    assert refused.returncode != 0 and "SaslAuthenticationException" in refused.stdout + refused.stderr


def test_kafka_delegation_tokens_create_describe_renew_authenticate_and_expire(java_gateway: JavaGateway) -> None:
    java, bootstrap, admin = java_gateway.java, java_gateway.bootstrap, java_gateway.properties("admin")
    created = java.tool(TOKENS, bootstrap, admin, "--create", "--max-life-time-period", "-1",
                        "--renewer-principal", "User:admin").stdout
    token_id = re.search(r"tokenId : (\S+)", created)
    assert token_id is not None, created
    row = next(line.split() for line in created.splitlines() if line.startswith(token_id[1]))
    hmac = row[1]
    owner = ("--describe", "--owner-principal", "User:admin")
    assert token_id[1] in java.tool(TOKENS, bootstrap, admin, *owner).stdout
    renewed = java.tool(TOKENS, bootstrap, admin, "--renew", "--hmac", hmac, "--renew-time-period", "3600000")
    assert "Completed renew operation" in renewed.stdout
    # The token logs in (SCRAM with tokenauth=true) as its owner, a super user: it may list topics.
    token_props = _write(java_gateway, "token.jaas.properties", java_client_properties(
        bootstrap, "SASL_SSL", user=token_id[1], password=hmac, ca_pem=java_gateway.plan.directory / "ca.pem",
    ).replace(f'password="{hmac}";', f'password="{hmac}" tokenauth="true";'))
    java.tool(TOPICS, bootstrap, token_props, "--list")
    java.tool(TOKENS, bootstrap, admin, "--expire", "--hmac", hmac, "--expiry-time-period", "-1")
    assert token_id[1] not in java.tool(TOKENS, bootstrap, admin, *owner).stdout


def test_kafka_transactions_lists_and_describes_a_transaction_made_through_ksgate(
        java_gateway: JavaGateway) -> None:
    java, bootstrap, admin = java_gateway.java, java_gateway.bootstrap, java_gateway.properties("admin")
    topic, transactional_id = _name("txtool"), f"tx-tool-{uuid.uuid4().hex[:6]}"
    java.tool(TOPICS, bootstrap, admin, "--create", "--topic", topic)
    java.client("transact", admin, bootstrap, topic, transactional_id, "commit:2")
    assert re.search(rf"{transactional_id}\s+1\s+\d+\s+CompleteCommit",
                     java.tool(TRANSACTIONS, bootstrap, admin, "list").stdout)
    described = java.tool(TRANSACTIONS, bootstrap, admin, "describe", "--transactional-id", transactional_id).stdout
    assert re.search(rf"1\s+{transactional_id}\s+\d+\s+\d+\s+CompleteCommit", described), described
    producers = java.tool(TRANSACTIONS, bootstrap, admin, "describe-producers", "--topic", topic,
                          "--partition", "0").stdout
    assert "ProducerId" in producers and len(producers.strip().splitlines()) == 2


def _write(java_gateway: JavaGateway, name: str, text: str) -> Path:
    path = java_gateway.plan.directory / name
    path.write_text(text)
    return path


def test_a_password_with_quotes_and_backslashes_logs_in_from_the_written_java_file(
        java_gateway: JavaGateway) -> None:
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    from gateway.commands.acls import read_properties

    user, password = f"dave{uuid.uuid4().hex[:6]}", 'p"w\\1 =;x'
    # Through the gateway's own AlterUserScramCredentials (librdkafka takes any password bytes): the
    # gateway has the user before it answers, so the login below cannot race a file reload.
    admin = AdminClient({**read_properties(java_gateway.plan.directory / "admin.properties"),
                         "bootstrap.servers": java_gateway.bootstrap})
    upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                          password.encode())
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=30)
    dave = _write(java_gateway, f"{user}.jaas.properties", java_client_properties(
        java_gateway.bootstrap, "SASL_SSL", user=user, password=password,
        ca_pem=java_gateway.plan.directory / "ca.pem"))
    java_gateway.java.tool(TOPICS, java_gateway.bootstrap, dave, "--list")  # exits 0 only once logged in


def test_kafka_features_describes_through_ksgate_what_kafka_lists_directly(
        java_gateway: JavaGateway, kafka: KafkaBroker, tmp_path: Path) -> None:
    """Admin.describeFeatures (ApiVersions v5 from Kafka 4.4's client) sees the features whose lowest level is 0
    (group.version, share.version...) through ksgate as it sees them at the broker itself."""
    java = java_gateway.java
    plain = tmp_path / "plain.properties"
    plain.write_text("")
    direct = java.tool(FEATURES, kafka.bootstrap("PLAINTEXT"), plain, "describe").stdout
    through = java.tool(FEATURES, java_gateway.bootstrap, java_gateway.properties("alice"), "describe").stdout
    assert "Feature: group.version" in direct  # what this test is about is there to be seen
    assert sorted(_EPOCH.sub("", line) for line in through.splitlines()) == \
        sorted(_EPOCH.sub("", line) for line in direct.splitlines())
