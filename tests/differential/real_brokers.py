"""Real RabbitMQ clusters for the differential tests, one starter per release series.

3.10 is Debian 12's rabbitmq-server package (3.10.8), started as the calling user
by `bench.rabbitmq_local`. 4.0 is Debian 13's rabbitmq-server package (4.0.5) run
by hand in a Debian 13 chroot by the repository's `scripts/rabbitmq4/` (which build
the chroot the first time, as root). A series is one more entry in `STARTERS`: a
context manager that yields the AMQP ports of a running three-node cluster and a way
to kill a node, and stops everything however the tests end.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from bench.rabbitmq_local import rabbitmq_cluster
from tests.differential.probes import Target
from transports.zmq_node import port_free

ROOT = Path(__file__).resolve().parents[2]
RABBITMQ4 = ROOT / "scripts" / "rabbitmq4"


def _free_block(size: int) -> int:
    """The first port of `size` consecutive free loopback ports."""
    rng = random.Random(os.getpid())
    while True:
        base = rng.randrange(20_000, 60_000 - size)
        if all(port_free(base + i) for i in range(size)):
            return base


@contextmanager
def rabbitmq4(nodes: int = 3) -> Iterator[Target]:
    """A fresh `nodes`-node RabbitMQ 4.0.5 cluster in the Debian 13 chroot."""
    subprocess.run(["bash", str(RABBITMQ4 / "setup.sh")], check=True)
    base = _free_block(64)  # AMQP, epmd, distribution and CLI ports, all unused
    env = dict(os.environ,
               WARREN_RMQ4_DATA=f"/srv/differential-{os.getpid()}",
               WARREN_RMQ4_AMQP_PORTS=",".join(str(base + 1 + i) for i in range(nodes)),
               WARREN_RMQ4_EPMD_PORT=str(base),
               # node N's distribution port is DIST_PORT0+N, the CLI's +20 to +60
               WARREN_RMQ4_DIST_PORT0=str(base + nodes))
    root = Path(env.get("WARREN_RMQ4_ROOT", "/var/tmp/warren-rabbitmq4"))
    data = root / env["WARREN_RMQ4_DATA"].lstrip("/")

    def kill(index: int) -> None:
        pid = int((data / f"node{index + 1}" / "beam.pid").read_text())
        os.kill(pid, signal.SIGKILL)

    try:
        subprocess.run(["bash", str(RABBITMQ4 / "start.sh")], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        ports = [int(p) for p in env["WARREN_RMQ4_AMQP_PORTS"].split(",")]
        yield Target("RabbitMQ 4.0.5", ports, kill)
    finally:
        subprocess.run(["bash", str(RABBITMQ4 / "stop.sh")], env=env, check=False,
                       stdout=subprocess.DEVNULL)


@contextmanager
def rabbitmq310(nodes: int = 3) -> Iterator[Target]:
    """A fresh `nodes`-node RabbitMQ 3.10.8 cluster: Debian 12's package, run by
    `bench.rabbitmq_local` as the calling user in a temporary directory."""
    with tempfile.TemporaryDirectory(prefix="differential-310-") as root, \
            rabbitmq_cluster(Path(root), nodes) as cluster:
        def kill(index: int) -> None:
            os.kill(cluster.vm_pids()[index], signal.SIGKILL)

        yield Target(f"RabbitMQ {cluster.version()}", [n.amqp_port for n in cluster.nodes],
                     kill)


#: the real broker of each release series the differential tests compare warren with
STARTERS: dict[str, Callable[[], AbstractContextManager[Target]]] = {
    "3.10": rabbitmq310,
    "4.0": rabbitmq4,
}
