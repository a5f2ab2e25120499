"""A throwaway RabbitMQ 4.0.5 cluster on loopback, from the Debian 13 chroot.

Why: warren models RabbitMQ 4.x as well as 3.10, and a 4.x behaviour or figure is
best put beside a real 4.x broker. Debian 13's ``rabbitmq-server`` package (4.0.5) is
run by hand in a Debian 13 chroot by the repository's ``scripts/rabbitmq4/``
(``setup.sh`` builds the chroot the first time, as root and with network access;
``start.sh`` starts a fresh cluster, ``stop.sh`` stops it and wipes its data). The
differential tests, the side-by-side bench and the client suites all start their
4.0.5 brokers through `rabbitmq4_cluster`.

The nodes share the caller's network namespace (a chroot is no network boundary), so
they listen on its 127.0.0.1. Each cluster gets a data directory of its own in the
chroot and a block of free loopback ports (AMQP, a private epmd, Erlang distribution,
the CLI tools), so several clusters run at once.
"""

from __future__ import annotations

import os
import random
import secrets
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.rabbitmq_local import advanced_config
from transports.zmq_node import port_free

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts" / "rabbitmq4"
HOST = "127.0.0.1"
#: where setup.sh builds the chroot unless ``WARREN_RMQ4_ROOT`` says otherwise
DEFAULT_ROOT = "/var/tmp/warren-rabbitmq4"
#: AMQP ports + epmd + distribution + the CLI tools' 40 ports fit in this many
PORT_BLOCK = 64


class RabbitMQ4Unavailable(RuntimeError):
    """The chroot cannot be built or entered here."""


def chroot_root() -> Path:
    return Path(os.environ.get("WARREN_RMQ4_ROOT", DEFAULT_ROOT))


def available() -> bool:
    """Whether a 4.0.5 cluster can start: the chroot and its mounts need root; a
    chroot not built yet is built by `setup` (network access then)."""
    return os.geteuid() == 0 and (SCRIPTS / "setup.sh").exists()


def setup() -> None:
    """Build the chroot unless it is there (`setup.sh` returns at once then)."""
    if not available():
        raise RabbitMQ4Unavailable("RabbitMQ 4.0.5 runs in a chroot, which needs root")
    done = subprocess.run(["bash", str(SCRIPTS / "setup.sh")], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise RabbitMQ4Unavailable(f"scripts/rabbitmq4/setup.sh exited {done.returncode}: "
                                   f"{(done.stderr or done.stdout).strip()[-800:]}")


def free_block(size: int) -> int:
    """The first port of `size` consecutive free loopback ports."""
    rng = random.Random(os.getpid() ^ secrets.randbits(32))
    while True:
        base = rng.randrange(20_000, 60_000 - size)
        if all(port_free(base + i) for i in range(size)):
            return base


@dataclass
class RabbitMQ4Cluster:
    """A running cluster: its AMQP ports, and the `env` that `scripts/rabbitmq4/`
    need to reach it."""

    env: dict[str, str]
    amqp_ports: list[int]

    @property
    def data(self) -> Path:
        """The cluster's data directory, seen from outside the chroot."""
        return Path(self.env["WARREN_RMQ4_ROOT"]) / self.env["WARREN_RMQ4_DATA"].lstrip("/")

    @property
    def urls(self) -> list[str]:
        return [f"amqp://guest:guest@{HOST}:{port}/%2F" for port in self.amqp_ports]

    def vm_pid(self, index: int) -> int:
        """Node `index`'s (0-based) Erlang VM process; 0 if it is not running."""
        try:
            return int((self.data / f"node{index + 1}" / "beam.pid").read_text())
        except (OSError, ValueError):
            return 0

    def vm_pids(self) -> list[int]:
        return [self.vm_pid(i) for i in range(len(self.amqp_ports))]

    def kill(self, index: int) -> None:
        """SIGKILL node `index`'s VM, as a crash would end it."""
        os.kill(self.vm_pid(index), signal.SIGKILL)

    def ctl(self, index: int, *args: str, tool: str = "rabbitmqctl",
            timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
        """One of RabbitMQ's CLI tools against node `index` (0-based)."""
        return subprocess.run(["bash", str(SCRIPTS / "ctl.sh"), tool, str(index + 1), *args],
                              env=self.env, capture_output=True, text=True,
                              timeout=timeout_s, check=False)

    def version(self) -> str:
        """The server's version, as the first node reports it."""
        done = self.ctl(0, "eval", "rabbit_misc:version().")
        return done.stdout.strip().strip('"') or "?"


def start(nodes: int = 3, amqp_ports: list[int] | None = None,
          ra: dict[str, Any] | None = None) -> RabbitMQ4Cluster:
    """A fresh `nodes`-node RabbitMQ 4.0.5 cluster (on `amqp_ports` if given, free ports
    otherwise; `ra` as Ra's application env). Whatever a failed start left is stopped
    before the error is raised; a started cluster is the caller's to `stop`."""
    setup()
    base = free_block(PORT_BLOCK)  # epmd, AMQP, distribution and CLI ports, all unused
    ports = amqp_ports or [base + 1 + i for i in range(nodes)]
    env = dict(os.environ,
               WARREN_RMQ4_ROOT=str(chroot_root()),
               WARREN_RMQ4_DATA=f"/srv/warren-{os.getpid()}-{secrets.token_hex(3)}",
               WARREN_RMQ4_AMQP_PORTS=",".join(str(p) for p in ports),
               WARREN_RMQ4_EPMD_PORT=str(base),
               # node N's distribution port is DIST_PORT0+N, the CLI's +20 to +60
               WARREN_RMQ4_DIST_PORT0=str(base + len(ports)),
               WARREN_RMQ4_ADVANCED_CONFIG=advanced_config(ra or {}))
    cluster = RabbitMQ4Cluster(env, ports)
    try:
        done = subprocess.run(["bash", str(SCRIPTS / "start.sh")], env=env,
                              capture_output=True, text=True, check=False)
    except BaseException:
        stop(cluster)
        raise
    if done.returncode != 0:
        stop(cluster)
        raise RuntimeError(f"RabbitMQ 4.0.5 did not start (start.sh exited "
                           f"{done.returncode}): {done.stderr.strip()[-1500:]}")
    return cluster


def stop(cluster: RabbitMQ4Cluster) -> None:
    """Stop every node and the private epmd, wipe the data, unmount when no other
    cluster runs in the chroot; safe after a start that failed half-way."""
    subprocess.run(["bash", str(SCRIPTS / "stop.sh")], env=cluster.env, check=False,
                   capture_output=True)


@contextmanager
def rabbitmq4_cluster(nodes: int = 3, amqp_ports: list[int] | None = None,
                      ra: dict[str, Any] | None = None) -> Iterator[RabbitMQ4Cluster]:
    """`start`, and `stop` however the caller ends."""
    cluster = start(nodes, amqp_ports, ra)
    try:
        yield cluster
    finally:
        stop(cluster)
