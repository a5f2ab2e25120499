#!/usr/bin/env bash
# Start a fresh RabbitMQ 4.0 cluster in the chroot setup.sh built: one node per
# port of WARREN_RMQ4_AMQP_PORTS, on 127.0.0.1, guest/guest, every stable
# feature flag enabled, no plugins. Wipes this cluster's data first. Prints
# `ready NODE PORT` per node once the cluster has formed.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$here/common.sh"
count="${#rmq4_ports[@]}"
[ -x "$WARREN_RMQ4_ROOT$rmq4_server" ] || { echo "rabbitmq4: no chroot, run setup.sh first" >&2; exit 69; }

rmq4_mount
mkdir -p "$rmq4_host_data"
for n in $(seq 1 "$count"); do
  pidfile="$rmq4_host_data/node$n/beam.pid"
  if [ -s "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    echo "rabbitmq4: $(rmq4_node "$n") still runs from $WARREN_RMQ4_DATA; run stop.sh first" >&2
    exit 75
  fi
done
rm -rf "${rmq4_host_data:?}"/*
mkdir -p "$rmq4_host_data/home"
(umask 077 && printf '%s' "$WARREN_RMQ4_COOKIE" > "$rmq4_host_data/home/.erlang.cookie")
: > "$rmq4_host_data/rabbitmq-env.conf"

for n in $(seq 1 "$count"); do
  dir="$rmq4_host_data/node$n"
  mkdir -p "$dir/log" "$dir/mnesia"
  printf '%s\n' "listeners.tcp.1 = 127.0.0.1:$(rmq4_port "$n")" "log.console = false" \
    "disk_free_limit.absolute = 100MB" "vm_memory_high_watermark.relative = 0.4" \
    > "$dir/rabbitmq.conf"
  echo '[].' > "$dir/enabled_plugins"
  printf '%s\n' "$WARREN_RMQ4_ADVANCED_CONFIG" > "$dir/advanced.config"
  # A session of its own (stop.sh ends what is left of it by its group), its
  # output in a file and its input from /dev/null: the node outlives this script
  # and must not hold its caller's terminal or pipes open.
  setsid bash -c '. "$1/common.sh"; rmq4_run "$2" "$rmq4_server"' _ "$here" "$n" \
    > "$dir/console.log" 2>&1 < /dev/null &
  echo $! > "$dir/launcher.pid"
done

# A node that cannot boot (a port taken, say) exits: stop waiting for it then.
for n in $(seq 1 "$count"); do
  dir="$rmq4_host_data/node$n"
  for _ in $(seq 1 360); do
    rmq4_ctl rabbitmqctl "$n" await_startup --timeout 1 >/dev/null 2>&1 && continue 2
    if ! kill -0 "$(cat "$dir/launcher.pid")" 2>/dev/null; then
      echo "rabbitmq4: $(rmq4_node "$n") did not start:" >&2
      tail -n 5 "$dir/console.log" >&2
      exit 70
    fi
    sleep 0.5
  done
  echo "rabbitmq4: $(rmq4_node "$n") not up after three minutes" >&2
  exit 70
done
for n in $(seq 2 "$count"); do
  rmq4_ctl rabbitmqctl "$n" stop_app >/dev/null
  rmq4_ctl rabbitmqctl "$n" join_cluster "$(rmq4_node 1)" >/dev/null
  rmq4_ctl rabbitmqctl "$n" start_app >/dev/null
done
rmq4_ctl rabbitmqctl 1 enable_feature_flag all >/dev/null
for n in $(seq 1 "$count"); do
  echo "ready $(rmq4_node "$n") $(rmq4_port "$n")"
done
