"""The networks the transport conformance suite runs on, one class per transport.

`test_conformance` states what every transport owes the runtime; it reaches a
transport only through a `Net`: start a node by short name, crash one, share one
`FaultRules` and one `TickConfig`. Every node of a `Net` lives in the test's own
OS process (the ZeroMQ ones still talk over real TCP on 127.0.0.1), so a test can
spawn on any node directly and a crash is a call, not a signal.

To put a new transport through the suite, write a `Net` for it here and add it
to `NETS`: every conformance test then runs on it too.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import Protocol

from zmq.utils import garbage as zmq_garbage

from actors import Node
from tests.waiting import hub_wait_until
from transports.faults import FaultRules
from transports.memory import MemoryNetwork
from transports.tick import TickConfig
from transports.zmq import ZmqTransport
from transports.zmq_node import free_port

__all__ = ["NETS", "TICK", "MemoryNet", "Net", "ZmqNet", "os_threads"]

#: Short enough for a tick test to take about a second, long enough that a busy
#: shared machine never misses four intervals in a row.
TICK = TickConfig(net_ticktime=1.0, net_tickintensity=4)


class Net(Protocol):
    """Nodes on one transport, sharing one `FaultRules` and one `TickConfig`."""

    tick: TickConfig
    faults: FaultRules

    def node(self, short: str) -> Node:
        """Start node `short` (``a``, ``b``...); a crashed one restarts at its old address."""
        ...

    def crash(self, node: Node) -> None:
        """End `node` as a killed OS process ends: its peers hear only that the link broke."""
        ...

    def close(self) -> None:
        """Stop every node still running."""
        ...


class _Nodes:
    """Bookkeeping shared by the nets: full names by short name, running nodes."""

    def __init__(self, address: Callable[[], str]) -> None:
        self._address = address
        self.names: dict[str, str] = {}
        self.running: list[Node] = []

    def name(self, short: str) -> str:
        if short not in self.names:
            self.names[short] = f"{short}@{self._address()}"
        return self.names[short]

    def crash(self, node: Node) -> None:
        # the links go first, so no exit signal of the dying processes crosses them
        assert node.transport is not None
        node.transport.close()
        node.stop()
        self.running.remove(node)

    def close(self) -> None:
        for node in self.running:
            node.stop()
        self.running.clear()


class MemoryNet:
    """`transports.memory`: every node on one in-process `MemoryNetwork`."""

    def __init__(self) -> None:
        self.tick = TICK
        self.faults = FaultRules(seed=1)
        self._network = MemoryNetwork(self.tick, self.faults)
        self._nodes = _Nodes(lambda: f"127.0.0.1:{free_port()}")

    def node(self, short: str) -> Node:
        node = Node(self._nodes.name(short), transport=self._network.transport()).start()
        self._nodes.running.append(node)
        return node

    def crash(self, node: Node) -> None:
        self._nodes.crash(node)

    def close(self) -> None:
        self._nodes.close()


class ZmqNet:
    """`transports.zmq`: each node binds its own 127.0.0.1 port; `io` as `ZmqTransport`'s."""

    COOKIE = "warren-conformance"

    def __init__(self, io: str) -> None:
        self.io = io
        self.tick = TICK
        self.faults = FaultRules(seed=1)
        self._nodes = _Nodes(lambda: f"127.0.0.1:{free_port()}")

    def node(self, short: str) -> Node:
        name = self._nodes.name(short)
        _wait_port_free(name)  # a restart binds the port its crashed predecessor held
        transport = ZmqTransport(cookie=self.COOKIE, tick=self.tick, faults=self.faults,
                                 net_setuptime=2.0, io=self.io)
        node = Node(name, transport=transport).start()
        self._nodes.running.append(node)
        return node

    def crash(self, node: Node) -> None:
        self._nodes.crash(node)

    def close(self) -> None:
        self._nodes.close()


def _wait_port_free(name: str) -> None:
    host, _, port = name.partition("@")[2].rpartition(":")

    def bindable() -> bool:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, int(port)))
            except OSError:
                return False
            return True

    hub_wait_until(bindable, f"port of {name} released by its previous node")


def os_threads() -> int:
    """Native threads of this process, whoever started them (libzmq's included).

    pyzmq's collector of zero-copy frames (a thread and a context of its own)
    starts at the first large frame and lives as long as the process; it is
    started here, so that it is counted before a test as well as after.
    """
    if not zmq_garbage.gc.is_alive():
        zmq_garbage.gc.start()
    return len(os.listdir("/proc/self/task"))


#: pytest id -> a factory of a fresh `Net`; the conformance suite runs once per entry.
NETS: dict[str, Callable[[], Net]] = {
    "memory": MemoryNet,
    "zmq-io-thread": lambda: ZmqNet("thread"),
    "zmq-io-hub": lambda: ZmqNet("hub"),
}
