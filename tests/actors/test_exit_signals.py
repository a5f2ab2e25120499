"""Links and exit signals: ERTS's decision table, row by row."""

from __future__ import annotations

from typing import Any

import pytest

import actors
from actors import Node, Pid
from tests.actors.helpers import collect, nothing_more, trapping_relay, wait_forever


def _target(trap: bool, parent: Pid) -> None:
    actors.process_flag("trap_exit", trap)
    actors.send(parent, ("ready", actors.self()))
    while True:
        actors.send(parent, ("got", actors.receive()))


def _start_target(trap: bool) -> tuple[Pid, Any]:
    me = actors.self()
    pid, ref = actors.spawn_monitor(_target, trap, me)
    assert collect(1) == [("ready", pid)]
    return pid, ref


def test_row1_signal_from_a_removed_link_is_dropped(a: Node) -> None:
    with a.attached() as me:
        pid, ref = _start_target(trap=False)
        a.link(a.procs[pid.serial], me.pid)
        # the link is removed on the target side only (as unlink from it would)
        a.procs[pid.serial].links.discard(me.pid)
        a._exit_signal(a.procs[pid.serial], me.pid, "boom", True)
        assert actors.is_process_alive(pid)
        actors.exit(pid, "kill")


def test_row2_explicit_kill_is_untrappable_and_becomes_killed(a: Node) -> None:
    with a.attached():
        pid, ref = _start_target(trap=True)
        actors.exit(pid, "kill")
        assert collect(1) == [("DOWN", ref, "process", pid, "killed")]


@pytest.mark.parametrize("reason", ["normal", "shutdown", ("shutdown", 1), "kill", "boom"])
def test_row3_trapping_receiver_gets_exit_messages(a: Node, reason: Any) -> None:
    with a.attached() as me:
        pid, ref = _start_target(trap=True)
        actors.link(pid)
        if reason == "kill":
            # a link-borne kill stays `kill` and can be trapped
            actors.process_flag("trap_exit", True)
            actors.spawn(_link_and_exit, pid, "kill")
            assert collect(1) == [("got", ("EXIT", _last_spawned(a), "kill"))]
        else:
            actors.exit(pid, reason)
            assert collect(1) == [("got", ("EXIT", me.pid, reason))]
        assert actors.is_process_alive(pid)


def _last_spawned(node: Node) -> Pid:
    return Pid(node.name, node._serial, node.creation)


def _link_and_exit(pid: Pid, reason: Any) -> None:
    actors.link(pid)
    actors.exit(reason)


def test_row4_normal_from_another_process_is_dropped(a: Node) -> None:
    with a.attached():
        pid, ref = _start_target(trap=False)
        actors.exit(pid, "normal")
        actors.spawn(_link_and_exit, pid, "normal")
        assert nothing_more(100)
        assert actors.is_process_alive(pid)


def test_row5_exit_self_normal_kills_a_non_trapping_process(a: Node) -> None:
    with a.attached():
        pid, ref = actors.spawn_monitor(_exit_self_normal)
        assert collect(1) == [("DOWN", ref, "process", pid, "normal")]


def _exit_self_normal() -> None:
    actors.exit(actors.self(), "normal")
    actors.receive()  # never reached: the signal ends the process first


@pytest.mark.parametrize("reason", ["shutdown", ("shutdown", "x"), "boom", "killed"])
def test_row6_other_reasons_kill_a_non_trapping_receiver_with_that_reason(
    a: Node, reason: Any
) -> None:
    with a.attached():
        pid, ref = _start_target(trap=False)
        actors.exit(pid, reason)
        assert collect(1) == [("DOWN", ref, "process", pid, reason)]


def test_link_borne_kill_is_not_turned_into_killed(a: Node) -> None:
    with a.attached():
        pid, ref = _start_target(trap=False)
        actors.spawn(_link_and_exit, pid, "kill")
        assert collect(1) == [("DOWN", ref, "process", pid, "kill")]


def test_neighbours_of_a_killed_process_receive_trappable_killed(a: Node) -> None:
    with a.attached() as me:
        actors.process_flag("trap_exit", True)
        victim = actors.spawn_link(wait_forever)
        bystander, bref = actors.spawn_monitor(_link_to_and_wait, victim, me.pid)
        assert collect(1) == ["linked"]
        actors.exit(victim, "kill")
        got = collect(2)
        assert ("EXIT", victim, "killed") in got
        # the non-trapping neighbour dies of the propagated `killed`
        assert ("DOWN", bref, "process", bystander, "killed") in got


def _link_to_and_wait(pid: Pid, parent: Pid) -> None:
    actors.link(pid)
    actors.send(parent, "linked")
    actors.receive()


def test_cascade_through_chain_stopped_by_trapping_middle(a: Node) -> None:
    with a.attached() as me:
        first, r1 = actors.spawn_monitor(wait_forever)
        middle, r2 = actors.spawn_monitor(trapping_relay, me.pid)
        assert collect(1) == [("ready", middle)]
        last, r3 = actors.spawn_monitor(wait_forever)
        a.link(a.procs[first.serial], middle)
        a.link(a.procs[middle.serial], last)
        actors.exit(first, "boom")
        got = collect(2)
        assert ("DOWN", r1, "process", first, "boom") in got
        assert ("relay", middle, ("EXIT", first, "boom")) in got
        assert nothing_more(100)
        assert actors.is_process_alive(middle) and actors.is_process_alive(last)

        # without trapping the cascade goes all the way
        x, rx = actors.spawn_monitor(wait_forever)
        y, ry = actors.spawn_monitor(wait_forever)
        z, rz = actors.spawn_monitor(wait_forever)
        a.link(a.procs[x.serial], y)
        a.link(a.procs[y.serial], z)
        actors.exit(x, "boom")
        downs = collect(3)
        assert {m[1] for m in downs} == {rx, ry, rz}
        assert {m[4] for m in downs} == {"boom"}


def test_exit_kill_on_self_gives_link_borne_kill_to_neighbours(a: Node) -> None:
    with a.attached() as me:
        actors.process_flag("trap_exit", True)
        pid = actors.spawn_link(_exit_self_kill)
        assert collect(1) == [("EXIT", pid, "kill")]
        assert actors.is_process_alive(me.pid)


def _exit_self_kill() -> None:
    actors.exit("kill")


def test_link_to_dead_local_pid_raises_noproc_or_traps(a: Node) -> None:
    with a.attached():
        dead = actors.spawn(lambda: None)
        actors.sleep(10)
        with pytest.raises(actors.NoProc):
            actors.link(dead)
        actors.process_flag("trap_exit", True)
        actors.link(dead)
        assert collect(1) == [("EXIT", dead, "noproc")]


def test_link_to_dead_remote_pid_gives_noproc_exit(a: Node, b: Node) -> None:
    with a.attached():
        actors.process_flag("trap_exit", True)
        dead = b.spawn(lambda: None)
        actors.sleep(20)
        actors.link(dead)
        assert collect(1) == [("EXIT", dead, "noproc")]


def test_cross_node_link_and_disconnect_gives_noconnection_on_both_sides(
    a: Node, b: Node
) -> None:
    with a.attached() as me:
        actors.process_flag("trap_exit", True)
        remote = b.spawn(trapping_relay, (me.pid,))
        assert collect(1) == [("ready", remote)]
        actors.link(remote)
        actors.sleep(20)
        assert actors.disconnect_node(b.name) is True
        got = collect(2)
        assert ("EXIT", remote, "noconnection") in got
        # the relay on b saw its end of the link fire, but cannot tell us over
        # the dead session; reconnect and ask it
        assert actors.is_process_alive(me.pid)
        assert b.procs[remote.serial].links == set()


def test_unlink_then_exit_has_no_effect(a: Node, b: Node) -> None:
    for where in (a, b):
        with a.attached():
            pid = where.spawn(wait_forever)
            actors.link(pid)
            actors.unlink(pid)
            actors.exit(pid, "boom")
            actors.sleep(20)
            assert nothing_more(50)


def test_spawn_link_is_atomic(a: Node, b: Node) -> None:
    with a.attached():
        actors.process_flag("trap_exit", True)
        for node in (None, b.name):
            pid = actors.spawn_link(_die_at_once, node=node)
            assert collect(1) == [("EXIT", pid, "instant")]


def _die_at_once() -> None:
    actors.exit("instant")


def test_base_exception_in_one_process_does_not_stop_others(a: Node) -> None:
    with a.attached():
        other = actors.spawn(wait_forever)
        pid, ref = actors.spawn_monitor(_raise_keyboard_interrupt)
        (down,) = collect(1)
        assert down[4][1] == "KeyboardInterrupt"
        assert actors.is_process_alive(other)


def _raise_keyboard_interrupt() -> None:
    raise KeyboardInterrupt
