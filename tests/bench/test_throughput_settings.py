"""The benchmark's gateway settings configure what its options say (bench/throughput.py)."""

from __future__ import annotations

from pathlib import Path

from bench.throughput import authorization_settings
from gateway.config import build_config

UPSTREAM = {"upstream.bootstrap.servers": "127.0.0.1:9092"}


def test_authz_allow_all_turns_the_authorizer_on(tmp_path: Path) -> None:
    config = build_config({**UPSTREAM, **authorization_settings("allow-all", tmp_path)})
    assert config.authorization_enabled
    assert config.settings["allow.everyone.if.no.acl.found"] is True


def test_authz_off_is_the_bare_relay(tmp_path: Path) -> None:
    config = build_config({**UPSTREAM, **authorization_settings("off", tmp_path)})
    assert not config.authorization_enabled
