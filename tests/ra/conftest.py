"""The node fixtures the Ra process and log tests share, so that a test names the
nodes it needs (`cluster`, `four`, `node`) without importing them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from actors import Node
from tests.ra.ra_proc_support import Cluster, make_cluster
from transports.faults import FaultRules
from transports.memory import MemoryNetwork
from transports.tick import TickConfig


def _stopped_after(c: Cluster) -> Iterator[Cluster]:
    try:
        yield c
    finally:
        for n in c.nodes:
            n.stop()


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """Three nodes on one in-memory network, each running the default Ra system."""
    yield from _stopped_after(make_cluster())


@pytest.fixture
def four() -> Iterator[Cluster]:
    """Three members on ra1..ra3, and a fourth node for a joining member."""
    yield from _stopped_after(make_cluster(4))


@pytest.fixture
def node() -> Iterator[Node]:
    """One node on an in-memory network, for the log processes under test."""
    network = MemoryNetwork(TickConfig(net_ticktime=0.4, net_tickintensity=4),
                            FaultRules(seed=1))
    n = Node("ra_disk@127.0.0.1:1", transport=network.transport()).start()
    yield n
    n.stop()
