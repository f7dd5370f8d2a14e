#!/usr/bin/env bash
# Installs ksgate in a local venv and runs `ksgate quickstart` (an embedded Tansu broker
# with the gateway in front of it). Usage: bash scripts/quickstart.sh [--port 9092] [--dir ./quickstart]
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip >/dev/null
.venv/bin/pip install -q -e '.[quickstart]'
exec .venv/bin/ksgate quickstart "$@"
