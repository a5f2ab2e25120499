#!/usr/bin/env bash
# Set up a fresh machine and run warren's whole test suite (lint, type check, pytest).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/setup.sh"
# the differential tests compare warren with a real RabbitMQ 4.0 cluster: Debian 13's
# package in a chroot, built once (debootstrap from the mirror this machine's apt uses)
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  bash "$root/scripts/rabbitmq4/setup.sh"
else
  echo "warren: the differential tests need root to build and enter the RabbitMQ 4.0" \
       "chroot (scripts/rabbitmq4/setup.sh)" >&2
fi
cd "$root"
# the tests start warren nodes, CLI calls and examples as new interpreters, hundreds
# of them: with PYTHONDONTWRITEBYTECODE set (as in many containers) every one would
# compile the checkout's modules again, so they are compiled once here
python -m compileall -q -j 0 -x '/(\.venv|\.git|runs)/' .
ruff check .
mypy  # the packages and settings are in pyproject.toml's [tool.mypy]
python -m pytest -q "$@"
