"""The ZeroMQ transport between real node OS processes on 127.0.0.1.

The pytest process is itself a node (``t…``); the other nodes are bare node
processes started with `transports.zmq_node`, and everything they run is
shipped there by remote spawn. Every child is killed in a fixture's
``finally``, so a failing test leaves no process behind.
"""

from __future__ import annotations

import gc
import logging
import os
import pickle
import signal
import stat
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import cloudpickle
import gevent
import pytest
import zmq
import zmq.green as zmq_green

from actors import Node, Pid, api
from actors.gc_policy import NODE_THRESHOLDS
from transports import handshake as hs
from transports.cookie import CookieError, load_cookie
from transports.faults import FaultRules
from transports.tick import TickConfig
from transports.zmq import ZmqTransport
from transports.zmq_node import free_port, start_node_process, stop_node_process

# Functions of this module travel by value: the node processes cannot import it.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

COOKIE = "warren-test-cookie"
TICKTIME = 1.0
TICK = TickConfig(TICKTIME, 4)
INTERVAL = TICK.interval
SETUPTIME = 2.0


@dataclass
class Child:
    name: str
    proc: Any
    creation: int


class Cluster:
    """Nodes of one test: local ones in this process, children as OS processes.

    Local nodes do their socket work as `io` says (``thread`` or ``hub``);
    the children are node processes, which use the hub.
    """

    def __init__(self, io: str = "thread") -> None:
        self.io = io
        self.children: list[Child] = []
        self.locals: list[Node] = []

    def local(self, faults: FaultRules | None = None, cookie: str = COOKIE) -> Node:
        name = f"t{len(self.locals)}@127.0.0.1:{free_port()}"
        transport = ZmqTransport(cookie=cookie, tick=TICK, faults=faults, net_setuptime=SETUPTIME,
                                 io=self.io)
        node = Node(name, transport=transport).start()
        self.locals.append(node)
        return node

    def child(self, name: str | None = None, cookie: str = COOKIE,
              ping: str | None = None) -> Child:
        name = name or f"c{len(self.children)}@127.0.0.1:{free_port()}"
        kwargs = dict(cookie=cookie, net_ticktime=TICKTIME, net_setuptime=SETUPTIME, ping=ping)
        if ping is None:
            proc, creation = start_node_process(name, **kwargs)
        else:
            # the child dials us before it is ready: wait on a pool thread so
            # that the hub runs meanwhile (a local node doing its socket work
            # on the hub must answer the handshake)
            proc, creation = gevent.get_hub().threadpool.apply(start_node_process, (name,), kwargs)
        child = Child(name, proc, creation)
        self.children.append(child)
        return child

    def signal(self, child: Child, sig: int) -> None:
        os.kill(child.proc.pid, sig)

    def kill(self, child: Child) -> None:
        child.proc.kill()
        child.proc.wait(5)

    def close(self) -> None:
        for child in self.children:
            stop_node_process(child.proc, keep_log=True)
            log_path = getattr(child.proc, "log_path", None)
            if log_path and os.path.exists(log_path):
                with open(log_path) as f:
                    text = f.read()
                os.unlink(log_path)
                if text.strip():
                    print(f"--- log of {child.name} ---\n{text}")
        for node in self.locals:
            node.stop()


@pytest.fixture(params=["thread", "hub"], ids=["local-io-thread", "local-io-hub"])
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    c = Cluster(request.param)
    try:
        yield c
    finally:
        c.close()


def recv(timeout_ms: int = 5000, match: Callable[[Any], bool] | None = None) -> Any:
    msg = api.receive(timeout_ms, match)
    assert msg is not api.TIMEOUT, "timed out waiting for a message"
    return msg


def rpc(node_name: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Run ``fn(*args)`` in a new process on `node_name` and return its result."""
    me = api.self()
    tag = api.make_ref()

    def run() -> None:
        api.send(me, ("rpc", tag, fn(*args)))

    api.spawn(run, node=node_name)
    return recv(5000, lambda m: type(m) is tuple and len(m) == 3 and m[:2] == ("rpc", tag))[2]


def forwarder(to: Pid) -> None:
    """Forward everything received to `to`, tagged with this process's pid."""
    while True:
        api.send(to, ("fwd", api.self(), api.receive()))


# --------------------------------------------------------------- ordering


def test_fifo_100k_each_way_between_two_processes(cluster: Cluster) -> None:
    a, b = cluster.local(), cluster.child()
    n = 100_000
    with a.attached() as me:
        my = me.pid

        def producer() -> None:
            for i in range(n):
                api.send(my, i)
                if i % 5000 == 0:
                    api.sleep(0)
            api.send(my, "end")

        def consumer() -> None:
            expected = 0
            while True:
                m = api.receive(10_000)
                if m == "end" or m is api.TIMEOUT:
                    api.send(my, ("consumed", expected))
                    return
                if m != expected:
                    api.send(my, ("out_of_order", expected, m))
                    return
                expected += 1

        api.spawn(producer, node=b.name)
        sink = api.spawn(consumer, node=b.name)
        for i in range(n):
            api.send(sink, i)
            if i % 5000 == 0:
                api.sleep(0)
        api.send(sink, "end")
        got = []
        while True:
            # the producer's stream only: the consumer's report is another
            # sender's message, free to arrive anywhere between them
            m = recv(10_000, lambda m: isinstance(m, int) or m == "end")
            if m == "end":
                break
            got.append(m)
        assert got == list(range(n))
        assert recv(10_000) == ("consumed", n)


def test_fifo_per_sender_pair_with_three_processes(cluster: Cluster) -> None:
    a, b, c = cluster.local(), cluster.child(), cluster.child()
    n = 30_000
    with a.attached() as me:
        my = me.pid

        def producer(tag: str) -> None:
            for i in range(n):
                api.send(my, (tag, i))
                if i % 1000 == 0:
                    api.sleep(0)
            api.send(my, (tag, "end"))

        api.spawn(producer, "b", node=b.name)
        api.spawn(producer, "c", node=c.name)
        seen: dict[str, list[Any]] = {"b": [], "c": []}
        while seen["b"][-1:] != ["end"] or seen["c"][-1:] != ["end"]:
            tag, i = recv(10_000)
            seen[tag].append(i)
        assert seen["b"] == [*range(n), "end"]
        assert seen["c"] == [*range(n), "end"]


def test_messages_come_before_exit_and_down_across_nodes(cluster: Cluster) -> None:
    a, b = cluster.local(), cluster.child()
    with a.attached() as me:
        my = me.pid
        api.process_flag("trap_exit", True)

        def body() -> None:
            for i in range(200):
                api.send(my, ("m", i))
            api.exit("bye")

        pid = api.spawn_link(body, node=b.name)
        got = [recv() for _ in range(201)]
        assert got == [("m", i) for i in range(200)] + [("EXIT", pid, "bye")]

        pid, ref = api.spawn_monitor(body, node=b.name)
        got = [recv() for _ in range(201)]
        assert got == [("m", i) for i in range(200)] + [("DOWN", ref, "process", pid, "bye")]


def test_monitor_nodes_nodeup_first_nodedown_after_last(cluster: Cluster) -> None:
    a, b = cluster.local(), cluster.child()
    with a.attached() as me:
        my = me.pid
        api.monitor_nodes(True)

        def burst() -> None:
            for i in range(1000):
                api.send(my, ("old", i))
            api.disconnect_node(my.node)
            api.sleep(300)
            for i in range(1000):
                api.send(my, ("new", i))

        api.spawn(burst, node=b.name)
        got = [recv() for _ in range(2003)]
        assert got == (
            [("nodeup", b.name)] + [("old", i) for i in range(1000)] + [("nodedown", b.name)]
            + [("nodeup", b.name)] + [("new", i) for i in range(1000)]
        )


# ------------------------------------------------------- failure detection


@pytest.mark.parametrize("dialler", ["this node", "peer"])
def test_sigkill_gives_noconnection_promptly(cluster: Cluster, dialler: str) -> None:
    a = cluster.local()
    b = cluster.child(ping=a.name if dialler == "peer" else None)
    with a.attached():
        api.monitor_nodes(True, info=True)

        def idle() -> None:
            api.receive()

        pid = api.spawn(idle, node=b.name)
        ref = api.monitor(pid)
        api.monitor_node(b.name, True)
        t0 = time.monotonic()
        cluster.kill(b)
        got = []
        while len([m for m in got if m[0] != "nodeup"]) < 3:
            got.append(recv(int(4 * TICKTIME * 1000)))
        elapsed = time.monotonic() - t0
        assert ("DOWN", ref, "process", pid, "noconnection") in got
        assert ("nodedown", b.name) in got
        # A TCP close is noticed at once, not by missing ticks.
        assert ("nodedown", b.name, {"nodedown_reason": "connection_closed"}) in got
        assert elapsed < 2 * TICKTIME


def test_sigstop_tick_timeout_window_then_old_session_frames_dropped(cluster: Cluster) -> None:
    a, b = cluster.local(), cluster.child()
    with a.attached() as me:
        my = me.pid
        api.monitor_nodes(True, info=True)

        def chatter() -> None:
            i = 0
            while True:
                api.send(my, ("n", i))
                i += 1
                api.sleep(10)

        api.spawn(chatter, node=b.name)
        assert recv() == ("nodeup", b.name, {})
        assert recv()[0] == "n"
        gevent.sleep(3 * INTERVAL)  # steady state: several tick intervals of traffic
        cluster.signal(b, signal.SIGSTOP)
        t0 = time.monotonic()
        while True:
            m = recv(int(3 * TICKTIME * 1000))
            if m[0] == "nodedown":
                break
            assert m[0] == "n"
        elapsed = time.monotonic() - t0
        assert m == ("nodedown", b.name, {"nodedown_reason": "net_tick_timeout"})
        # never before net_ticktime less one tick interval (that would be a false
        # nodedown); at the latest within two ticktimes, however loaded the machine
        assert TICKTIME - INTERVAL - 0.1 <= elapsed <= 2 * TICKTIME + INTERVAL
        cluster.signal(b, signal.SIGCONT)
        # After the old session is down, B's messages may only come in a new
        # session, i.e. after a new nodeup.
        m = recv(int(4 * TICKTIME * 1000))
        assert m == ("nodeup", b.name, {}), f"old-session frame delivered: {m!r}"
        after = [recv() for _ in range(5)]
        assert all(x[0] == "n" for x in after)
        assert [x[1] for x in after] == sorted(x[1] for x in after)


def test_restarted_node_new_creation_old_pids_dead(cluster: Cluster) -> None:
    a = cluster.local()
    name = f"r@127.0.0.1:{free_port()}"
    b = cluster.child(name)
    with a.attached() as me:
        my = me.pid
        api.monitor_nodes(True)
        old = api.spawn(forwarder, my, node=name)
        assert recv() == ("nodeup", name)
        api.send(old, "hello")
        assert recv() == ("fwd", old, "hello")
        cluster.kill(b)
        assert recv(int(2 * TICKTIME * 1000)) == ("nodedown", name)

        b2 = cluster.child(name)
        assert b2.creation != b.creation
        new = api.spawn(forwarder, my, node=name)
        assert recv() == ("nodeup", name)
        assert (new.serial, new.node) == (old.serial, old.node)  # only the creation differs
        assert new.creation == b2.creation != old.creation
        api.send(old, "to the old one")
        api.send(new, "to the new one")
        assert recv() == ("fwd", new, "to the new one")
        ref = api.monitor(old)
        assert recv() == ("DOWN", ref, "process", old, "noproc")
        assert api.receive(300) is api.TIMEOUT  # nothing reached the old pid


def test_disconnect_node_noconnection_on_both_sides(cluster: Cluster) -> None:
    a, b = cluster.local(), cluster.child()
    with a.attached() as me:
        my = me.pid
        api.process_flag("trap_exit", True)

        def remote() -> None:
            api.process_flag("trap_exit", True)
            ref = api.monitor(my)
            api.send(my, "ready")
            seen = [api.receive(5000), api.receive(5000)]
            api.send(my, ("remote saw", ref, seen))

        pid = api.spawn_link(remote, node=b.name)
        lref = api.monitor(pid)
        assert recv() == "ready"
        assert api.disconnect_node(b.name) is True
        got = {recv(), recv()}
        assert got == {
            ("EXIT", pid, "noconnection"), ("DOWN", lref, "process", pid, "noconnection")}
        _, rref, seen = recv()
        assert set(seen) == {
            ("EXIT", my, "noconnection"), ("DOWN", rref, "process", my, "noconnection")}


def _partition_soon(me: str, other: str, heal_after: float) -> bool:
    faults = api.get_node().transport.faults
    gevent.spawn_later(0.05, faults.partition, [me], [other])
    gevent.spawn_later(heal_after, faults.heal)
    return True


def test_partition_by_fault_rules_is_detected_by_ticks(cluster: Cluster) -> None:
    faults = FaultRules()
    a, b = cluster.local(faults=faults), cluster.child()
    with a.attached() as me:
        my = me.pid
        api.monitor_nodes(True, info=True)

        def watcher() -> None:
            api.register("watch")
            api.monitor_nodes(True, info=True)
            api.send(my, "watching")
            log = []
            while True:
                m = api.receive()
                if m[0] == "report":
                    api.send(m[1], ("log", log))
                else:
                    log.append(m)

        api.spawn(watcher, node=b.name)
        assert recv(match=lambda m: m == "watching") == "watching"
        heal_after = 2.5
        assert rpc(b.name, _partition_soon, b.name, a.name, heal_after)
        faults.partition([a.name], [b.name])
        t0 = time.monotonic()
        m = recv(int(3 * TICKTIME * 1000), match=lambda m: m[0] == "nodedown")
        elapsed = time.monotonic() - t0
        assert m == ("nodedown", b.name, {"nodedown_reason": "net_tick_timeout"})
        # never before net_ticktime less one tick interval (that would be a false
        # nodedown); at the latest within two ticktimes, however loaded the machine
        assert TICKTIME - INTERVAL - 0.1 <= elapsed <= 2 * TICKTIME + INTERVAL
        faults.heal()
        gevent.sleep(max(0.0, heal_after + 0.3 - (time.monotonic() - t0)))
        api.send(("watch", b.name), ("report", my))
        _, log = recv(match=lambda m: m[0] == "log")
        assert ("nodedown", a.name, {"nodedown_reason": "net_tick_timeout"}) in log


def test_fault_rules_drop_and_delay_on_outgoing_frames(cluster: Cluster) -> None:
    faults = FaultRules()
    a, b = cluster.local(faults=faults), cluster.child()
    with a.attached() as me:
        my = me.pid
        fwd = api.spawn(forwarder, my, node=b.name)
        api.send(fwd, "first")
        assert recv() == ("fwd", fwd, "first")
        faults.drop(a.name, b.name)
        api.send(fwd, "dropped")
        api.sleep(50)
        faults.heal()
        faults.delay(a.name, b.name, 0.3)
        t0 = time.monotonic()
        for i in range(500):
            api.send(fwd, i)
            if i % 50 == 0:
                api.sleep(1)  # several frames, each delayed, order kept
        got = [recv()[2] for _ in range(500)]
        assert time.monotonic() - t0 >= 0.25
        assert got == list(range(500))  # "dropped" never arrived


def test_paused_node_holds_frames_and_stops_ticking(cluster: Cluster) -> None:
    faults = FaultRules()
    a, b = cluster.local(faults=faults), cluster.child()
    with a.attached() as me:
        my = me.pid
        api.monitor_nodes(True)
        fwd = api.spawn(forwarder, my, node=b.name)
        assert recv() == ("nodeup", b.name)
        faults.pause(a.name)
        for i in range(100):
            api.send(fwd, i)
        gevent.sleep(0.3)  # shorter than the tick timeout: the session survives
        faults.resume(a.name)
        assert [recv()[2] for _ in range(100)] == list(range(100))
        faults.pause(a.name)  # now long enough for the peer to give up on us
        gevent.sleep(TICKTIME + 2 * INTERVAL + 0.3)
        faults.resume(a.name)
        assert recv(int(2 * TICKTIME * 1000)) == ("nodedown", b.name)


# ---------------------------------------------------------- remote spawn


def test_a_node_process_collects_cycles_with_the_node_thresholds(cluster: Cluster) -> None:
    a = cluster.local()
    b = cluster.child()
    with a.attached():
        assert rpc(b.name, gc.get_threshold) == NODE_THRESHOLDS


def test_remote_spawn_link_monitor_with_closures(cluster: Cluster) -> None:
    a, b = cluster.local(), cluster.child()
    factor = 7

    def times(x: int) -> int:
        return x * factor

    with a.attached() as me:
        my = me.pid
        api.process_flag("trap_exit", True)
        pid = api.spawn(lambda: api.send(my, ("r", times(6), api.node())), node=b.name)
        assert pid.node == b.name and pid.creation == b.creation
        assert recv() == ("r", 42, b.name)

        pid = api.spawn_link(lambda: api.exit(("shutdown", times(2))), node=b.name)
        assert recv() == ("EXIT", pid, ("shutdown", 14))

        def crash() -> None:
            raise ValueError(times(3))

        pid, ref = api.spawn_monitor(crash, node=b.name)
        _, r, kind, obj, reason = recv()
        assert (r, kind, obj) == (ref, "process", pid)
        assert reason[0] == "exception" and "ValueError" in repr(reason) and "21" in repr(reason)


# ----------------------------------------------------------- authentication

UNPICKLED: list[str] = []


def _mark(tag: str) -> str:
    UNPICKLED.append(tag)
    return tag


class _Marker:
    """Unpickling this object runs `_mark`: proof that a frame reached pickle."""

    def __init__(self, tag: str) -> None:
        self.tag = tag

    def __reduce__(self) -> tuple[Any, ...]:
        return (_mark, (self.tag,))


def test_wrong_cookie_node_is_refused(cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    a = cluster.local()
    b = cluster.child(cookie="not-the-same-cookie")
    caplog.set_level(logging.WARNING, logger="warren.transport.zmq")
    with a.attached():
        api.monitor_nodes(True)
        assert a.ping(b.name, 4000) == "pang"
        assert a.nodes() == []
        assert api.receive(200) is api.TIMEOUT  # no nodeup
    assert a.transport.stats["refused"] >= 1  # type: ignore[union-attr]
    assert "refused connection" in caplog.text
    with pytest.raises(RuntimeError):
        cluster.child(cookie="not-the-same-cookie", ping=a.name)


def test_unauthenticated_frames_are_never_unpickled(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    payload = pickle.dumps([(0, 1, 1, _Marker("x"))], protocol=5)
    pickle.loads(payload)
    assert UNPICKLED == ["x"]  # the probe works: unpickling it would be seen
    UNPICKLED.clear()
    caplog.set_level(logging.WARNING, logger="warren.transport.zmq")
    a = cluster.local()
    endpoint = a.name.partition("@")[2]
    ctx = zmq_green.Context()  # waiting on it lets the hub run (a hub-mode node answers there)
    socks = []

    def dial() -> zmq.Socket:
        s = ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.connect(f"tcp://{endpoint}")
        socks.append(s)
        return s

    def hello(s: zmq.Socket, sid: int) -> dict[str, Any]:
        s.send_multipart([hs.HANDSHAKE, hs.encode(
            "hello", v=hs.PROTOCOL_VERSION, to=a.name, creation=5, nonce=hs.new_nonce(),
            sid=sid, **{"from": "evil@127.0.0.1:1"})])
        assert s.poll(3000), "no challenge"
        header, body = s.recv_multipart()
        assert header == hs.HANDSHAKE
        return hs.decode(body)

    try:
        with a.attached():
            api.monitor_nodes(True)
            # 1. data without any handshake
            s1 = dial()
            s1.send_multipart([hs.sid_header(hs.DATA, 1), payload])
            # 2. a handshake with a wrong MAC, then data for its session
            s2 = dial()
            challenge = hello(s2, 2)
            assert challenge["op"] == "challenge"
            s2.send_multipart([hs.HANDSHAKE, hs.encode("auth", sid=2, mac="00" * 32)])
            s2.send_multipart([hs.sid_header(hs.DATA, 2), payload])
            # 3. a hello, then data without ever authenticating
            s3 = dial()
            hello(s3, 3)
            s3.send_multipart([hs.sid_header(hs.DATA, 3), payload])
            # 4. pickle smuggled into the handshake itself
            s4 = dial()
            s4.send_multipart([hs.HANDSHAKE, payload])
            gevent.sleep(0.5)
            assert api.receive(100) is api.TIMEOUT  # no nodeup
            assert a.nodes() == []
    finally:
        for s in socks:
            s.close(0)
        ctx.term()
    assert UNPICKLED == []
    stats = a.transport.stats  # type: ignore[union-attr]
    assert stats["discarded"] >= 3 and stats["refused"] >= 2
    assert "refused connection" in caplog.text and "unauthenticated" in caplog.text


def test_cookie_file_created_private_and_refused_when_public(tmp_path: Any) -> None:
    cookie = load_cookie(env={}, home=tmp_path)
    path = tmp_path / ".warren.cookie"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(cookie) == 20 and cookie.isalpha()
    assert load_cookie(env={}, home=tmp_path) == cookie  # stable once created
    assert load_cookie(env={"WARREN_COOKIE": "from-env"}, home=tmp_path) == b"from-env"
    assert load_cookie("explicit", env={"WARREN_COOKIE": "from-env"}) == b"explicit"
    path.chmod(0o644)
    with pytest.raises(CookieError):
        load_cookie(env={}, home=tmp_path)


def test_connection_setup_failure_reported_within_setuptime(cluster: Cluster) -> None:
    a = cluster.local()
    nobody = f"nobody@127.0.0.1:{free_port()}"
    with a.attached():
        api.monitor_node(nobody, True)
        t0 = time.monotonic()
        assert recv(int((SETUPTIME + 2) * 1000)) == ("nodedown", nobody)
        assert time.monotonic() - t0 <= SETUPTIME + 1.0
