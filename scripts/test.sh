#!/usr/bin/env bash
# Set up a fresh machine and run warren's whole test suite (lint + pytest).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/setup.sh"
cd "$root"
ruff check .
python -m pytest -q "$@"
