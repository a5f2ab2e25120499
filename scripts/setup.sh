#!/usr/bin/env bash
# Create (or reuse) the project's virtual environment and install warren with
# its test extras into it. Sourced by scripts/test.sh and scripts/demo.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${WARREN_VENV:-$root/.venv}"
python="${PYTHON:-python3}"
# The analysis pipeline runs on Spark, which needs a Java runtime (17 or 21).
if ! command -v java >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -q && apt-get install -y -q default-jre-headless
  else
    echo "warren: java not found; Spark needs Java 17 or 21 (e.g. apt-get install default-jre-headless)" >&2
    exit 1
  fi
fi
# the management tests drive a node with RabbitMQ's own rabbitmqadmin and open its
# live page in a headless chromium; docs/management.md's example reads its metrics
# with curl
missing=""
command -v rabbitmqadmin >/dev/null 2>&1 || missing="$missing rabbitmq-server"
command -v curl >/dev/null 2>&1 || missing="$missing curl"
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
command -v chromedriver >/dev/null 2>&1 || missing="$missing chromium-driver"
if [ -n "$missing" ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing
  else
    echo "warren: missing for the management tests and examples:$missing (apt-get install$missing)" >&2
  fi
fi
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
stamp="$venv/.warren-installed"
if [ ! -f "$stamp" ] || [ "$root/pyproject.toml" -nt "$stamp" ]; then
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  "$venv/bin/python" -m pip install --quiet -e "$root[test]"
  touch "$stamp"
fi
export PATH="$venv/bin:$PATH"
