"""The store a configuration names, as the operator commands open it (gateway/stores/access.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gateway.config import ConfigError, load_config
from gateway.stores.access import configured_store
from gateway.stores.security_topic import SecurityTopic


def _never(topic: SecurityTopic) -> str:
    raise AssertionError("a FILE store configuration must not open the security topic")


def test_a_file_store_opens_the_file_its_key_names(tmp_path: Path) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump({"upstream.bootstrap.servers": "127.0.0.1:9092",
                                      "ksgate.delegation.token.file": str(tmp_path / "tokens.json")}))
    with configured_store(load_config(config), "ksgate.delegation.token.file", lambda path: f"file {path}",
                          _never) as store:
        assert store == f"file {tmp_path / 'tokens.json'}"


def test_an_unset_file_key_is_a_config_error_naming_it(tmp_path: Path) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump({"upstream.bootstrap.servers": "127.0.0.1:9092"}))
    with pytest.raises(ConfigError, match=r"ksgate\.credentials\.file: not set"), \
            configured_store(load_config(config), "ksgate.credentials.file", str, _never):
        pass
