#!/usr/bin/env bash
# Set up a fresh machine and run warren's whole test suite (lint, type check, pytest).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/setup.sh"
cd "$root"
ruff check .
mypy  # the packages and settings are in pyproject.toml's [tool.mypy]
python -m pytest -q "$@"
