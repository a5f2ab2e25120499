"""Sending: silent for pids, strict for local names, FIFO per sender."""

from __future__ import annotations

import pytest

import actors
from actors import Node, Pid
from tests.actors.helpers import collect, echo_loop, nothing_more


def test_send_to_dead_unknown_or_old_creation_pid_is_silent(a: Node, b: Node) -> None:
    with a.attached() as me:
        dead = actors.spawn(lambda: None)
        actors.sleep(10)
        assert not actors.is_process_alive(dead)
        unknown = Pid(a.name, 10_000, a.creation)
        old_creation = Pid(a.name, me.pid.serial, a.creation ^ 1)
        remote_unknown = Pid(b.name, 10_000, b.creation)
        remote_old = Pid(b.name, 1, b.creation ^ 1)
        for pid in (dead, unknown, old_creation, remote_unknown, remote_old):
            actors.send(pid, "lost")
        # an old-creation pid that names *this* process must not reach it
        actors.send(Pid(a.name, me.pid.serial, a.creation ^ 1), "not for me")
        assert nothing_more(200)


def test_send_to_unregistered_local_name_raises(a: Node) -> None:
    with a.attached():
        with pytest.raises(actors.NoSuchName):
            actors.send("nobody", "hello")
        # a remote name never fails at the call site
        actors.send(("nobody", "b@127.0.0.1:2"), "hello")


def test_send_by_name_and_by_name_node_pair(a: Node, b: Node) -> None:
    with a.attached() as me:
        local = actors.spawn(echo_loop)
        actors.register("echo", local)
        remote = b.spawn(echo_loop)
        b.register("echo", remote)
        actors.send("echo", (me.pid, 1))
        actors.send(("echo", a.name), (me.pid, 2))
        actors.send(("echo", b.name), (me.pid, 3))
        assert sorted(collect(3)) == [("echo", 1), ("echo", 2), ("echo", 3)]


def _burst(dest: Pid, n: int) -> None:
    for i in range(n):
        actors.send(dest, i)


def test_per_pair_fifo_locally_under_load(a: Node) -> None:
    with a.attached() as me:
        n = 100_000
        actors.spawn(_burst, me.pid, n)
        got = [actors.receive(5000) for _ in range(n)]
        assert got == list(range(n))


def test_per_pair_fifo_across_nodes_under_load(a: Node, b: Node) -> None:
    with a.attached() as me:
        n = 100_000
        b.spawn(_burst, (me.pid, n))
        got = [actors.receive(10_000) for _ in range(n)]
        assert got == list(range(n))


@pytest.mark.parametrize("remote", [False, True], ids=["local", "remote"])
def test_message_then_death_order_for_monitors_and_links(a: Node, b: Node, remote: bool) -> None:
    where = b.name if remote else None
    with a.attached():
        actors.process_flag("trap_exit", True)
        me = actors.self()
        # a process that links to us, sends, then dies: message, EXIT, DOWN in that order
        pid, ref = actors.spawn_monitor(_link_send_die, me, node=where)
        msgs = collect(3)
        assert msgs[0] == "last words"
        assert msgs[1] == ("EXIT", pid, "boom")
        assert msgs[2] == ("DOWN", ref, "process", pid, "boom")


def _link_send_die(dest: Pid) -> None:
    actors.link(dest)
    actors.send(dest, "last words")
    actors.exit("boom")


def test_local_messages_are_passed_by_reference_unless_strict_copy(a: Node) -> None:
    a.strict_copy = False
    with a.attached() as me:
        payload = {"k": [1, 2]}
        actors.send(me.pid, payload)
        assert actors.receive(100) is payload


def test_strict_copy_mode_round_trips_local_messages() -> None:
    node = Node("strict@127.0.0.1:1", strict_copy=True).start()
    try:
        with node.attached() as me:
            payload = {"k": [1, 2]}
            actors.send(me.pid, payload)
            got = actors.receive(100)
            assert got == payload and got is not payload
            with pytest.raises(Exception):  # pickle raises several error types
                actors.send(me.pid, lambda: None)
    finally:
        node.stop()
