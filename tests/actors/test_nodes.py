"""Nodes and sessions: nodeup/nodedown, ticks, restarts."""

from __future__ import annotations

import itertools
import time

import actors
from actors import Node
from tests.actors.conftest import TICK
from tests.actors.helpers import collect, echo_loop, nothing_more, wait_forever
from transports.memory import MemoryNetwork


def _burst_then_wait(dest: actors.Pid, n: int) -> None:
    for i in range(n):
        actors.send(dest, ("m", i))
    actors.receive()


def test_monitor_nodes_nodeup_before_first_message_nodedown_after_last(a: Node, b: Node) -> None:
    with a.attached() as me:
        actors.monitor_nodes(True, info=True)
        b.spawn(_burst_then_wait, (me.pid, 50))
        msgs = collect(51)
        assert msgs[0] == ("nodeup", b.name, {})
        assert msgs[1:] == [("m", i) for i in range(50)]
        assert b.disconnect_node(a.name) is True
        (down,) = collect(1)
        assert down == ("nodedown", b.name, {"nodedown_reason": "connection_closed"})


def test_is_connected_agrees_with_nodes(a: Node, b: Node) -> None:
    with a.attached() as me:
        actors.monitor_nodes(True)
        assert not a.is_connected(b.name) and b.name not in a.nodes()
        b.spawn(_burst_then_wait, (me.pid, 1))
        assert collect(2) == [("nodeup", b.name), ("m", 0)]
        assert a.is_connected(b.name) and a.nodes() == [b.name]
        assert not a.is_connected(a.name)  # as nodes(): the node itself is not listed
        a.disconnect_node(b.name)
        assert collect(1) == [("nodedown", b.name)]
        assert not a.is_connected(b.name) and a.nodes() == []


def test_stale_frames_after_reconnect_are_dropped(
    a: Node, b: Node, network: MemoryNetwork
) -> None:
    with a.attached() as me:
        actors.monitor_nodes(True)
        echo = b.spawn(echo_loop)
        actors.send(echo, (me.pid, "hello"))
        assert collect(2) == [("nodeup", b.name), ("echo", "hello")]
        # frames b->a are delayed; the session is cut while they are in flight
        network.faults.delay(b.name, a.name, 0.2)
        actors.send(echo, (me.pid, "in flight"))
        actors.sleep(50)
        actors.disconnect_node(b.name)
        assert collect(1) == [("nodedown", b.name)]
        network.faults.heal()
        actors.sleep(300)
        # the delayed echo belonged to the old session: never delivered
        assert nothing_more(50)
        actors.send(echo, (me.pid, "again"))
        assert collect(2) == [("nodeup", b.name), ("echo", "again")]


def test_paused_node_is_detected_by_ticks_within_the_window(
    a: Node, b: Node, network: MemoryNetwork
) -> None:
    with a.attached():
        remote = b.spawn(wait_forever)
        ref = actors.monitor(remote)
        actors.monitor_node(b.name, True)
        actors.sleep(50)
        network.faults.pause(b.name)
        start = time.monotonic()
        got = collect(2, timeout=3000)
        elapsed = time.monotonic() - start
        assert ("DOWN", ref, "process", remote, "noconnection") in got
        assert ("nodedown", b.name) in got
        lo = TICK.net_ticktime - TICK.interval
        hi = TICK.net_ticktime + TICK.interval
        assert lo - 0.05 <= elapsed <= hi + 0.25, elapsed
        network.faults.resume(b.name)


def test_partition_is_detected_on_both_sides(
    a: Node, b: Node, network: MemoryNetwork
) -> None:
    with a.attached() as me:
        remote = b.spawn(_watch_node, (a.name, me.pid))
        assert collect(1) == ["watching"]
        actors.monitor_node(b.name, True)
        network.faults.partition([a.name], [b.name])
        got = collect(1, timeout=3000)
        assert got == [("nodedown", b.name)]
        network.faults.heal()
        # b saw the partition too: ask it over a new session
        actors.send(remote, ("report", me.pid))
        assert collect(1) == [("seen", ("nodedown", a.name))]


def _watch_node(peer: str, parent: actors.Pid) -> None:
    actors.monitor_node(peer, True)
    actors.send(parent, "watching")
    seen = actors.receive()
    _, reply_to = actors.receive()
    actors.send(reply_to, ("seen", seen))


def test_monitor_node_to_unreachable_node_gives_nodedown(a: Node) -> None:
    with a.attached():
        actors.monitor_node("ghost@127.0.0.1:9", True)
        assert collect(1) == [("nodedown", "ghost@127.0.0.1:9")]


def test_monitor_node_n_times_gives_n_nodedowns_and_false_turns_it_off(a: Node, b: Node) -> None:
    with a.attached():
        assert a.ping(b.name) == "pong"
        actors.monitor_node(b.name, True)
        actors.monitor_node(b.name, True)
        actors.disconnect_node(b.name)
        assert collect(2) == [("nodedown", b.name)] * 2
        assert a.ping(b.name) == "pong"
        actors.monitor_node(b.name, True)
        actors.monitor_node(b.name, False)
        actors.disconnect_node(b.name)
        assert nothing_more(100)


def test_restarted_node_has_new_creation_old_pids_dead_new_pids_work(
    network: MemoryNetwork, tmp_path: object
) -> None:
    data = str(tmp_path)
    a = Node("a@127.0.0.1:1", transport=network.transport(), data_dir=data).start()
    b1 = Node("b@127.0.0.1:2", transport=network.transport(), data_dir=data).start()
    try:
        with a.attached() as me:
            actors.monitor_nodes(True)
            old = b1.spawn(echo_loop)
            actors.send(old, (me.pid, 1))
            assert collect(2) == [("nodeup", b1.name), ("echo", 1)]
            ref = actors.monitor(old)
            b1.stop()
            got = collect(2)
            assert ("nodedown", b1.name) in got
            assert ("DOWN", ref, "process", old, "noconnection") in got
            b2 = Node("b@127.0.0.1:2", transport=network.transport(), data_dir=data).start()
            try:
                assert b2.creation != b1.creation
                assert a.ping(b2.name) == "pong"
                assert collect(1) == [("nodeup", b2.name)]
                # same serial on the new incarnation exists, but the old pid is dead
                new = b2.spawn(echo_loop)
                b2.spawn(echo_loop)
                assert new.serial == old.serial
                ref = actors.monitor(old)
                assert collect(1) == [("DOWN", ref, "process", old, "noproc")]
                actors.send(old, (me.pid, "to the old one"))
                assert nothing_more(100)
                actors.send(new, (me.pid, 2))
                assert collect(1) == [("echo", 2)]
            finally:
                b2.stop()
    finally:
        a.stop()
        b1.stop()


def test_remote_spawn_runs_a_closure_on_the_other_node(a: Node, b: Node) -> None:
    with a.attached() as me:
        secret = "closure value"
        parent = me.pid
        pid = actors.spawn(lambda: actors.send(parent, (actors.node(), secret)), node=b.name)
        assert pid.node == b.name
        assert collect(1) == [(b.name, "closure value")]


def test_spawn_on_unreachable_node_gives_dead_pid_and_noconnection(a: Node) -> None:
    with a.attached():
        actors.process_flag("trap_exit", True)
        pid = actors.spawn_link(wait_forever, node="ghost@127.0.0.1:9")
        assert collect(1) == [("EXIT", pid, "noconnection")]
        pid, ref = actors.spawn_monitor(wait_forever, node="ghost@127.0.0.1:9")
        assert collect(1) == [("DOWN", ref, "process", pid, "noconnection")]


def test_creation_is_new_at_every_start(tmp_path: object) -> None:
    from actors.node import new_creation

    seen = {new_creation(str(tmp_path), "n@h:1") for _ in range(20)}
    values = [new_creation(str(tmp_path), "n@h:1") for _ in range(50)]
    assert all(x != y for x, y in itertools.pairwise(values))
    assert all(0 < v < 2**32 for v in seen | set(values))



class _SetupNeverEnds:
    """A transport whose connection attempts neither succeed nor fail."""

    def attach(self, node: object) -> None: ...

    def connect(self, peer: str) -> None: ...

    def send(self, peer: str, signal: tuple[object, ...]) -> None: ...

    def disconnect(self, peer: str) -> bool:
        return False

    def connected_nodes(self) -> list[str]:
        return []

    def close(self) -> None: ...


def test_ping_answers_pong_when_up(a: Node, b: Node) -> None:
    with a.attached():
        assert a.ping(b.name) == "pong"


def test_ping_answers_pang_when_the_setup_does_not_finish_in_time() -> None:
    lonely = Node("lonely@127.0.0.1:9", transport=_SetupNeverEnds()).start()
    try:
        with lonely.attached():
            assert lonely.ping("c@127.0.0.1:3", timeout_ms=50) == "pang"
    finally:
        lonely.stop()
