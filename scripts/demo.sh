#!/usr/bin/env bash
# Set up a fresh machine and run warren's main job: three node processes on
# 127.0.0.1 that exchange messages, monitor each other and survive a SIGKILL.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/setup.sh"
cd "$root"
exec warren demo "$@"
