# Shared by the scripts in this folder: a real RabbitMQ 4.0 (Debian 13's
# rabbitmq-server package) run by hand inside a Debian 13 chroot, for the
# differential tests. Sourced, never run.
#
# Every setting below can be overridden from the environment. Two clusters can
# run from the same chroot at once when they use different WARREN_RMQ4_DATA,
# ports and epmd port (the tests pick free ones).
: "${WARREN_RMQ4_ROOT:=/var/tmp/warren-rabbitmq4}"   # the chroot (seen from the host)
: "${WARREN_RMQ4_SUITE:=trixie}"                     # Debian release debootstrapped into it
: "${WARREN_RMQ4_DATA:=/srv/rmq4}"                   # node data, a path INSIDE the chroot
: "${WARREN_RMQ4_AMQP_PORTS:=5781,5782,5783}"        # one AMQP port per node, comma-separated
: "${WARREN_RMQ4_DIST_PORT0:=25880}"                 # node N's Erlang distribution: DIST_PORT0+N
: "${WARREN_RMQ4_EPMD_PORT:=4398}"                   # a private epmd, never the system's 4369
: "${WARREN_RMQ4_COOKIE:=warren-differential-rabbitmq4}"
: "${WARREN_RMQ4_ADVANCED_CONFIG:=[].}"              # every node's advanced.config (Erlang terms)

rmq4_host_data="$WARREN_RMQ4_ROOT$WARREN_RMQ4_DATA"
IFS=, read -r -a rmq4_ports <<< "$WARREN_RMQ4_AMQP_PORTS"
rmq4_letters=(a b c d e f g h i)
rmq4_server="/usr/lib/rabbitmq/bin/rabbitmq-server"

# node N (1-based): rabbit-a@localhost ...
rmq4_node() { echo "rabbit-${rmq4_letters[$(($1 - 1))]}@localhost"; }
rmq4_port() { echo "${rmq4_ports[$(($1 - 1))]}"; }

# The kernel file systems RabbitMQ's Erlang needs inside the chroot (plain binds).
rmq4_mount() {
  local fs
  for fs in proc sys dev; do
    mkdir -p "$WARREN_RMQ4_ROOT/$fs"
    mountpoint -q "$WARREN_RMQ4_ROOT/$fs" && continue
    case "$fs" in
      proc) mount -t proc proc "$WARREN_RMQ4_ROOT/proc" ;;
      sys) mount -t sysfs sysfs "$WARREN_RMQ4_ROOT/sys" ;;
      dev) mount --bind /dev "$WARREN_RMQ4_ROOT/dev" ;;
    esac
  done
}

# Whether any node of any data directory of this chroot is still running.
rmq4_any_alive() {
  local pidfile
  for pidfile in "$WARREN_RMQ4_ROOT"/srv/*/node*/beam.pid "$rmq4_host_data"/node*/beam.pid; do
    [ -s "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null && return 0
  done
  return 1
}

# Unmount again, unless nodes (of this or another cluster) still run in the chroot.
rmq4_umount() {
  local fs
  rmq4_any_alive && return 0
  for fs in dev sys proc; do
    mountpoint -q "$WARREN_RMQ4_ROOT/$fs" && umount "$WARREN_RMQ4_ROOT/$fs"
  done
  return 0
}

# `env -i` words for node N's RabbitMQ scripts and CLI tools inside the chroot.
rmq4_env() {
  local n="$1" dir="$WARREN_RMQ4_DATA/node$1"
  local loopback="-kernel inet_dist_use_interface {127,0,0,1}"
  printf '%s\n' "PATH=/usr/sbin:/usr/bin:/sbin:/bin" "HOME=$WARREN_RMQ4_DATA/home" \
    "LANG=C.UTF-8" "LC_ALL=C.UTF-8" \
    "ERL_EPMD_PORT=$WARREN_RMQ4_EPMD_PORT" "ERL_EPMD_ADDRESS=127.0.0.1" \
    "RABBITMQ_CONF_ENV_FILE=$WARREN_RMQ4_DATA/rabbitmq-env.conf" \
    "RABBITMQ_NODENAME=$(rmq4_node "$n")" "RABBITMQ_NODE_IP_ADDRESS=127.0.0.1" \
    "RABBITMQ_NODE_PORT=$(rmq4_port "$n")" \
    "RABBITMQ_DIST_PORT=$((WARREN_RMQ4_DIST_PORT0 + n))" \
    "RABBITMQ_CTL_DIST_PORT_MIN=$((WARREN_RMQ4_DIST_PORT0 + 20))" \
    "RABBITMQ_CTL_DIST_PORT_MAX=$((WARREN_RMQ4_DIST_PORT0 + 60))" \
    "RABBITMQ_MNESIA_BASE=$dir/mnesia" "RABBITMQ_LOG_BASE=$dir/log" \
    "RABBITMQ_PID_FILE=$dir/beam.pid" "RABBITMQ_CONFIG_FILE=$dir/rabbitmq.conf" \
    "RABBITMQ_ADVANCED_CONFIG_FILE=$dir/advanced.config" \
    "RABBITMQ_ENABLED_PLUGINS_FILE=$dir/enabled_plugins" \
    "RABBITMQ_PLUGINS_EXPAND_DIR=$dir/plugins-expand" \
    "RABBITMQ_FEATURE_FLAGS_FILE=$dir/feature_flags" \
    "RABBITMQ_CTL_ERL_ARGS=$loopback" "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=$loopback"
}

# Run a command inside the chroot in node N's environment.
rmq4_run() {
  local n="$1" words
  shift
  mapfile -t words < <(rmq4_env "$n")
  chroot "$WARREN_RMQ4_ROOT" /usr/bin/env -i "${words[@]}" "$@"
}

# One of RabbitMQ's CLI tools (rabbitmqctl, rabbitmq-queues, ...) against node N.
rmq4_ctl() {
  local tool="$1" n="$2"
  shift 2
  rmq4_run "$n" "/usr/lib/rabbitmq/bin/$tool" -n "$(rmq4_node "$n")" "$@"
}
