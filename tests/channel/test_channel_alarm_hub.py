"""The alarm hub's core: which node has which resource
alarmed, what readers and the other nodes' hubs are told, and what a node going
down takes with it. Exact inputs, exact effects; no process runs."""

from __future__ import annotations

from typing import Any

import pytest

from actors import Node, Pid
from channel.limits.alarm import Alarm, AlarmHub, Effect

A, B, C = "a@h:1", "b@h:2", "c@h:3"
READER = Pid(A, 10, 1)
READER2 = Pid(A, 11, 1)
PEER_B = Pid(B, 5, 1)
PEER_C = Pid(C, 5, 1)


def sends(effects: list[Effect]) -> list[tuple[Any, Any]]:
    return [(e[1], e[2]) for e in effects if e[0] == "send"]


def traces(effects: list[Effect]) -> list[str]:
    return [e[1] for e in effects if e[0] == "trace"]


@pytest.fixture
def hub() -> AlarmHub:
    h = AlarmHub(A)
    h.register_reader(READER)
    h.register_peer(PEER_B, B)
    h.register_peer(PEER_C, C)
    return h


def test_an_own_alarm_goes_to_the_readers_and_to_every_other_nodes_hub(hub: AlarmHub) -> None:
    effects = hub.set_alarm("memory", A)
    assert sorted(sends(effects), key=repr) == sorted([
        (PEER_B, ("set_alarm", ("resource_limit", "memory", A))),
        (PEER_C, ("set_alarm", ("resource_limit", "memory", A))),
        (READER, ("conserve_resources", "memory", True)),
    ], key=repr)
    assert traces(effects) == ["mem_alarm_on"]
    assert hub.alarms() == [("memory", A)]


def test_another_nodes_alarm_goes_to_the_readers_only(hub: AlarmHub) -> None:
    effects = hub.set_alarm("disk", B)
    assert sends(effects) == [(READER, ("conserve_resources", "disk", True))]
    assert traces(effects) == []
    assert hub.local() == set()
    assert hub.resources() == {"disk"}


def test_a_resource_stays_active_while_any_node_still_has_it(hub: AlarmHub) -> None:
    hub.set_alarm("memory", A)
    hub.set_alarm("memory", B)
    cleared_here = hub.clear_alarm("memory", A)
    assert (READER, ("conserve_resources", "memory", True)) in sends(cleared_here)
    assert (PEER_B, ("clear_alarm", ("resource_limit", "memory", A))) in sends(cleared_here)
    cleared_there = hub.clear_alarm("memory", B)
    assert sends(cleared_there) == [(READER, ("conserve_resources", "memory", False))]
    assert hub.resources() == set()


def test_setting_what_is_set_or_clearing_what_is_clear_tells_nobody(hub: AlarmHub) -> None:
    assert hub.clear_alarm("memory", A) == []
    hub.set_alarm("memory", B)
    assert hub.set_alarm("memory", B) == []
    assert hub.clear_alarm("disk", B) == []


def test_register_returns_every_resource_alarmed_on_any_node(hub: AlarmHub) -> None:
    hub.set_alarm("memory", A)
    hub.set_alarm("disk", C)
    assert hub.register_reader(READER2) == {"memory", "disk"}
    assert (READER2, ("conserve_resources", "disk", False)) in sends(hub.clear_alarm("disk", C))


def test_an_unregistered_reader_is_told_nothing(hub: AlarmHub) -> None:
    hub.unregister_reader(READER)
    assert sends(hub.set_alarm("disk", B)) == []


def test_a_registering_hub_hears_this_nodes_own_alarms_only() -> None:
    hub = AlarmHub(A)
    hub.set_alarm("memory", A)
    hub.set_alarm("disk", C)
    assert sends(hub.register_peer(PEER_B, B)) == [
        (PEER_B, ("set_alarm", ("resource_limit", "memory", A)))]


def test_a_node_going_down_clears_its_alarms(hub: AlarmHub) -> None:
    hub.set_alarm("memory", B)
    hub.set_alarm("disk", B)
    hub.set_alarm("disk", C)
    effects = hub.node_down(B)
    assert sends(effects) == [(READER, ("conserve_resources", "disk", True)),
                              (READER, ("conserve_resources", "memory", False))]
    assert hub.alarms() == [("disk", C)]
    assert PEER_B not in hub.peers
    # and it no longer hears this node's alarms
    assert PEER_B not in [dest for dest, _ in sends(hub.set_alarm("memory", A))]


def test_the_down_of_another_nodes_hub_clears_that_nodes_alarms(hub: AlarmHub) -> None:
    hub.set_alarm("memory", C)
    assert sends(hub.peer_down(PEER_C)) == [(READER, ("conserve_resources", "memory", False))]
    assert hub.alarms() == []
    assert hub.peer_down(PEER_C) == []


def test_a_hub_from_a_new_life_of_a_node_replaces_the_old_one_and_its_alarms(
        hub: AlarmHub) -> None:
    hub.set_alarm("memory", B)
    reborn = Pid(B, 5, 2)
    effects = hub.register_peer(reborn, B)
    assert (READER, ("conserve_resources", "memory", False)) in sends(effects)
    assert hub.peers == {PEER_C: C, reborn: B}
    assert hub.peer_down(PEER_B) == []


def test_unknown_resources_are_refused(hub: AlarmHub) -> None:
    with pytest.raises(ValueError):
        hub.set_alarm("cpu", A)


def test_the_node_instance_sends_what_the_hub_decides() -> None:
    node = Node(A)
    alarm = Alarm(node)
    alarm.set_alarm("memory")
    alarm.set_alarm("disk", B)
    assert alarm.active == {"memory", "disk"}
    assert alarm.alarms() == [("disk", B), ("memory", A)]
    alarm.node_down(B)
    alarm.clear_alarm("memory")
    assert alarm.active == set()
