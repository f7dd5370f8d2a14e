"""Static checks of the container files: Dockerfile, .dockerignore, docker-compose.yml, configs/.

No Docker engine is needed: the files are parsed and cross-checked against the source
tree, pyproject.toml and gateway.config, so a renamed file, a port that is advertised
but not published, or a config that no longer loads fails here rather than at
``docker compose up``.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from gateway.commands.cli import build_parser
from gateway.commands.init_upstream import GATEWAY_USER, UpstreamLayout
from gateway.config import (
    DEPRECATED_KEYS,
    KNOWN_KEYS,
    GatewayConfig,
    build_config,
    flatten,
    load_config,
    parse_metrics_listener,
)

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"
COMPOSE = ROOT / "docker-compose.yml"
DOCKER_CONFIG = "configs/docker/ksgate.yaml"
BASE_IMAGE = "python:3.11-slim"


# --- Dockerfile parsing -------------------------------------------------------------------


@dataclass
class Instruction:
    keyword: str  # upper case
    args: str  # the rest of the (joined) line
    line: int

    def flags_and_words(self) -> tuple[dict[str, str], list[str]]:
        """Split ``--flag=value`` options from the arguments (exec/JSON or shell form)."""
        text = self.args.strip()
        flags: dict[str, str] = {}
        while text.startswith("--"):
            option, _, text = text.partition(" ")
            name, _, value = option[2:].partition("=")
            flags[name] = value
            text = text.strip()
        words = json.loads(text) if text.startswith("[") else shlex.split(text)
        return flags, words

    def exec_form(self) -> list[str]:
        value = json.loads(self.args)
        assert isinstance(value, list) and all(isinstance(v, str) for v in value), \
            f"Dockerfile line {self.line}: {self.keyword} must be an exec-form JSON list of strings"
        return value


@dataclass
class Stage:
    image: str
    name: str | None
    line: int
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]


def parse_dockerfile(text: str) -> list[Stage]:
    """A small Dockerfile reader: comments, ``\\`` continuations, stages (default escape only)."""
    stages: list[Stage] = []
    pending = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):  # comment lines inside a continuation
            continue
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        line, pending = pending + stripped, ""
        keyword, _, args = line.partition(" ")
        instruction = Instruction(keyword.upper(), args.strip(), start)
        if instruction.keyword == "FROM":
            _, words = instruction.flags_and_words()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(words[0], name, start))
        elif not stages:
            assert instruction.keyword == "ARG", f"line {start}: {keyword} before the first FROM"
        else:
            stages[-1].instructions.append(instruction)
    assert not pending, "Dockerfile ends inside a line continuation"
    return stages


def copy_sources(stage: Stage) -> list[tuple[Instruction, list[str], str]]:
    """(instruction, sources, destination) of each COPY/ADD that reads the build context."""
    result = []
    for instruction in stage.instructions:
        if instruction.keyword not in ("COPY", "ADD"):
            continue
        flags, words = instruction.flags_and_words()
        if "from" in flags:  # from another stage or image, not the context
            continue
        assert len(words) >= 2, f"Dockerfile line {instruction.line}: {instruction.keyword} needs a source"
        result.append((instruction, words[:-1], words[-1]))
    return result


def dockerignore_patterns(root: Path) -> list[str]:
    path = root / ".dockerignore"
    if not path.exists():
        return []
    lines = (line.strip() for line in path.read_text("utf-8").splitlines())
    return [line.lstrip("/") for line in lines if line and not line.startswith("#")]


def _segments_match(pattern: tuple[str, ...], path: tuple[str, ...]) -> bool:
    if not pattern:
        return not path
    if pattern[0] == "**":
        return any(_segments_match(pattern[1:], path[i:]) for i in range(len(path) + 1))
    return bool(path) and fnmatch.fnmatchcase(path[0], pattern[0]) and _segments_match(pattern[1:], path[1:])


def dockerignored(relative: str, patterns: list[str]) -> bool:
    """Whether .dockerignore keeps ``relative`` (or a directory above it) out of the context.

    Docker's rules, closely enough for this repository: patterns are anchored at the
    context root, ``*`` stays within one path segment, ``**`` matches any number of
    directories, excluding a directory excludes what is in it, ``!`` re-includes.
    """
    parts = PurePosixPath(relative).parts
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        segments = PurePosixPath(pattern.removeprefix("!").strip("/")).parts
        if any(_segments_match(segments, parts[: i + 1]) for i in range(len(parts))):
            ignored = not negate
    return ignored


def dockerfile_problems(root: Path, dockerfile: Path) -> list[str]:
    """Every COPY/ADD source that is missing from (or ignored in) the build context."""
    patterns = dockerignore_patterns(root)
    problems = []
    for stage in parse_dockerfile(dockerfile.read_text("utf-8")):
        for instruction, sources, _ in copy_sources(stage):
            for source in sources:
                clean = source.removeprefix("./").rstrip("/") or "."
                matches = sorted(root.glob(clean)) if any(c in clean for c in "*?[") else [root / clean]
                if not any(m.exists() for m in matches):
                    problems.append(f"line {instruction.line}: {source} does not exist")
                elif clean != "." and dockerignored(clean, patterns):
                    problems.append(f"line {instruction.line}: {source} is excluded by .dockerignore")
    return problems


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return parse_dockerfile(DOCKERFILE.read_text("utf-8"))


@pytest.fixture(scope="module")
def final(stages: list[Stage]) -> Stage:
    return stages[-1]


# --- docker-compose.yml parsing -------------------------------------------------------------


@dataclass(frozen=True)
class PublishedPort:
    host_ip: str | None
    published: int | None
    target: int
    protocol: str = "tcp"


def _port_range(text: str) -> list[int]:
    low, _, high = text.partition("-")
    return list(range(int(low), int(high or low) + 1))


def parse_ports(entries: list[Any]) -> list[PublishedPort]:
    """Compose ``ports:`` in short ("[ip:][host:]container[/proto]") or long syntax."""
    result = []
    for entry in entries:
        if isinstance(entry, dict):
            published = entry.get("published")
            result.append(PublishedPort(entry.get("host_ip"), int(published) if published else None,
                                        int(entry["target"]), entry.get("protocol", "tcp")))
            continue
        assert isinstance(entry, str), f"ports entry {entry!r}: quote it (YAML reads 9092:9092 as a number)"
        spec, _, protocol = entry.partition("/")
        host_ip = None
        if spec.startswith("["):  # [IPv6]:host:container
            host_ip, _, spec = spec[1:].partition("]:")
        elif spec.count(":") == 2:
            host_ip, _, spec = spec.partition(":")
        published_text, _, target_text = spec.rpartition(":")
        targets = _port_range(target_text)
        publisheds = _port_range(published_text) if published_text else [None] * len(targets)
        assert len(publisheds) == len(targets), f"ports entry {entry!r}: ranges of different sizes"
        result.extend(PublishedPort(host_ip, p, t, protocol or "tcp") for p, t in zip(publisheds, targets,
                                                                                     strict=True))
    return result


@dataclass(frozen=True)
class Mount:
    type: str
    source: str | None
    target: str


def parse_volumes(entries: list[Any]) -> list[Mount]:
    result = []
    for entry in entries:
        if isinstance(entry, dict):
            result.append(Mount(entry["type"], entry.get("source"), entry["target"]))
            continue
        source, _, rest = entry.partition(":")
        if not rest:  # an anonymous volume: just the container path
            result.append(Mount("volume", None, source))
            continue
        target = rest.split(":")[0]
        is_path = source.startswith((".", "/", "~"))
        result.append(Mount("bind" if is_path else "volume", source, target))
    return result


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.partition("=")[::2] for item in env)
    return {key: str(value) for key, value in env.items()}


def compose_problems(root: Path, compose_file: Path) -> list[str]:
    """Every build context, Dockerfile and bind-mount source that does not exist."""
    base = compose_file.parent
    problems = []
    for name, service in (yaml.safe_load(compose_file.read_text("utf-8"))["services"]).items():
        build = service.get("build")
        if build is not None:
            context = base / (build if isinstance(build, str) else build.get("context", "."))
            if not context.is_dir():
                problems.append(f"{name}: build context {context} is not a directory")
            dockerfile = "Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile")
            if not (context / dockerfile).is_file():
                problems.append(f"{name}: dockerfile {context / dockerfile} does not exist")
        for mount in parse_volumes(service.get("volumes") or []):
            if mount.type == "bind" and not (base / str(mount.source)).exists():
                problems.append(f"{name}: bind-mount source {mount.source} does not exist")
        env_files = service.get("env_file") or []
        for env_file in [env_files] if isinstance(env_files, str) else env_files:
            path = env_file if isinstance(env_file, str) else env_file["path"]
            if not (base / path).exists():
                problems.append(f"{name}: env_file {path} does not exist")
    return problems


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    document = yaml.safe_load(COMPOSE.read_text("utf-8"))
    assert isinstance(document, dict) and isinstance(document.get("services"), dict)
    return document


@pytest.fixture(scope="module")
def ksgate_service(compose: dict[str, Any]) -> dict[str, Any]:
    service: dict[str, Any] = compose["services"]["ksgate"]
    return service


@pytest.fixture(scope="module")
def kafka_service(compose: dict[str, Any]) -> dict[str, Any]:
    service: dict[str, Any] = compose["services"]["kafka"]
    return service


def config_mount(service: dict[str, Any], target: str) -> Mount:
    mounts = [m for m in parse_volumes(service.get("volumes") or []) if m.target == target]
    assert len(mounts) == 1, f"expected one mount at {target}, got {mounts}"
    return mounts[0]


def cmd_config_path(final: Stage) -> str:
    (cmd,) = final.all("CMD")[-1:]
    args = build_parser().parse_args(cmd.exec_form())
    assert args.command == "run"
    config: str = args.config
    return config


# --- Dockerfile -------------------------------------------------------------------------------


def test_dockerfile_copy_sources_exist_and_are_not_dockerignored() -> None:
    assert dockerfile_problems(ROOT, DOCKERFILE) == []


def test_the_checks_report_missing_files(tmp_path: Path) -> None:
    """The existence checks above can fail: a broken tree is reported, file by file."""
    (tmp_path / "Dockerfile").write_text(
        f"FROM {BASE_IMAGE} AS build\nCOPY pyproject.toml \\\n     missing.txt ./\nCOPY --from=build /x /y\n"
        f"FROM {BASE_IMAGE}\nCOPY configs/docker/ksgate.yaml /etc/ksgate/ksgate.yaml\nCOPY tests/ /t\n")
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "tests").mkdir()
    (tmp_path / ".dockerignore").write_text("# comment\ntests\n")
    assert dockerfile_problems(tmp_path, tmp_path / "Dockerfile") == [
        "line 2: missing.txt does not exist",
        "line 6: configs/docker/ksgate.yaml does not exist",
        "line 7: tests/ is excluded by .dockerignore",
    ]
    (tmp_path / "docker-compose.yml").write_text(yaml.safe_dump({"services": {
        "a": {"build": {"context": "nowhere"}, "volumes": ["./absent.yaml:/etc/x.yaml:ro", "data:/data"]},
        "b": {"build": ".", "volumes": [{"type": "bind", "source": "./tests", "target": "/t"}]},
    }}))
    assert compose_problems(tmp_path, tmp_path / "docker-compose.yml") == [
        f"a: build context {tmp_path / 'nowhere'} is not a directory",
        f"a: dockerfile {tmp_path / 'nowhere' / 'Dockerfile'} does not exist",
        "a: bind-mount source ./absent.yaml does not exist",
    ]


@pytest.mark.parametrize(("path", "ignored"), [
    (".venv", True), (".venv/lib/site.py", True), ("gateway/__pycache__/x.pyc", True),
    ("gateway/__pycache__", True), (".git", True), ("tests/test_containers.py", True),
    ("ksgate.egg-info", True), ("gateway/config.py", False), ("pyproject.toml", False),
    (DOCKER_CONFIG, False), ("protocol/schemas/metadata.ks", False),
])
def test_dockerignore_keeps_build_inputs_and_drops_caches(path: str, ignored: bool) -> None:
    assert dockerignored(path, dockerignore_patterns(ROOT)) is ignored


def test_every_stage_is_python_311_slim(stages: list[Stage]) -> None:
    assert stages, "no FROM in the Dockerfile"
    names = {stage.name for stage in stages if stage.name}
    for stage in stages:
        assert stage.image in names or stage.image == BASE_IMAGE, f"line {stage.line}: FROM {stage.image}"
    assert stages[-1].image == BASE_IMAGE


def test_build_copies_every_package_in_pyproject(stages: list[Stage]) -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    include = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    top_level = {name.split(".")[0].rstrip("*") for name in include}
    copied = {source.removeprefix("./").rstrip("/")
              for stage in stages for _, sources, _ in copy_sources(stage) for source in sources}
    assert "pyproject.toml" in copied or "." in copied
    assert "." in copied or top_level <= copied, f"packages not copied: {sorted(top_level - copied)}"


def test_pip_installs_no_extras(stages: list[Stage]) -> None:
    pip_lines = [i for stage in stages for i in stage.all("RUN") if re.search(r"\bpip\b", i.args)]
    assert pip_lines, "the Dockerfile never runs pip"
    for instruction in pip_lines:
        assert "[" not in instruction.args.split("pip", 1)[1], \
            f"line {instruction.line}: installs extras (test dependencies do not belong in the image)"


def test_runs_as_a_fixed_non_root_user(final: Stage) -> None:
    users = final.all("USER")
    assert users, "the final stage has no USER: it would run as root"
    user, _, group = users[-1].args.partition(":")
    assert user.isdigit() and int(user) >= 1000, f"USER {users[-1].args}: use a fixed non-root uid"
    assert not group or (group.isdigit() and int(group) != 0), f"USER {users[-1].args}: root group"


def test_entrypoint_and_cmd_run_the_copied_config(final: Stage) -> None:
    (entrypoint,) = final.all("ENTRYPOINT")[-1:]
    assert entrypoint.exec_form() == ["ksgate"]
    config = cmd_config_path(final)
    copied_to = {dest: sources for _, sources, dest in copy_sources(final)}
    assert copied_to.get(config) == [DOCKER_CONFIG], f"CMD reads {config}, which is not {DOCKER_CONFIG}"


def test_console_script_exists() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    assert pyproject["project"]["scripts"]["ksgate"] == "gateway.commands.cli:main"
    import gateway.commands.cli

    assert callable(gateway.commands.cli.main)


def test_expose_covers_the_bundled_configs_ports(final: Stage) -> None:
    exposed = {port for i in final.all("EXPOSE") for word in i.args.split()
               for port in _port_range(word.split("/")[0])}
    config = load_config(ROOT / DOCKER_CONFIG, env={})
    for listener in config.listeners:
        assert listener.bind.port in exposed
        for node_id in (config.node_id_min, config.node_id_max):
            assert config.node_port(listener, node_id) in exposed, f"node {node_id} port not exposed"


def test_healthcheck_probes_readyz_on_the_configured_metrics_listener(final: Stage) -> None:
    (check,) = final.all("HEALTHCHECK")[-1:]
    command = check.args.split(" CMD ", 1)[1]
    words = json.loads(command)
    assert words[:2] == ["python", "-c"]
    compile(words[2], "HEALTHCHECK", "exec")
    assert cmd_config_path(final) in words[2] and "/readyz" in words[2]
    assert "ksgate.metrics.listener" in words[2]
    config = load_config(ROOT / DOCKER_CONFIG, env={})
    assert "ksgate.metrics.listener" in config.settings, "the bundled config has no metrics listener to probe"


def test_volume_directories_belong_to_the_runtime_user(final: Stage) -> None:
    """Named volumes start with the image directory's owner: ksgate must be able to write into them."""
    config = load_config(ROOT / DOCKER_CONFIG, env={})
    runs = " ".join(i.args for i in final.all("RUN"))
    for key in ("ssl.keystore.location", "ksgate.credentials.file", "ksgate.acl.file", "ksgate.audit.log.file"):
        directory = str(PurePosixPath(str(config.settings[key])).parent)
        assert directory in runs, f"{key}: {directory} is not created in the image"
    assert "chown -R 10001:10001 /var/lib/ksgate /var/log/ksgate" in runs


# --- docker-compose.yml --------------------------------------------------------------------------


def test_compose_paths_exist() -> None:
    assert compose_problems(ROOT, COMPOSE) == []


def test_kafka_is_a_single_kraft_node_not_published(kafka_service: dict[str, Any]) -> None:
    image, _, tag = kafka_service["image"].partition(":")
    assert image == "apache/kafka" and tag.split(".")[0] == "4", kafka_service["image"]
    assert not kafka_service.get("ports"), "Kafka's port is published: clients could bypass ksgate"
    assert kafka_service.get("network_mode") != "host"
    env = environment(kafka_service)
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == f"{env['KAFKA_NODE_ID']}@localhost:9093"
    assert env["KAFKA_CONTROLLER_LISTENER_NAMES"] == "CONTROLLER"
    listeners = dict(item.split("://") for item in env["KAFKA_LISTENERS"].split(","))
    assert listeners == {"SASL_SSL": ":9092", "CONTROLLER": "localhost:9093", "INTERNAL": "localhost:9094"}
    protocol_map = dict(item.split(":") for item in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    assert set(listeners) <= set(protocol_map)
    assert env["KAFKA_ADVERTISED_LISTENERS"] == "SASL_SSL://kafka:9092,INTERNAL://localhost:9094"
    for key in ("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
                "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"):
        assert env[key] == "1", key
    assert env["KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS"] == "0"
    assert kafka_service["healthcheck"]["test"], "depends_on: service_healthy needs a healthcheck"


def test_ksgate_is_built_here_and_waits_for_kafka(ksgate_service: dict[str, Any]) -> None:
    build = ksgate_service["build"]
    context = build if isinstance(build, str) else build.get("context", ".")
    dockerfile = "Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile")
    assert (COMPOSE.parent / context / dockerfile).resolve() == DOCKERFILE
    assert ksgate_service["depends_on"]["kafka"]["condition"] == "service_healthy"


def test_ksgate_mounts_the_config_the_image_runs(ksgate_service: dict[str, Any], final: Stage) -> None:
    mount = config_mount(ksgate_service, cmd_config_path(final))
    assert mount.type == "bind"
    assert (COMPOSE.parent / str(mount.source)).resolve() == (ROOT / DOCKER_CONFIG).resolve()


# What the ksgate service's entrypoint adds to its environment (from the file init writes).
ENTRYPOINT_ENV = {"KSGATE_UPSTREAM_SASL_PASSWORD": "read-from-the-upstream-volume"}


def _mounted_config(ksgate_service: dict[str, Any], final: Stage) -> GatewayConfig:
    mount = config_mount(ksgate_service, cmd_config_path(final))
    return load_config(COMPOSE.parent / str(mount.source), env={**environment(ksgate_service), **ENTRYPOINT_ENV})


def test_ksgate_publishes_its_advertised_ports(ksgate_service: dict[str, Any], final: Stage) -> None:
    config = _mounted_config(ksgate_service, final)
    published = {(p.published, p.target) for p in parse_ports(ksgate_service.get("ports") or [])}
    for listener in config.listeners:
        # A client on the host dials the advertised host:port; it must reach the bound port.
        assert listener.advertised.host in ("localhost", "127.0.0.1")
        assert (listener.advertised.port, listener.bind.port) in published, "bootstrap port not published"
        # Node ports are bound and advertised under the same number.
        node_port = config.node_port(listener, 1)
        assert (node_port, node_port) in published, f"node 1's port {node_port} not published"
        assert listener.bind.host in ("", "0.0.0.0", "::"), "bind every interface inside the container"


def test_ksgate_upstream_is_the_kafka_service(ksgate_service: dict[str, Any], final: Stage,
                                              kafka_service: dict[str, Any]) -> None:
    config = _mounted_config(ksgate_service, final)
    advertised = environment(kafka_service)["KAFKA_ADVERTISED_LISTENERS"]
    host, _, port = advertised.split(",")[0].split("://")[1].rpartition(":")
    assert config.upstream.bootstrap_servers == ((host, int(port)),)
    assert config.node_id_min <= int(environment(kafka_service)["KAFKA_NODE_ID"]) <= config.node_id_max


def test_every_listener_of_kafka_on_the_network_is_sasl_ssl(kafka_service: dict[str, Any]) -> None:
    """Only localhost-bound listeners may be PLAINTEXT: what ksgate (or anyone on the network) dials is SASL_SSL."""
    env = environment(kafka_service)
    protocol_map = dict(item.split(":") for item in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    for item in env["KAFKA_LISTENERS"].split(","):
        name, _, address = item.partition("://")
        if address.rpartition(":")[0] != "localhost":
            assert protocol_map[name] == "SASL_SSL", f"{name} listens on the network as {protocol_map[name]}"
    assert env["KAFKA_SASL_ENABLED_MECHANISMS"] == "SCRAM-SHA-512"
    assert "java.security.auth.login.config=" in env["KAFKA_OPTS"], "apache/kafka refuses SASL without a JAAS file"


def test_kafka_reads_the_keystore_and_password_init_writes(compose: dict[str, Any],
                                                           kafka_service: dict[str, Any]) -> None:
    """apache/kafka reads KAFKA_SSL_*_FILENAME/_CREDENTIALS from /etc/kafka/secrets: init's kafka-secrets volume."""
    secrets = PurePosixPath("/etc/kafka/secrets")
    layout = UpstreamLayout(Path("/var/lib/ksgate"))
    init_volumes = _named_volumes(compose["services"]["init"])
    for service in (kafka_service, compose["services"]["kafka-scram"]):
        volume = _named_volumes(service)[str(secrets)]
        assert init_volumes[str(layout.broker_keystore.parent)] == volume
    env = environment(kafka_service)
    assert env["KAFKA_SSL_KEYSTORE_FILENAME"] == layout.broker_keystore.name
    assert env["KAFKA_SSL_KEYSTORE_CREDENTIALS"] == env["KAFKA_SSL_KEY_CREDENTIALS"] == \
        layout.broker_keystore_creds.name
    assert env["KAFKA_SSL_KEYSTORE_TYPE"] == "PKCS12"
    jaas = env["KAFKA_OPTS"].split("java.security.auth.login.config=")[1].split()[0]
    mount = config_mount(kafka_service, jaas)
    assert "KafkaServer" in (COMPOSE.parent / str(mount.source)).read_text("utf-8")
    # kafka-scram registers the password of init's file as the SCRAM credential of the user ksgate logs in as.
    script = compose["services"]["kafka-scram"]["entrypoint"][-1]
    assert str(secrets / layout.broker_gateway_password.name) in script
    assert f"--entity-name {GATEWAY_USER} " in script and "SCRAM-SHA-512=[password=" in script
    assert "localhost:9094" in script and compose["services"]["kafka-scram"]["network_mode"] == "service:kafka"


def test_ksgate_verifies_kafka_and_logs_in_with_inits_password(compose: dict[str, Any],
                                                                ksgate_service: dict[str, Any], final: Stage) -> None:
    config = _mounted_config(ksgate_service, final).upstream
    layout = UpstreamLayout(Path("/var/lib/ksgate"))
    assert config.security_protocol == "SASL_SSL" and config.sasl_mechanism == "SCRAM-SHA-512"
    assert config.sasl_username == GATEWAY_USER
    assert config.ssl_truststore_location == str(layout.gateway_ca)
    assert config.ssl_endpoint_identification_algorithm == "https", "the broker's host name must be checked"
    volume = _named_volumes(ksgate_service)[str(layout.gateway_ca.parent)]
    assert _named_volumes(compose["services"]["init"])[str(layout.gateway_ca.parent)] == volume
    # The entrypoint exports the password file's content and runs the image's own command.
    shell, flag, script, name = ksgate_service["entrypoint"]
    assert (shell, flag, name) == ("/bin/sh", "-c", "ksgate")
    assert f"$(cat {layout.gateway_password})" in script.replace("$$", "$")
    assert "export KSGATE_UPSTREAM_SASL_PASSWORD=" in script and script.endswith('exec ksgate "$$@"')
    (cmd,) = final.all("CMD")[-1:]
    assert ksgate_service["command"] == cmd.exec_form()
    # Neither the client nor anything else but init and ksgate sees the password's volume.
    for name_, service in compose["services"].items():
        if name_ not in ("init", "ksgate"):
            assert volume not in _named_volumes(service).values(), f"{name_} mounts {volume}"


def test_ports_are_quoted_strings_or_mappings(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        for entry in service.get("ports") or []:
            assert isinstance(entry, (str, dict)), f"{name}: port {entry!r} is not a string"


def _named_volumes(service: dict[str, Any]) -> dict[str, str]:
    """target -> volume name of a service's named-volume mounts."""
    return {m.target: str(m.source) for m in parse_volumes(service.get("volumes") or []) if m.type == "volume"}


def test_ksgate_is_secure_and_published(ksgate_service: dict[str, Any], final: Stage) -> None:
    config = _mounted_config(ksgate_service, final)
    assert [listener.security_protocol for listener in config.listeners] == ["SASL_SSL"]
    assert config.settings["authorizer.class.name"] == "StandardAuthorizer"
    assert config.settings["ksgate.audit.log.allowed"] is True
    _, metrics_port = parse_metrics_listener(str(config.settings["ksgate.metrics.listener"]))
    published = {(p.published, p.target) for p in parse_ports(ksgate_service.get("ports") or [])}
    assert (metrics_port, metrics_port) in published, "the metrics port is not published"
    assert ksgate_service.get("init") is True, "no init process: SIGTERM handling and reaping are left to ksgate"


def test_init_service_provisions_the_volumes_ksgate_reads(compose: dict[str, Any], ksgate_service: dict[str, Any],
                                                          final: Stage) -> None:
    init = compose["services"]["init"]
    assert init["image"] == ksgate_service["image"]
    args = build_parser().parse_args(init["command"])
    assert args.command == "init"
    assert ksgate_service["depends_on"]["init"]["condition"] == "service_completed_successfully"
    config = _mounted_config(ksgate_service, final)
    ksgate_volumes, init_volumes = _named_volumes(ksgate_service), _named_volumes(init)
    for key in ("ssl.keystore.location", "ssl.key.location", "ksgate.credentials.file", "ksgate.acl.file",
                "ksgate.audit.log.file"):
        directory = str(PurePosixPath(str(config.settings[key])).parent)
        assert directory in ksgate_volumes, f"{key}: {directory} is not a named volume of ksgate"
        assert init_volumes.get(directory) == ksgate_volumes[directory], f"{key}: init writes elsewhere"
        assert ksgate_volumes[directory] in (compose.get("volumes") or {}), f"{directory}: volume not declared"
    # Each of certificates, users, ACLs, the audit log and the upstream secrets has a volume of its own.
    assert len({ksgate_volumes[d] for d in ksgate_volumes}) == len(ksgate_volumes) >= 5
    assert args.kafka_host == "kafka", "init must make the keystore for the host name ksgate dials"


def test_client_runs_only_in_the_test_profile_on_ksgates_network(compose: dict[str, Any]) -> None:
    client = compose["services"]["client"]
    assert client["profiles"] == ["test"]
    assert client["network_mode"] == "service:ksgate"
    assert not client.get("ports")
    build = client["build"]
    assert (COMPOSE.parent / build["context"] / build["dockerfile"]).is_file()


def test_client_reads_the_password_init_generates_from_inits_volume(compose: dict[str, Any]) -> None:
    """ksgate init makes no demo users: the client logs in as admin with init's password file to create them."""
    import ast

    from gateway.commands.init import InitLayout

    client_source = ast.parse((ROOT / "scripts/compose/client.py").read_text("utf-8"))
    constants = {node.targets[0].id: node.value for node in client_source.body
                 if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)}
    password_file = PurePosixPath(ast.literal_eval(constants["ADMIN_PASSWORD"].args[0]))  # Path("...")
    init = compose["services"]["init"]
    root = PurePosixPath(init["command"][init["command"].index("--dir") + 1])
    assert password_file == PurePosixPath(str(InitLayout(Path(str(root))).password_file))
    client_volumes, init_volumes = _named_volumes(compose["services"]["client"]), _named_volumes(init)
    directory = str(password_file.parent)
    assert directory in client_volumes and client_volumes[directory] == init_volumes.get(directory)


AIRGAP = ROOT / "scripts/compose/airgap.override.yml"


STANDIN = ROOT / "scripts/compose/kafka-standin"


def test_airgap_override_swaps_only_the_kafka_image(compose: dict[str, Any]) -> None:
    """The stand-in takes the official image's place and nothing else: same variables, volumes and health check."""
    override = yaml.safe_load(AIRGAP.read_text("utf-8"))
    assert override["services"] == {"kafka": {"image": "ksgate-compose-kafka:local"},
                                    "kafka-scram": {"image": "ksgate-compose-kafka:local"}}
    assert compose["services"]["kafka-scram"]["image"] == compose["services"]["kafka"]["image"]
    script = (ROOT / "scripts/compose-test.sh").read_text("utf-8")
    assert "KAFKA_STANDIN_IMAGE=ksgate-compose-kafka:local" in script


def test_kafka_standin_has_what_the_compose_file_runs(compose: dict[str, Any], kafka_service: dict[str, Any]) -> None:
    """Every /opt/kafka/bin tool the compose file calls exists in the stand-in, and its CMD is apache/kafka's."""
    stages = parse_dockerfile((STANDIN / "Dockerfile").read_text("utf-8"))
    copied = {dest: sources for _, sources, dest in copy_sources(stages[-1])}
    assert copied["/opt/kafka/bin/"] == ["bin/"] and copied["/opt/kafka/libs/"] == ["lib/"]
    (cmd,) = stages[-1].all("CMD")[-1:]
    assert cmd.exec_form() == ["/etc/kafka/docker/run"]
    assert "run" in copied["/etc/kafka/docker/"]
    commands = kafka_service["healthcheck"]["test"] + " " + compose["services"]["kafka-scram"]["entrypoint"][-1]
    tools = set(re.findall(r"/opt/kafka/bin/([\w.-]+)", commands))
    assert tools == {"kafka-broker-api-versions.sh", "kafka-configs.sh"}
    for tool in tools | {"kafka-storage.sh", "kafka-server-start.sh"}:
        assert (STANDIN / "bin" / tool).stat().st_mode & 0o111, f"{tool} is missing or not executable"
    user = stages[-1].all("USER")[-1].args
    assert user != "root" and user != "0", "the stand-in runs as root (the official image does not)"


# --- configs/ -------------------------------------------------------------------------------------


CONFIGS = sorted(p for p in (ROOT / "configs").rglob("*") if p.suffix in (".yaml", ".yml"))


def test_configs_exist() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in CONFIGS}
    assert {DOCKER_CONFIG, "configs/example.yaml", "configs/upstream-tls.yaml"} <= names


# A shipped config may take a secret from the environment (configs/production-sasl-ssl.yaml): a stand-in value here.
SECRETS_FROM_THE_ENVIRONMENT = {"KSGATE_UPSTREAM_SASL_PASSWORD": "from-the-environment"}


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_config_loads(path: Path) -> None:
    config = load_config(path, env=SECRETS_FROM_THE_ENVIRONMENT)
    assert config.listeners and config.upstream.bootstrap_servers


LOOPBACK = ("127.0.0.1", "::1", "localhost")


def unsafe_settings(config: GatewayConfig) -> list[str]:
    """Why a configuration is unsafe to copy as it is (empty: safe).

    The rule: a listener bound beyond the loopback (0.0.0.0, an empty host, any other address) authenticates every
    client over TLS (SASL_SSL, or SSL with ssl.client.auth=required); a configuration with such a listener, or with
    any authenticating listener, runs the authorizer with deny-by-default; no development-only switch (PLAIN in
    clear, unsigned OAuth tokens) is on; and a TLS upstream's certificates are checked against its host names.  A
    PLAINTEXT listener on the loopback with no authorizer (Kafka's defaults, configs/example.yaml) is safe: only
    local processes reach it.  The metrics listener carries no record data and is not judged.
    """
    problems = []
    exposed = [lst for lst in config.listeners if lst.bind.host not in LOOPBACK]
    for listener in exposed:
        client_auth = str(listener.settings.get("ssl.client.auth") or "none").lower()
        if not (listener.security_protocol == "SASL_SSL"
                or (listener.security_protocol == "SSL" and client_auth == "required")):
            problems.append(f"{listener.name} binds {listener.bind.host or 'every interface'} without authenticating "
                            f"clients over TLS ({listener.security_protocol}, ssl.client.auth={client_auth})")
    if exposed or any(lst.uses_sasl or lst.uses_tls for lst in config.listeners):
        if not config.authorization_enabled:
            problems.append("authenticated or exposed listeners without authorizer.class.name")
        if config.settings["allow.everyone.if.no.acl.found"]:
            problems.append("allow.everyone.if.no.acl.found is true")
    for key in ("ksgate.sasl.plain.allow.insecure", "ksgate.oauthbearer.unsecured"):
        if config.settings[key]:
            problems.append(f"{key} is true")
    if config.upstream.uses_tls and config.upstream.ssl_endpoint_identification_algorithm.lower() != "https":
        problems.append("the upstream's host names are not checked (upstream.ssl.endpoint.identification.algorithm)")
    return problems


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_shipped_config_is_safe_to_copy_as_it_is(path: Path) -> None:
    assert unsafe_settings(load_config(path, env=SECRETS_FROM_THE_ENVIRONMENT)) == []


@pytest.mark.parametrize(("settings", "problem"), [
    ({"listeners": "PLAINTEXT://0.0.0.0:9092", "advertised.listeners": "PLAINTEXT://h:9092"}, "PLAINTEXT"),
    ({"listeners": "SSL://:9092", "advertised.listeners": "SSL://h:9092"}, "ssl.client.auth=none"),
    ({"listeners": "SASL_PLAINTEXT://10.0.0.1:9092"}, "SASL_PLAINTEXT"),
    ({"listeners": "SASL_SSL://127.0.0.1:9092"}, "without authorizer"),
    ({"listeners": "SASL_SSL://127.0.0.1:9092", "authorizer.class.name": "StandardAuthorizer",
      "ksgate.acl.file": "a.json", "allow.everyone.if.no.acl.found": True}, "allow.everyone"),
    ({"ksgate.sasl.plain.allow.insecure": True}, "plain.allow.insecure"),
    ({"upstream.security.protocol": "SSL", "upstream.ssl.endpoint.identification.algorithm": ""}, "host names"),
])
def test_the_safety_rule_names_each_unsafe_setting(settings: dict[str, Any], problem: str) -> None:
    config = build_config({"upstream.bootstrap.servers": "b:9092", **settings})
    assert any(problem in text for text in unsafe_settings(config)), unsafe_settings(config)


def test_upstream_tls_example_uses_ssl() -> None:
    upstream = load_config(ROOT / "configs/upstream-tls.yaml", env={}).upstream
    assert upstream.security_protocol == "SSL"
    assert upstream.ssl_truststore_location and upstream.ssl_endpoint_identification_algorithm == "https"


def test_example_documents_every_key() -> None:
    text = (ROOT / "configs/example.yaml").read_text("utf-8")
    documented = set(re.findall(r"^(?:# )?([a-z][a-z0-9_.-]*):", text, re.MULTILINE))
    missing = set(KNOWN_KEYS) - documented - DEPRECATED_KEYS.keys()  # deprecated keys are warned about, not shown
    assert not missing, f"configs/example.yaml does not document {sorted(missing)}"
    assert any(key.startswith("listener.name.") and key.endswith(".node.port.base") for key in documented)


def test_example_shows_the_defaults() -> None:
    """Keys set in the example carry their default, as its header says."""
    values = flatten(yaml.safe_load((ROOT / "configs/example.yaml").read_text("utf-8")))
    for key, (parse, default) in KNOWN_KEYS.items():
        if key in values and default is not None:
            assert parse(key, values[key]) == parse(key, default), f"{key}: example differs from the default"
