"""Socket work on the hub (`HubIoLoop`): the ``io="hub"`` mode of `ZmqTransport`.

The two-process behaviour of both modes is in test_zmq.py (its local node runs
either way, its children on the hub). Here: what only the hub mode can get
wrong. ZeroMQ's readiness descriptors are edge-style, and a send can consume
the signal of frames that arrived meanwhile; a mistake there leaves frames
stranded, which shows up as a stall, never as a wrong value. Two hub-mode
nodes in one process, sending bursts at each other at the same time, make
sends and arrivals interleave as much as anything can.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import cloudpickle
import gevent
import pytest
from gevent.monkey import get_original

from actors import Node, api
from transports.tick import TickConfig
from transports.zmq import ZmqTransport, node_process_io
from transports.zmq_io import HubIoLoop, _has_input, _Laps
from transports.zmq_node import free_port

cloudpickle.register_pickle_by_value(sys.modules[__name__])

COOKIE = "warren-hub-io-cookie"


def _node(prefix: str, io: str = "hub") -> Node:
    # net ticks are far apart: the tick check reads the sockets too, and must
    # not be what rescues a stranded frame here
    transport = ZmqTransport(cookie=COOKIE, tick=TickConfig(60.0), net_setuptime=2.0, io=io)
    return Node(f"{prefix}@127.0.0.1:{free_port()}", transport=transport).start()


@pytest.fixture
def pair() -> Iterator[tuple[Node, Node]]:
    a, b = _node("ha"), _node("hb")
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


def _recv(timeout_ms: int = 10_000) -> Any:
    msg = api.receive(timeout_ms)
    assert msg is not api.TIMEOUT, "stalled: a frame is stranded in a socket"
    return msg


def test_the_transport_uses_the_hub_loop_when_asked(pair: tuple[Node, Node]) -> None:
    a, _ = pair
    assert isinstance(a.transport._io, HubIoLoop)  # type: ignore[union-attr]
    assert a.transport.io_mode == "hub"  # type: ignore[union-attr]


def test_bursts_both_ways_at_once_arrive_complete_and_in_order(pair: tuple[Node, Node]) -> None:
    a, b = pair
    n = 30_000
    with a.attached() as me:
        my = me.pid

        def echo_and_burst() -> None:
            # sends a burst of its own while the other side's burst arrives
            for i in range(n):
                api.send(my, ("b", i))
                if i % 500 == 0:
                    api.sleep(0)
            got = 0
            while got < n:
                m = api.receive(10_000)
                if m is api.TIMEOUT:
                    break
                assert m == ("a", got)
                got += 1
            api.send(my, ("b got", got))

        peer = api.spawn(echo_and_burst, node=b.name)
        for i in range(n):
            api.send(peer, ("a", i))
            if i % 500 == 0:
                api.sleep(0)
        seen = [_recv() for _ in range(n)]
        assert seen == [("b", i) for i in range(n)]
        assert _recv() == ("b got", n)


def test_many_small_round_trips_never_stall(pair: tuple[Node, Node]) -> None:
    """One frame in flight at a time: each reply arrives while nothing else
    moves, so a lost readiness edge would hang the very next round trip."""
    a, b = pair
    with a.attached() as me:
        my = me.pid

        def pong() -> None:
            while True:
                m = api.receive()
                api.send(my, ("pong", m))

        peer = api.spawn(pong, node=b.name)
        for i in range(2_000):
            api.send(peer, i)
            assert _recv(5_000) == ("pong", i)


def test_a_busy_hub_reads_a_waiting_frame_within_a_lap_of_its_callbacks(
    pair: tuple[Node, Node],
) -> None:
    """Processes that keep waking each other keep gevent running callbacks, and
    gevent lets libev poll the descriptors only between groups of 50 of them (and
    only once its switch interval has passed). A frame from a peer that waits in
    the socket meanwhile is read within a lap of the busy hub's callbacks, not
    after the busy spell, as the BEAM's schedulers check I/O between processes."""
    a, b = pair
    real_sleep = get_original("time", "sleep")
    loop = gevent.get_hub().loop
    with a.attached() as me:
        assert a.ping(b.name) == "pong"
        while not b.is_connected(a.name):  # the session is up on both sides
            api.sleep(10)
        io = a.transport._io  # type: ignore[union-attr]
        link = io._links[b.name]
        sock = link.sock if link.outgoing else io._router
        steps: list[int] = []

        def busy(i: int) -> None:
            if i == 0:  # the frame waits in a's socket before the busy spell goes on
                for _ in range(10_000):
                    if _has_input(sock):
                        break
                    real_sleep(0.001)
            steps.append(i)
            if i < 500:
                loop.run_callback(busy, i + 1)
            else:
                io.refresh()  # whatever is still waiting is read now, at the latest

        b.send(me.pid, "from b")
        loop.run_callback(busy, 0)
        assert _recv() == "from b"
        read_after = len(steps)
    assert read_after < 10, f"the frame was read only after {read_after} callbacks"


def test_an_idle_session_does_not_spin(pair: tuple[Node, Node]) -> None:
    a, b = pair
    with a.attached():
        assert a.ping(b.name) == "pong"
        while not b.is_connected(a.name):  # the session is up on both sides
            api.sleep(10)
        io = a.transport._io  # type: ignore[union-attr]
        laps = _Laps._by_loop[id(gevent.get_hub().loop)]
        assert laps.nodes == [a.transport._io, b.transport._io]  # type: ignore[union-attr]
        before, laps_before = io.rounds, laps.laps
        gevent.sleep(1.0)
        # no timer is due in that second; a descriptor that
        # stayed readable would run thousands of rounds in a second
        assert io.rounds - before < 50
        # and the look between callbacks stops with them (two nodes' looks that kept
        # each other going ran over ten thousand a second; a wake-up now and then
        # may still bring one)
        assert laps.laps - laps_before < 1000


def test_close_ends_the_peers_session_and_later_sends_are_ignored(
    pair: tuple[Node, Node],
) -> None:
    a, b = pair
    with b.attached():
        api.monitor_nodes(True, info=True)
        assert b.ping(a.name) == "pong"
        assert _recv() == ("nodeup", a.name, {})
        io = a.transport._io  # type: ignore[union-attr]
        a.stop()
        assert _recv(3_000) == ("nodedown", a.name, {"nodedown_reason": "connection_closed"})
        assert io.done
        io.submit(("connect", b.name))  # after close: nothing happens, nothing raises


def test_io_mode_is_validated_and_node_processes_default_to_the_hub(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ValueError, match="io must be one of"):
        ZmqTransport(cookie=COOKIE, io="fibers")
    monkeypatch.delenv("WARREN_ZMQ_IO", raising=False)
    assert node_process_io() == "hub"
    assert ZmqTransport(cookie=COOKIE).io_mode == "thread"  # embedded nodes keep the thread
    monkeypatch.setenv("WARREN_ZMQ_IO", "thread")
    assert node_process_io() == "thread"
    monkeypatch.setenv("WARREN_ZMQ_IO", "hub")
    assert ZmqTransport(cookie=COOKIE).io_mode == "hub"
