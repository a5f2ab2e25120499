"""What every transport owes the runtime, checked the same way on each one.

These are the guarantees of Erlang's distribution, which warren's runtime
builds on: one ordered stream per node pair (messages, exits and DOWNs
alike), however the transport packs signals into frames; sessions, so that a
lost or restarted node turns into `noconnection`, `nodedown` and `noproc`
rather than stale signals; and the net tick, which declares a silent peer
down. Each test runs once per network of `tests.transports.nets.NETS`; a new
transport joins the suite by joining that table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from actors import CallExit, Pid, api, gen_server
from tests.transports.nets import NETS, Net, os_threads
from tests.waiting import hub_wait_until


@pytest.fixture(params=list(NETS), ids=list(NETS))
def net(request: pytest.FixtureRequest) -> Iterator[Net]:
    threads = os_threads()
    network = NETS[request.param]()
    try:
        yield network
    finally:
        network.close()
    # every socket thread of the transport ends with its node
    hub_wait_until(lambda: os_threads() <= threads, f"no thread left behind ({threads} before)")


def recv(timeout_ms: int = 5000, match: Callable[[Any], bool] | None = None) -> Any:
    msg = api.receive(timeout_ms, match)
    assert msg is not api.TIMEOUT, "timed out waiting for a message"
    return msg


def forwarder(to: Pid) -> None:
    """Forward everything received to `to`, tagged with this process's pid."""
    while True:
        api.send(to, ("fwd", api.self(), api.receive()))


def idle() -> None:
    api.receive()


# ------------------------------------------------------------------ ordering


def test_each_pair_of_processes_keeps_its_send_order_across_nodes(net: Net) -> None:
    a, b, c = net.node("a"), net.node("b"), net.node("c")
    n = 20_000
    with a.attached() as me:
        my = me.pid

        def producer(tag: str) -> None:
            for i in range(n):
                api.send(my, (tag, i))
                if i % 700 == 0:
                    api.sleep(0)  # the stream spans many frames
            api.send(my, (tag, "end"))

        def consumer() -> None:
            got = []
            while (m := api.receive()) != "end":
                got.append(m)
            api.send(my, ("consumed", got == list(range(n)), len(got)))

        sink = b.spawn(consumer)
        b.spawn(producer, ("b",))
        c.spawn(producer, ("c",))
        for i in range(n):
            api.send(sink, i)
            if i % 900 == 0:
                api.sleep(0)
        api.send(sink, "end")
        seen: dict[str, list[Any]] = {"b": [], "c": []}
        while seen["b"][-1:] != ["end"] or seen["c"][-1:] != ["end"]:
            tag, i = recv(10_000, lambda m: m[0] in seen)
            seen[tag].append(i)
        assert seen["b"] == [*range(n), "end"]
        assert seen["c"] == [*range(n), "end"]
        assert recv(10_000) == ("consumed", True, n)


def test_messages_come_before_the_exit_and_the_down_that_follow_them(net: Net) -> None:
    a, b = net.node("a"), net.node("b")
    with a.attached() as me:
        my = me.pid
        api.process_flag("trap_exit", True)

        def body() -> None:
            for i in range(300):
                api.send(my, ("m", i))
            api.receive()  # until the test is linked and monitoring
            api.exit("bye")

        pid = b.spawn(body)
        api.link(pid)
        ref = api.monitor(pid)
        api.send(pid, "go")
        got = [recv() for _ in range(302)]
        assert got[:300] == [("m", i) for i in range(300)]
        assert got[300:] == [("EXIT", pid, "bye"), ("DOWN", ref, "process", pid, "bye")]


def test_many_small_sends_in_one_go_arrive_whole_and_in_order(net: Net) -> None:
    """Sends within one hub iteration travel together; each one arrives as sent."""
    a, b = net.node("a"), net.node("b")
    sent: list[Any] = []
    for i in range(5000):
        sent.append((i, f"s{i}", b"\x00" * (i % 17), {"k": [i, None, 1.5]}, -i))
    sent.insert(2500, b"x" * 1_000_000)  # one large signal among the small ones
    with a.attached() as me:
        fwd = b.spawn(forwarder, (me.pid,))
        api.send(fwd, "warm")
        assert recv() == ("fwd", fwd, "warm")
        for msg in sent:  # no yield: all of it leaves in the same iteration
            api.send(fwd, msg)
        assert [recv()[2] for _ in range(len(sent))] == sent


def test_nodeup_comes_before_a_sessions_first_signal_and_nodedown_after_its_last(
        net: Net) -> None:
    """A session's signals sit between its nodeup and its nodedown, never outside.

    What was in flight when a session ended may be lost, but only as a tail:
    what arrives of it arrives in order and before the nodedown.
    """
    a, b = net.node("a"), net.node("b")
    with a.attached() as me:
        my = me.pid
        api.monitor_nodes(True)

        def burst() -> None:
            api.receive()  # the session is up on both sides
            for i in range(1000):
                api.send(my, ("old", i))
            api.disconnect_node(my.node)
            for i in range(1000):
                api.send(my, ("new", i))

        api.send(b.spawn(burst), "go")
        got = [recv()]
        while got[-1] != ("new", 999):
            got.append(recv())
        down = got.index(("nodedown", b.name))
        old = got[1:down]
        assert got[0] == ("nodeup", b.name)
        assert old == [("old", i) for i in range(len(old))]
        assert got[down + 1:] == [("nodeup", b.name)] + [("new", i) for i in range(1000)]


# ------------------------------------------------------------ lost sessions


def test_a_crashed_node_gives_noconnection_to_links_and_monitors_and_nodedown(
        net: Net) -> None:
    a, b = net.node("a"), net.node("b")
    with a.attached():
        api.process_flag("trap_exit", True)
        api.monitor_nodes(True, info=True)
        linked, watched = b.spawn(idle), b.spawn(idle)
        api.link(linked)
        ref = api.monitor(watched)
        api.monitor_node(b.name, True)
        assert recv() == ("nodeup", b.name, {})
        net.crash(b)
        got = [recv() for _ in range(4)]
        assert sorted(got, key=repr) == sorted([
            ("EXIT", linked, "noconnection"),
            ("DOWN", ref, "process", watched, "noconnection"),
            ("nodedown", b.name),
            ("nodedown", b.name, {"nodedown_reason": "connection_closed"}),
        ], key=repr)
        assert a.nodes() == []


def test_a_call_pending_when_the_node_is_lost_exits_with_nodedown(net: Net) -> None:
    a, b = net.node("a"), net.node("b")
    with a.attached() as me:
        my = me.pid

        def server() -> None:
            api.receive()  # a call, never answered
            api.send(my, "called")
            api.receive()

        def caller(target: Pid) -> None:
            try:
                gen_server.call(target, "request", timeout=None)
            except CallExit as exc:
                api.send(my, ("call exit", exc.why))

        a.spawn(caller, (b.spawn(server),))
        assert recv() == "called"
        net.crash(b)
        assert recv() == ("call exit", ("nodedown", b.name))


def test_a_node_that_cannot_be_reached_gives_noconnection_and_nodedown(net: Net) -> None:
    a, b = net.node("a"), net.node("b")
    with a.attached():
        api.process_flag("trap_exit", True)
        linked, watched = b.spawn(idle), b.spawn(idle)
        net.crash(b)  # never connected: the first signal to it starts a setup that fails
        api.monitor_node(b.name, True)
        ref = api.monitor(watched)
        api.link(linked)
        got = [recv(10_000) for _ in range(3)]  # a connection setup gives up in time
        assert sorted(got, key=repr) == sorted([
            ("nodedown", b.name),
            ("DOWN", ref, "process", watched, "noconnection"),
            ("EXIT", linked, "noconnection"),
        ], key=repr)


def test_disconnect_node_gives_noconnection_on_both_sides(net: Net) -> None:
    a, b = net.node("a"), net.node("b")
    with a.attached() as me:
        my = me.pid
        api.process_flag("trap_exit", True)

        def remote() -> None:
            api.process_flag("trap_exit", True)
            api.link(my)
            ref = api.monitor(my)
            api.send(my, "ready")
            seen = {api.receive(5000), api.receive(5000)}
            api.send(my, ("remote saw", seen == {
                ("EXIT", my, "noconnection"), ("DOWN", ref, "process", my, "noconnection")}))

        pid = b.spawn(remote)
        ref = api.monitor(pid)
        assert recv() == "ready"
        assert api.disconnect_node(b.name) is True
        assert {recv(), recv()} == {
            ("EXIT", pid, "noconnection"), ("DOWN", ref, "process", pid, "noconnection")}
        assert recv() == ("remote saw", True)


def test_a_restarted_node_is_reachable_again_and_its_old_pids_are_dead(net: Net) -> None:
    a, b = net.node("a"), net.node("b")
    with a.attached() as me:
        my = me.pid
        api.process_flag("trap_exit", True)
        api.monitor_nodes(True)
        old = b.spawn(forwarder, (my,))
        api.send(old, "hello")
        assert recv() == ("nodeup", b.name)
        assert recv() == ("fwd", old, "hello")
        net.crash(b)
        assert recv() == ("nodedown", b.name)

        b2 = net.node("b")
        assert b2.name == b.name and b2.creation != b.creation
        assert a.ping(b.name) == "pong"
        assert recv() == ("nodeup", b.name)
        new = b2.spawn(forwarder, (my,))
        assert (new.node, new.serial) == (old.node, old.serial)  # only the creation differs
        api.send(old, "to the old one")
        api.send(new, "to the new one")
        assert recv() == ("fwd", new, "to the new one")  # nothing reached the old pid
        ref = api.monitor(old)
        assert recv() == ("DOWN", ref, "process", old, "noproc")
        api.link(old)
        assert recv() == ("EXIT", old, "noproc")
        api.send(new, "still only the new one")
        assert recv() == ("fwd", new, "still only the new one")


# ----------------------------------------------------------------- net tick


def test_a_peer_cut_off_by_a_partition_is_declared_down_by_the_net_tick(net: Net) -> None:
    a, b = net.node("a"), net.node("b")
    with a.attached() as me:
        api.process_flag("trap_exit", True)
        api.monitor_nodes(True, info=True)

        def watcher(test: Pid) -> None:
            api.process_flag("trap_exit", True)
            api.link(test)
            api.monitor_nodes(True, info=True)
            api.send(test, "watching")
            got = []
            while (m := api.receive()) != "report":  # asked for once the network is healed
                got.append(m)
            api.send(test, ("seen", [m for m in got if m[0] != "nodeup"]))

        pid = b.spawn(watcher, (me.pid,))
        assert recv() == ("nodeup", b.name, {})
        assert recv() == "watching"
        net.faults.partition([a.name], [b.name])
        timeout_ms = int(3 * net.tick.net_ticktime * 1000)
        got = [recv(timeout_ms), recv(timeout_ms)]
        assert sorted(got, key=repr) == sorted([
            ("nodedown", b.name, {"nodedown_reason": "net_tick_timeout"}),
            ("EXIT", pid, "noconnection"),
        ], key=repr)
        # the other side detects it the same way
        net.faults.heal()
        api.send(pid, "report")
        _, seen = recv(timeout_ms, lambda m: m[0] == "seen")
        assert sorted(seen, key=repr) == sorted([
            ("EXIT", me.pid, "noconnection"),
            ("nodedown", a.name, {"nodedown_reason": "net_tick_timeout"}),
        ], key=repr)


def test_a_paused_peer_is_declared_down_by_the_net_tick(net: Net) -> None:
    """A paused node sends nothing, ticks included: a stopped OS process."""
    a, b = net.node("a"), net.node("b")
    with a.attached():
        api.monitor_nodes(True, info=True)
        watched = b.spawn(idle)
        ref = api.monitor(watched)
        assert recv() == ("nodeup", b.name, {})
        net.faults.pause(b.name)
        timeout_ms = int(3 * net.tick.net_ticktime * 1000)
        got = [recv(timeout_ms), recv(timeout_ms)]
        net.faults.resume(b.name)
        assert sorted(got, key=repr) == sorted([
            ("nodedown", b.name, {"nodedown_reason": "net_tick_timeout"}),
            ("DOWN", ref, "process", watched, "noconnection"),
        ], key=repr)


# ---------------------------------------------------------- injected faults


def test_delayed_frames_keep_their_order(net: Net) -> None:
    a, b = net.node("a"), net.node("b")
    with a.attached() as me:
        fwd = b.spawn(forwarder, (me.pid,))
        api.send(fwd, "before")
        assert recv() == ("fwd", fwd, "before")
        net.faults.delay(a.name, b.name, 0.2)
        for i in range(500):
            api.send(fwd, i)
            if i % 50 == 0:
                api.sleep(1)  # several frames, each held back
        net.faults.delay(a.name, b.name, 0)  # later frames wait behind the delayed ones
        api.send(fwd, "after")
        got = [recv()[2] for _ in range(501)]
        assert got == [*range(500), "after"]


def test_a_short_pause_holds_frames_in_order_and_keeps_the_session(net: Net) -> None:
    """Shorter than the tick timeout: nothing is lost and nobody is declared down."""
    a, b = net.node("a"), net.node("b")
    with a.attached() as me:
        api.monitor_nodes(True)
        fwd = b.spawn(forwarder, (me.pid,))
        api.send(fwd, "before")
        assert recv() == ("nodeup", b.name)
        assert recv() == ("fwd", fwd, "before")
        net.faults.pause(a.name)
        for i in range(100):
            api.send(fwd, i)
        assert api.receive(int(net.tick.interval * 1000)) is api.TIMEOUT  # held meanwhile
        net.faults.resume(a.name)
        assert [recv() for _ in range(100)] == [("fwd", fwd, i) for i in range(100)]
        assert a.nodes() == [b.name]
