#!/usr/bin/env bash
# Create (or reuse) the project's virtual environment and install warren with
# its test extras into it. Sourced by scripts/test.sh and scripts/demo.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${WARREN_VENV:-$root/.venv}"
python="${PYTHON:-python3}"
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
