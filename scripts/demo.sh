#!/usr/bin/env bash
# Set up a fresh machine and run warren's main job: the leader-failover scenario.
# Three broker nodes on 127.0.0.1, pika publishers and consumers, the queue
# leader's node SIGKILLed and restarted, then the PySpark checks of the recorded
# history: a verdict table on the terminal and report.html in the run directory.
# Extra arguments go to `warren scenario run` (e.g. another scenario name first).
# The run directory is made under runs/ of the checkout, or under $WARREN_RUNS.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/setup.sh"
cd "$root"
scenario="${1:-leader-failover}"
shift || true
run_dir="${WARREN_RUNS:-$root/runs}/$scenario-$(date +%Y%m%dT%H%M%S)"
exec warren scenario run "$scenario" --run-dir "$run_dir" "$@"
