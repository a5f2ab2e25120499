#!/usr/bin/env bash
# Build the Debian 13 chroot with RabbitMQ 4.0 in it, once: a second run finds
# every step done and returns at once. Needs root and network access to the
# Debian mirror this machine's apt already uses (read from its apt
# configuration, never written down here). Installs debootstrap with apt-get
# when it is missing. Starts nothing: the package's service is forbidden to
# start inside the chroot, the nodes are started by start.sh.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$here/common.sh"

if [ -x "$WARREN_RMQ4_ROOT$rmq4_server" ] && [ -f "$WARREN_RMQ4_ROOT/.warren-ready" ]; then
  exit 0
fi
[ "$(id -u)" = 0 ] || { echo "rabbitmq4 setup: needs root (debootstrap, chroot, mount)" >&2; exit 77; }

if ! command -v debootstrap >/dev/null 2>&1; then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap
fi

# The mirror serving the host's own release, as apt knows it.
codename="$(. /etc/os-release && echo "$VERSION_CODENAME")"
mirror="$(apt-get indextargets --format '$(REPO_URI) $(CODENAME)' \
          | awk -v c="$codename" '$2 == c { print $1; exit }')"
[ -n "$mirror" ] || { echo "rabbitmq4 setup: no Debian mirror for $codename in the apt configuration" >&2; exit 69; }

if [ ! -f "$WARREN_RMQ4_ROOT/.debootstrap-done" ]; then
  rm -rf "$WARREN_RMQ4_ROOT"
  debootstrap --variant=minbase "$WARREN_RMQ4_SUITE" "$WARREN_RMQ4_ROOT" "$mirror"
  touch "$WARREN_RMQ4_ROOT/.debootstrap-done"
fi
echo "deb $mirror $WARREN_RMQ4_SUITE main" > "$WARREN_RMQ4_ROOT/etc/apt/sources.list"
printf '#!/bin/sh\nexit 101\n' > "$WARREN_RMQ4_ROOT/usr/sbin/policy-rc.d"
chmod 755 "$WARREN_RMQ4_ROOT/usr/sbin/policy-rc.d"
cp -f /etc/resolv.conf "$WARREN_RMQ4_ROOT/etc/resolv.conf" 2>/dev/null || true

rmq4_mount
trap rmq4_umount EXIT
chroot "$WARREN_RMQ4_ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
  DEBIAN_FRONTEND=noninteractive sh -c \
  'apt-get update -q && apt-get install -y -q --no-install-recommends rabbitmq-server'
chroot "$WARREN_RMQ4_ROOT" dpkg-query -W -f='${Package} ${Version}\n' rabbitmq-server
touch "$WARREN_RMQ4_ROOT/.warren-ready"
