#!/usr/bin/env bash
# One of RabbitMQ's CLI tools against node N (1-based) of the running cluster:
#   scripts/rabbitmq4/ctl.sh rabbitmq-queues 1 quorum_status q1
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$here/common.sh"
rmq4_ctl "$@"
