#!/usr/bin/env bash
# Installs everything the tests need (venv, extras, system packages) and runs them.
# Usage: bash scripts/test.sh [pytest args…]
set -euo pipefail
cd "$(dirname "$0")/.."

# System packages: an MIT Kerberos KDC and headers (GSSAPI tests), and kcat with Cyrus SASL's
# GSSAPI module: the pip confluent-kafka wheel's librdkafka has no GSSAPI, Debian's does.
# Installed only when missing, and only as root.
need=()
for pkg in krb5-kdc krb5-admin-server krb5-user libkrb5-dev kcat libsasl2-modules-gssapi-mit haproxy; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ "${#need[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    echo "scripts/test.sh: missing system packages ${need[*]} (run as root to install them)" >&2
  fi
fi

# The reference broker (Apache Kafka from Maven Central, scripts/kafka/pom.xml): the `kafka` tests find its jars here.
REFERENCE_KAFKA_LIB=$(bash scripts/kafka/fetch.sh)
export REFERENCE_KAFKA_LIB

python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip >/dev/null
.venv/bin/pip install -q -e '.[test]'

.venv/bin/ruff check .
.venv/bin/mypy
# pytest exits 5 when it collected nothing; set -e turns that into a failure too.
# One worker per core (pytest-xdist): many tests wait on brokers and JVMs, so two workers overlap that waiting
# on CI's two cores; worksteal hands a busy worker's queued tests to an idle one, so the minute-long tests do
# not leave a core idle at the end. KSGATE_TEST_WORKERS=0 runs it in one process (a later `-n` also wins).
.venv/bin/pytest -q -p no:cacheprovider -n "${KSGATE_TEST_WORKERS:-auto}" --dist worksteal "$@"
