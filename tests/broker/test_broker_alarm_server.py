"""The `rabbit_alarm` processes of three nodes in one OS process (in-memory
transport): alarms travel between nodes, a node whose alarm process starts late
learns the alarms already raised, and a node cut off takes its alarms with it
until it is seen again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gevent
import pytest

import actors
from actors import Node, gen_server
from broker.alarms import ALARM_SERVER, AlarmServer
from channel.limits.alarm import Alarm
from tests.waiting import hub_wait_until
from transports.faults import FaultRules
from transports.memory import MemoryNetwork
from transports.tick import TickConfig

NAMES = ("a@127.0.0.1:1", "b@127.0.0.1:2", "c@127.0.0.1:3")
TICK = TickConfig(net_ticktime=0.4, net_tickintensity=4)


class Site:
    """One node with its alarm hub and a stand-in reader that records what it is told."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.alarm = Alarm(node)
        self.told: list[Any] = []
        self.reader = node.spawn(self._reader)
        self.registered = self.alarm.register(self.reader)

    def _reader(self) -> None:
        while True:
            self.told.append(actors.receive())

    def start_server(self, directory: Path) -> None:
        with self.node.attached():
            result = gen_server.start(AlarmServer, (self.alarm, str(directory), NAMES),
                                      name=ALARM_SERVER)
        assert result[0] == "ok", result

    def call(self, request: Any) -> Any:
        with self.node.attached():
            return gen_server.call(ALARM_SERVER, request, 5000)

    def connect(self, *others: Site) -> None:
        for other in others:
            assert self.node.ping(other.node.name, 2000) == "pong"


@pytest.fixture
def network() -> MemoryNetwork:
    return MemoryNetwork(TICK, FaultRules(seed=1))


@pytest.fixture
def sites(network: MemoryNetwork) -> Iterator[list[Site]]:
    nodes = [Node(name, transport=network.transport()).start() for name in NAMES]
    yield [Site(n) for n in nodes]
    greenlets = [p.greenlet for n in nodes for p in list(n.procs.values())
                 if p.greenlet is not None]
    for n in nodes:
        n.stop()
    gevent.joinall(greenlets, timeout=5)
    assert all(g.dead for g in greenlets), "a process outlived its test"


def started_and_meshed(sites: list[Site], tmp_path: Path) -> None:
    """Every node runs its alarm server and is connected to every other."""
    a, b, c = sites
    for s in sites:
        s.start_server(tmp_path)
    a.connect(b, c)
    b.connect(c)


def test_an_alarm_on_one_node_blocks_readers_of_every_node_until_it_clears(
        sites: list[Site], tmp_path: Path) -> None:
    a, b, c = sites
    started_and_meshed(sites, tmp_path)
    assert a.call(("set_vm_memory_high_watermark", 0)) == "ok"
    hub_wait_until(lambda: all(s.alarm.alarms() == [("memory", a.node.name)] for s in sites),
                   "every node knows a's memory alarm")
    hub_wait_until(lambda: ("conserve_resources", "memory", True) in c.told, "c's reader told")
    assert b.call("get_alarms") == [("memory", a.node.name)]
    assert b.call("get_local_alarms") == []
    assert a.call(("set_vm_memory_high_watermark", 0.99)) == "ok"
    hub_wait_until(lambda: all(s.alarm.alarms() == [] for s in sites), "cleared everywhere")
    hub_wait_until(lambda: c.told[-1:] == [("conserve_resources", "memory", False)],
                   "c's reader told the alarm is gone")


def test_an_alarm_process_that_starts_late_learns_the_alarms_already_raised(
        sites: list[Site], tmp_path: Path) -> None:
    a, b, c = sites
    a.start_server(tmp_path)
    b.start_server(tmp_path)
    a.connect(b, c)
    b.connect(c)
    assert a.call(("set_vm_memory_high_watermark", 0)) == "ok"
    hub_wait_until(lambda: b.alarm.alarms() == [("memory", a.node.name)], "b knows a's alarm")
    # c's nodeups came and went before it had an alarm process: the registers a and
    # b sent it then were lost; the one c sends when it starts repairs both ways
    c.start_server(tmp_path)
    hub_wait_until(lambda: c.alarm.active == {"memory"}, "c learns a's alarm")
    assert c.call(("set_disk_free_limit", 1 << 62)) == "ok"
    hub_wait_until(lambda: a.alarm.alarms() == [("disk", c.node.name), ("memory", a.node.name)]
                   and b.alarm.alarms() == a.alarm.alarms(), "a and b learn c's disk alarm")
    assert c.call(("set_disk_free_limit", 0)) == "ok"
    assert a.call(("set_vm_memory_high_watermark", 0.99)) == "ok"


def test_a_node_cut_off_takes_its_alarms_along_until_it_is_seen_again(
        sites: list[Site], tmp_path: Path, network: MemoryNetwork) -> None:
    a, b, c = sites
    started_and_meshed(sites, tmp_path)
    assert a.call(("set_vm_memory_high_watermark", 0)) == "ok"
    hub_wait_until(lambda: c.alarm.active == {"memory"}, "c knows a's alarm")
    network.faults.partition([a.node.name], [b.node.name, c.node.name])
    hub_wait_until(lambda: b.alarm.active == set() and c.alarm.active == set(),
                   "a's alarm cleared once a is seen down")
    assert c.told[-1] == ("conserve_resources", "memory", False)
    assert a.alarm.alarms() == [("memory", a.node.name)]
    network.faults.heal()
    hub_wait_until(lambda: a.node.ping(b.node.name, 500) == "pong"
                   and a.node.ping(c.node.name, 500) == "pong", "a reconnected")
    hub_wait_until(lambda: b.alarm.active == {"memory"} and c.alarm.active == {"memory"},
                   "a's alarm learned again after the reconnect")
    assert a.call(("set_vm_memory_high_watermark", 0.99)) == "ok"
