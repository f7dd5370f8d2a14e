"""Writes the configuration a command put together (quickstart, set-up tools) as a gateway.yaml.

The file holds every key that was set, flat and sorted, and is read back and validated before it is
kept, so ``ksgate run --config FILE`` starts the same gateway.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from gateway.config import ConfigError, build_config, flatten


def render_effective_config(settings: Mapping[str, Any], header: Sequence[str] = ()) -> str:
    """YAML text: ``header`` lines as comments, then one ``key: value`` line per setting, sorted."""
    for key, value in settings.items():
        if value is not None and not isinstance(value, (str, int, bool)):
            raise ConfigError(f"{key}: cannot write {type(value).__name__} values to a configuration file")
    comments = "".join(f"# {line}\n".replace("# \n", "#\n") for line in header)
    body = yaml.safe_dump({k: settings[k] for k in sorted(settings) if settings[k] is not None},
                         default_flow_style=False, sort_keys=False, allow_unicode=True, width=1_000)
    return comments + body


def write_effective_config(path: Path, settings: Mapping[str, Any], header: Sequence[str] = ()) -> Path:
    """Write ``settings`` to ``path`` (owner-only: it may name secrets), atomically; ConfigError if the
    result would not load back to the same settings or would not start a gateway."""
    text = render_effective_config(settings, header)
    loaded = flatten(yaml.safe_load(text) or {})
    expected = {k: v for k, v in settings.items() if v is not None}
    if loaded != expected:
        changed = sorted(k for k in expected.keys() | loaded.keys() if loaded.get(k) != expected.get(k))
        raise ConfigError(f"{path}: {', '.join(changed)} would not read back as written")
    build_config(loaded)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(temp, 0o600)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return path
