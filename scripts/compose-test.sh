#!/usr/bin/env bash
# Builds the image from the Dockerfile, starts docker-compose.yml's secure stack and drives a real Kafka client
# through ksgate (scripts/compose/client.py); always takes the stack down.  Exit code: the client's.
# Engine: Docker Compose v2 where a Docker engine answers, else podman + podman-compose (installed as root from
# Debian / PyPI when missing), configured only through files in this script's own directory ($KSGATE_COMPOSE_HOME).
# Air-gapped (a base image cannot be pulled): a debootstrapped python:3.11-slim stand-in and, instead of apache/kafka,
# a stand-in with Apache Kafka's jars from Maven Central (scripts/compose/airgap.override.yml, kafka-standin/).
# Usage: bash scripts/compose-test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

STARTED=$SECONDS
PROJECT=${KSGATE_COMPOSE_PROJECT:-ksgate-compose-test}
PYTHON_IMAGE=docker.io/library/python:3.11-slim
KAFKA_IMAGE=docker.io/$(sed -n 's/^ *image: *\(apache\/kafka:[^ ]*\).*/\1/p' docker-compose.yml | head -1)
if [ "$(id -u)" = 0 ]; then
  STATE=${KSGATE_COMPOSE_HOME:-/var/cache/ksgate-compose}   # config, podman's image store (the base image cache)
  RUNTIME=/run/ksgate-compose                               # volatile podman state (gone after a reboot)
else
  STATE=${KSGATE_COMPOSE_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/ksgate-compose}
  RUNTIME=${XDG_RUNTIME_DIR:-/tmp}/ksgate-compose-$(id -u)
fi
# The stand-in image carries this in its environment (not KSGATE_*: the gateway refuses unknown KSGATE_ variables).
STANDIN_MARK=COMPOSE_TEST_STANDIN=ksgate-debootstrap-bookworm
MODE="registry images"
mkdir -p "$STATE"
FILES=(-f docker-compose.yml)

log() { printf 'compose-test: [%3ss] %s\n' "$((SECONDS - STARTED))" "$*" >&2; }

apt_install() {  # packages, only those missing; as root with apt only
  local need=() pkg
  for pkg in "$@"; do  # "installed", not merely known (a removed package keeps its config files)
    [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" = "install ok installed" ] || need+=("$pkg")
  done
  [ "${#need[@]}" -eq 0 ] && return 0
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    log "missing ${need[*]}: run as root on Debian to install them"; return 1
  fi
  log "installing ${need[*]} (Debian)"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
}

setup_podman() {
  # catatonit backs `init: true`; netavark + aardvark-dns give the compose network its service names; netavark
  # (1.4, bookworm) programs the bridge's NAT with the iptables command, which podman only Suggests: without it
  # every RUN of a build fails with "netavark: No such file or directory".
  command -v podman >/dev/null && command -v runc >/dev/null && [ -x /usr/libexec/podman/catatonit ] \
    && command -v iptables >/dev/null || apt_install podman runc catatonit netavark aardvark-dns iptables
  mkdir -p "$STATE" "$RUNTIME"
  # Host quirks: hybrid cgroups need runc (not crun); podman's default nofile ulimit is above the host's hard limit.
  local nofile nproc cgroups=""
  nofile=$(ulimit -Hn); [ "$nofile" = unlimited ] && nofile=1048576
  # nproc too: podman's default is above what its conmon may hand on (at most the kernel's pid_max).
  nproc=$(ulimit -Hu); [ "$nproc" = unlimited ] && nproc=4194304
  nproc=$(( nproc < $(cat /proc/sys/kernel/pid_max) ? nproc : $(cat /proc/sys/kernel/pid_max) ))
  [ -d /run/systemd/system ] || cgroups='cgroup_manager = "cgroupfs"'
  cat > "$STATE/containers.conf" <<EOF
# Written by scripts/compose-test.sh (CONTAINERS_CONF); the host's /etc/containers is left alone.
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
[engine]
runtime = "runc"
$cgroups
events_logger = "file"
tmp_dir = "$RUNTIME/libpod"
[network]
network_backend = "netavark"
network_config_dir = "$STATE/networks"
EOF
  cat > "$STATE/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$STATE/storage"
runroot = "$RUNTIME/storage"
EOF
  # Short names (FROM python:3.11-slim) mean Docker Hub, as with Docker.
  cat > "$STATE/registries.conf" <<EOF
unqualified-search-registries = ["docker.io"]
short-name-mode = "permissive"
EOF
  export CONTAINERS_CONF="$STATE/containers.conf" CONTAINERS_STORAGE_CONF="$STATE/storage.conf" \
         CONTAINERS_REGISTRIES_CONF="$STATE/registries.conf" BUILDAH_FORMAT=docker  # docker format keeps HEALTHCHECK
  if command -v podman-compose >/dev/null; then
    COMPOSE=(podman-compose)
  else
    if [ ! -x "$STATE/venv/bin/podman-compose" ]; then
      python3 -m venv --help >/dev/null 2>&1 && python3 -c 'import ensurepip' 2>/dev/null || apt_install python3-venv
      log "installing podman-compose (PyPI) into $STATE/venv"
      python3 -m venv "$STATE/venv"
      "$STATE/venv/bin/pip" install -q --disable-pip-version-check 'podman-compose>=1.1,<2' >"$STATE/pip.log" 2>&1 \
        || { cat "$STATE/pip.log" >&2; return 1; }
    fi
    COMPOSE=("$STATE/venv/bin/podman-compose")
  fi
  ENGINE=podman
}

pull() { timeout 300 "$ENGINE" pull -q "$1" >/dev/null 2>&1; }
local_image() { "$ENGINE" image inspect --format '{{json .Config.Env}}' "$1" 2>/dev/null; }

build_standin() {
  apt_install debootstrap ca-certificates
  local root="$STATE/standin-rootfs"
  rm -rf "$root"
  log "building the $PYTHON_IMAGE stand-in from Debian bookworm (debootstrap; its python3 is 3.11)"
  debootstrap --variant=minbase --include=python3,python3-pip,python3-venv,ca-certificates \
    bookworm "$root" "${KSGATE_DEBIAN_MIRROR:-http://deb.debian.org/debian}" >"$STATE/debootstrap.log" 2>&1 \
    || { tail -20 "$STATE/debootstrap.log" >&2; return 1; }
  ln -sf python3 "$root/usr/bin/python"; ln -sf pip3 "$root/usr/bin/pip"
  rm -f "$root"/usr/lib/python3.*/EXTERNALLY-MANAGED        # pip installs system-wide, as in the real image
  cat /etc/ssl/certs/ca-certificates.crt > "$root/etc/ssl/certs/ca-certificates.crt"  # the host's trust: pip reaches PyPI
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | "$ENGINE" import -q \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' --change 'ENV LANG=C.UTF-8' \
    --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' --change 'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' \
    --change "ENV $STANDIN_MARK" --change 'CMD ["python3"]' - "$PYTHON_IMAGE" >/dev/null
  rm -rf "$root"
}

KAFKA_STANDIN_IMAGE=ksgate-compose-kafka:local  # the name airgap.override.yml runs
build_kafka_standin() {
  # The jars come from scripts/kafka/fetch.sh's cache (Maven Central; it installs Java and Maven when missing):
  # copied into a build context of their own next to the Dockerfile and scripts of scripts/compose/kafka-standin.
  local lib context="$STATE/kafka-standin"
  lib=$(bash scripts/kafka/fetch.sh 2>"$STATE/kafka-fetch.log") \
    || { tail -20 "$STATE/kafka-fetch.log" >&2; log "scripts/kafka/fetch.sh failed"; return 1; }
  KAFKA_STANDIN_VERSION=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' scripts/kafka/pom.xml)
  rm -rf "$context"; mkdir -p "$context"
  cp -a scripts/compose/kafka-standin/. "$context/"
  cp -a "$lib" "$context/lib"
  log "building the Apache Kafka $KAFKA_STANDIN_VERSION stand-in ($KAFKA_STANDIN_IMAGE)"
  "$ENGINE" build -t "$KAFKA_STANDIN_IMAGE" "$context" >"$STATE/kafka-build.log" 2>&1 \
    || { tail -30 "$STATE/kafka-build.log" >&2; return 1; }
  rm -rf "$context"
}

choose_images() {
  # The real images whenever they can be pulled; a stand-in only when they cannot.
  if pull "$PYTHON_IMAGE"; then :
  elif local_image "$PYTHON_IMAGE" | grep -q "$STANDIN_MARK"; then
    MODE="air-gapped: cached $PYTHON_IMAGE stand-in (debootstrap)"
  elif local_image "$PYTHON_IMAGE" >/dev/null; then
    log "cannot pull $PYTHON_IMAGE: using the copy already here"
  else
    build_standin; MODE="air-gapped: $PYTHON_IMAGE stand-in built with debootstrap"
  fi
  if ! pull "$KAFKA_IMAGE" && ! local_image "$KAFKA_IMAGE" >/dev/null; then
    build_kafka_standin
    FILES+=(-f scripts/compose/airgap.override.yml)
    MODE="$MODE; upstream: Apache Kafka $KAFKA_STANDIN_VERSION ($KAFKA_STANDIN_IMAGE, jars from Maven Central)"
    MODE="$MODE instead of $KAFKA_IMAGE"
  fi
  log "images: $MODE"
}

compose() { timeout "${COMPOSE_TIMEOUT:-900}" "${COMPOSE[@]}" -p "$PROJECT" "${FILES[@]}" "$@"; }

container_of() {
  "$ENGINE" ps -aq --filter "label=com.docker.compose.project=$PROJECT" --filter "label=com.docker.compose.service=$1" \
    | head -1
}

wait_healthy() {  # podman 4.3 runs no healthcheck timers without systemd: run the check itself
  local id deadline=$((SECONDS + ${2:-240}))
  while [ "$SECONDS" -lt "$deadline" ]; do
    id=$(container_of "$1")
    if [ -n "$id" ]; then
      if [ "$ENGINE" = podman ]; then
        podman healthcheck run "$id" >/dev/null 2>&1 && return 0
      else
        [ "$(docker inspect --format '{{.State.Health.Status}}' "$id")" = healthy ] && return 0
      fi
    fi
    sleep 2
  done
  log "$1 did not become healthy"; return 1
}

run_once() {  # start a one-shot service and wait for it to exit 0
  local id rc
  compose up -d --no-deps "$1" >>"$STATE/up.log" 2>&1 || { tail -20 "$STATE/up.log" >&2; return 1; }
  id=$(container_of "$1")
  [ -n "$id" ] || { log "$1: no container"; return 1; }
  rc=$(timeout 180 "$ENGINE" wait "$id") || { log "$1 did not finish"; return 1; }
  [ "$rc" = 0 ] || { "$ENGINE" logs "$id" 2>&1 | tail -20 >&2; log "$1 exited with $rc"; return 1; }
}

wait_ready() {  # /readyz on the published metrics port
  local deadline=$((SECONDS + 180))
  while [ "$SECONDS" -lt "$deadline" ]; do
    python3 -c 'import urllib.request as u; u.urlopen("http://127.0.0.1:9404/readyz", timeout=3).close()' \
      2>/dev/null && return 0
    sleep 2
  done
  log "ksgate's /readyz did not answer 200"; return 1
}

teardown() {
  compose --profile test down -v --remove-orphans -t 20 >/dev/null 2>&1 || true
}

finish() {
  local rc=$?
  [ -n "${ENGINE:-}" ] && [ "$rc" != 0 ] && [ "${STACK_UP:-}" = 1 ] \
    && compose logs --tail 40 >&2 2>/dev/null
  [ -n "${ENGINE:-}" ] && teardown
  printf 'compose-test: %s (exit %s) with %s, %s, in %ss\n' "$([ "$rc" = 0 ] && echo PASS || echo FAIL)" "$rc" \
    "${ENGINE:-no engine}" "$MODE" "$((SECONDS - STARTED))"
  exit "$rc"
}
trap finish EXIT

if command -v docker >/dev/null && docker info >/dev/null 2>&1 && docker compose version >/dev/null 2>&1; then
  ENGINE=docker; COMPOSE=(docker compose)
else
  setup_podman
fi
teardown  # leftovers of an interrupted run (before they are taken for someone else's ports)
for port in 9092 9093 9404; do
  if python3 -c "import socket,sys; s=socket.socket(); sys.exit(s.connect_ex(('127.0.0.1',$port))!=0)"; then
    log "127.0.0.1:$port is in use: the stack publishes it"; exit 1
  fi
done
choose_images
# Your own settings on top (e.g. ksgate's upstream: KSGATE_UPSTREAM_BOOTSTRAP_SERVERS), see the README.
[ -n "${KSGATE_COMPOSE_OVERRIDE:-}" ] && FILES+=(-f "$KSGATE_COMPOSE_OVERRIDE")
log "building the images ($ENGINE)"
# init runs the image ksgate builds: building it too would build the same image twice, in parallel.
compose --profile test build ksgate client >"$STATE/build.log" 2>&1 || { tail -40 "$STATE/build.log" >&2; exit 1; }
STACK_UP=1
# One step at a time, each waited for here: without systemd, podman 4.3 runs no health checks, so the
# depends_on conditions cannot order the start.  Its (harmless) errors about healthcheck timers go to up.log.
: >"$STATE/up.log"
log "running init (certificates, users, ACLs, Kafka's keystore and the gateway's password)"
run_once init
log "starting Kafka"
compose up -d --no-deps kafka >>"$STATE/up.log" 2>&1 || { tail -20 "$STATE/up.log" >&2; exit 1; }
wait_healthy kafka
log "registering the gateway's SCRAM credential with Kafka"
run_once kafka-scram
log "starting ksgate"
compose up -d --no-deps ksgate >>"$STATE/up.log" 2>&1 || { tail -20 "$STATE/up.log" >&2; exit 1; }
wait_ready
log "running the client"
set +e
compose --profile test run --rm --no-deps -T client
rc=$?
set -e
exit "$rc"
