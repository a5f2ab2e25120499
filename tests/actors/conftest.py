"""Nodes on the in-memory transport, with short net ticks.

Ticks of 0.4 s (interval 0.1 s) keep failure-detection tests fast; every node
is stopped at teardown so no greenlet outlives its test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from actors import Node
from transports.faults import FaultRules
from transports.memory import MemoryNetwork
from transports.tick import TickConfig

TICK = TickConfig(net_ticktime=0.4, net_tickintensity=4)


@pytest.fixture
def network() -> MemoryNetwork:
    return MemoryNetwork(TICK, FaultRules(seed=1))


@pytest.fixture
def make_node(network: MemoryNetwork) -> Iterator[Callable[[str], Node]]:
    nodes: list[Node] = []

    def make(name: str) -> Node:
        node = Node(name, transport=network.transport()).start()
        nodes.append(node)
        return node

    yield make
    for node in nodes:
        node.stop()


@pytest.fixture
def a(make_node: Callable[[str], Node]) -> Node:
    return make_node("a@127.0.0.1:1")


@pytest.fixture
def b(make_node: Callable[[str], Node]) -> Node:
    return make_node("b@127.0.0.1:2")
