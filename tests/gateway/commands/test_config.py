"""Configuration: Kafka-style keys, environment overrides, errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config import ConfigError, build_config, load_config

BASE = {"upstream.bootstrap.servers": "broker-1:9092,broker-2:9092"}


def test_kafka_style_keys_and_nested_yaml_are_equivalent(tmp_path: Path) -> None:
    flat = tmp_path / "flat.yaml"
    flat.write_text("listeners: PLAINTEXT://127.0.0.1:19092\nsocket.request.max.bytes: 2048\n"
                    "upstream.bootstrap.servers: b:9092\n")
    nested = tmp_path / "nested.yaml"
    nested.write_text("listeners: PLAINTEXT://127.0.0.1:19092\nsocket:\n  request:\n    max:\n      bytes: 2048\n"
                      "upstream:\n  bootstrap:\n    servers: b:9092\n")
    a, b = load_config(flat, env={}), load_config(nested, env={})
    assert a.socket_request_max_bytes == b.socket_request_max_bytes == 2048
    assert a.upstream.bootstrap_servers == b.upstream.bootstrap_servers == (("b", 9092),)


def test_environment_overrides_the_file(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("upstream.bootstrap.servers: b:9092\nqueued.max.requests: 10\n")
    config = load_config(path, env={"KSGATE_QUEUED_MAX_REQUESTS": "77",
                                    "KSGATE_UPSTREAM_BOOTSTRAP_SERVERS": "other:1234"})
    assert config.queued_max_requests == 77
    assert config.upstream.bootstrap_servers == (("other", 1234),)


@pytest.mark.parametrize(("settings", "named"), [
    ({"socket.request.max.byte": 1}, "socket.request.max.byte"),
    ({"socket.request.max.bytes": "lots"}, "socket.request.max.bytes"),
    ({"socket.request.max.bytes": -1}, "socket.request.max.bytes"),
    ({"listeners": "PLAINTEXT:/host:9092"}, "listeners"),
    ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners"),
    ({"advertised.listeners": "OTHER://h:1"}, "advertised.listeners"),
    ({"upstream.security.protocol": "SASL_GSSAPI"}, "upstream.security.protocol"),
    ({"node.id.min": 5, "node.id.max": 1}, "node.id.max"),
    ({"queued.max.request.bytes": 0}, "queued.max.request.bytes"),
    ({"queued.max.request.bytes": -2}, "queued.max.request.bytes"),
    ({"listener.name.plaintext.colour": 1}, "listener.name.plaintext.colour"),
])
def test_invalid_settings_are_refused_with_the_key_named(settings: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError) as error:
        build_config({**BASE, **settings})
    assert named in str(error.value)


def test_missing_upstream_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"upstream\.bootstrap\.servers"):
        build_config({})


def test_unknown_key_suggests_the_close_match() -> None:
    with pytest.raises(ConfigError, match=r"did you mean 'queued\.max\.requests'"):
        build_config({**BASE, "queued.max.request": 3})


def test_node_ports_are_a_pure_function_of_config_so_instances_agree() -> None:
    settings = {**BASE, "listeners": "PLAINTEXT://0.0.0.0:9092",
                "advertised.listeners": "PLAINTEXT://gw.example:9092",
                "listener.name.plaintext.node.port.base": 9200, "node.id.min": 100, "node.id.max": 199}
    a, b = build_config(settings), build_config(dict(settings))
    listener = a.listeners[0]
    assert a.node_port(listener, 111) == b.node_port(b.listeners[0], 111) == 9211
    assert listener.advertised.host == "gw.example"
    with pytest.raises(ConfigError, match=r"node\.id"):
        a.node_port(listener, 200)


def test_secrets_stay_out_of_reprs() -> None:
    config = build_config({**BASE, "upstream.ssl.key.password": "hunter2"})
    assert "hunter2" not in repr(config.upstream)


def test_an_authorizer_needs_an_acl_file_and_super_users_must_be_principals() -> None:
    with pytest.raises(ConfigError, match=r"ksgate\.acl\.file"):
        build_config({**BASE, "authorizer.class.name": "StandardAuthorizer"})
    with pytest.raises(ConfigError, match=r"super\.users"):
        build_config({**BASE, "super.users": "admin"})
    with pytest.raises(ConfigError, match=r"authorizer\.class\.name"):
        build_config({**BASE, "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                      "ksgate.acl.file": "/tmp/x.json"})
    config = build_config({**BASE, "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                           "ksgate.acl.file": "/tmp/x.json", "super.users": "User:admin;User:ops"})
    assert config.authorization_enabled and config.super_users == ["User:admin", "User:ops"]


def test_a_listener_name_the_protocol_map_does_not_map_is_refused() -> None:
    """A typo in the protocol (SASL_SSSL) once opened a PLAINTEXT listener without a word; Kafka refuses it."""
    with pytest.raises(ConfigError) as error:
        build_config({**BASE, "listeners": "SASL_SSSL://127.0.0.1:9092"})
    assert "SASL_SSSL" in str(error.value) and "listener.security.protocol.map" in str(error.value)
    assert "did you mean SASL_SSL" in str(error.value)


def test_the_protocol_map_gives_listener_names_of_ones_own_their_protocol() -> None:
    config = build_config({**BASE, "listeners": "INTERNAL://127.0.0.1:9092,EXTERNAL://127.0.0.1:9192",
                           "listener.security.protocol.map": "INTERNAL:PLAINTEXT,external:SASL_PLAINTEXT"})
    assert [(lst.name, lst.security_protocol) for lst in config.listeners] == [
        ("INTERNAL", "PLAINTEXT"), ("EXTERNAL", "SASL_PLAINTEXT")]


@pytest.mark.parametrize("mapping", ["INTERNAL", "INTERNAL:TLS", "INTERNAL:SSL,INTERNAL:PLAINTEXT"])
def test_a_malformed_protocol_map_is_refused(mapping: str) -> None:
    with pytest.raises(ConfigError, match=r"listener\.security\.protocol\.map"):
        build_config({**BASE, "listeners": "INTERNAL://127.0.0.1:9092", "listener.security.protocol.map": mapping})
