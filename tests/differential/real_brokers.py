"""Real RabbitMQ clusters for the differential tests, one starter per release series.

3.10 is Debian 12's rabbitmq-server package (3.10.8), started as the calling user
by `bench.rabbitmq_local`. 4.0 is Debian 13's rabbitmq-server package (4.0.5) run
by hand in a Debian 13 chroot by the repository's `scripts/rabbitmq4/` (which build
the chroot the first time, as root), started by `bench.rabbitmq4` as the side-by-side
bench and the client suites start theirs. A series is one more entry in `STARTERS`:
a context manager that yields the AMQP ports of a running three-node cluster and a
way to kill a node, and stops everything however the tests end.
"""

from __future__ import annotations

import os
import signal
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from bench.rabbitmq4 import rabbitmq4_cluster
from bench.rabbitmq_local import rabbitmq_cluster
from tests.differential.probes import Target


@contextmanager
def rabbitmq4(nodes: int = 3) -> Iterator[Target]:
    """A fresh `nodes`-node RabbitMQ 4.0.5 cluster in the Debian 13 chroot
    (`bench.rabbitmq4`)."""
    with rabbitmq4_cluster(nodes) as cluster:
        yield Target(f"RabbitMQ {cluster.version()}", cluster.amqp_ports, cluster.kill)


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
