#!/usr/bin/env bash
# Stop the cluster start.sh started (each node by its pid file, never by name),
# its private epmd, unmount the chroot's kernel file systems when no other
# cluster runs in it, and delete the cluster's data. Safe to run any number of
# times, also when start.sh failed half-way.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$here/common.sh"

for dir in "$rmq4_host_data"/node*; do
  [ -d "$dir" ] || continue
  n="${dir##*/node}"
  pidfile="$dir/beam.pid"
  if [ -s "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    pid="$(cat "$pidfile")"
    timeout 60 bash -c '. "$1/common.sh"; rmq4_ctl rabbitmqctl "$2" stop >/dev/null 2>&1' \
      _ "$here" "$n"
    for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  fi
  # start.sh ran each node in a session of its own: whatever is left of it
  # (a node still booting, its wrapper scripts) goes with that session's group.
  if [ -s "$dir/launcher.pid" ]; then
    launcher="$(cat "$dir/launcher.pid")"
    kill -0 "$launcher" 2>/dev/null && kill -KILL -- "-$launcher" 2>/dev/null
  fi
done
# The private epmd has no pid file: ask it to leave.
if [ -x "$WARREN_RMQ4_ROOT/usr/bin/epmd" ] && mountpoint -q "$WARREN_RMQ4_ROOT/proc"; then
  chroot "$WARREN_RMQ4_ROOT" /usr/bin/epmd -port "$WARREN_RMQ4_EPMD_PORT" -kill >/dev/null 2>&1
fi
rm -rf "$rmq4_host_data"
rmq4_umount
exit 0
