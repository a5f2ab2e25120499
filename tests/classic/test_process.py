"""The classic queue process: the core run by a real actor under the node's queue supervisor.

Each test starts a node on a `ManualClock`, the node's queue supervisor, and
queue processes under it. The test body plays the channel (it receives the
queue's events in its mailbox) unless a test needs a channel that dies.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import actors
from actors import Node, gen_server
from actors.clock import ManualClock
from classic import QueueConfig
from classic import commands as c
from classic import effects as e
from classic.process import CLASSIC_EVENT, EOL, QueueEnv
from classic.queue_sup import QUEUE_SUP, start_queue, start_queue_sup
from supervision import supervisor

WAIT = 5000


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def node(clock: ManualClock) -> Iterator[Node]:
    n = Node("classic@127.0.0.1:1", clock=clock).start()
    yield n
    n.stop()


@pytest.fixture
def me(node: Node) -> Iterator[actors.Process]:
    with node.attached() as proc:
        actors.process_flag("trap_exit", True)
        assert start_queue_sup()[0] == "ok"
        yield proc


def reporting_env() -> QueueEnv:
    """Dead letters and deletions reported to the test process as messages."""
    test = actors.self()
    return QueueEnv(dead_letter=lambda dl: actors.send(test, ("dead_letter", dl)),
                    on_deleted=lambda cfg, d: actors.send(test, ("deleted", cfg.name, d)))


def start(env: QueueEnv | None = None, **config: Any) -> Any:
    config.setdefault("name", "q")
    result = start_queue(None, QueueConfig(**config), env or reporting_env())
    assert result[0] == "ok", result
    return result[1]


def publish(q: Any, seq: int, body: str, channel: Any = None, **kw: Any) -> None:
    gen_server.cast(q, c.Deliver(channel or actors.self(), seq, "ex", ("rk",), len(body),
                                 content=body, **kw))


def event(kind: type | str) -> Any:
    """The next queue event of this kind sent to the test process."""
    msg = actors.receive(WAIT, match=lambda m: type(m) is tuple and len(m) == 5
                         and m[0] == CLASSIC_EVENT
                         and (m[4] == kind if isinstance(kind, str) else type(m[4]) is kind))
    assert msg is not actors.TIMEOUT, f"no {kind} event"
    return msg[4]


def message(tag: str) -> Any:
    msg = actors.receive(WAIT, match=lambda m: type(m) is tuple and m[0] == tag)
    assert msg is not actors.TIMEOUT, f"no {tag} message"
    return msg


def info(q: Any) -> dict[str, Any]:
    return gen_server.call(q, ("info",))


def wait_exit(pid_or_ref: Any) -> Any:
    """The exit reason of a process, by pid or by a monitor taken earlier."""
    ref = pid_or_ref if isinstance(pid_or_ref, actors.Ref) else actors.monitor(pid_or_ref)
    down = actors.receive(WAIT, match=lambda m: type(m) is tuple and m[:2] == ("DOWN", ref))
    assert down is not actors.TIMEOUT
    return down[4]


def test_publish_consume_ack_through_the_process(me: actors.Process) -> None:
    q = start()
    publish(q, 1, "a")
    publish(q, 2, "b")
    assert event(e.Confirm).seqs == (1,)
    assert event(e.Confirm).seqs == (2,)
    assert gen_server.call(q, c.BasicConsume(me.pid, "ctag", prefetch=10)) == e.ConsumeOk("ctag")
    first, second = event(e.Deliver), event(e.Deliver)
    delivered = [d for ev in (first, second) for d in ev.messages]
    assert [d.content for d in delivered] == ["a", "b"]
    assert info(q)["messages_unacknowledged"] == 2
    gen_server.cast(q, c.Ack(me.pid, tuple(d.msg_id for d in delivered)))
    assert info(q) == {"messages_ready": 0, "messages_unacknowledged": 0, "messages": 0,
                       "consumers": 1, "message_bytes": 0}


def test_a_channel_going_down_returns_its_unacked_messages_in_order(
        me: actors.Process) -> None:
    q = start()
    for seq, body in enumerate("abc", 1):
        publish(q, seq, body)

    def channel() -> None:
        gen_server.call(q, c.BasicConsume(actors.self(), "ctag", prefetch=10))
        while True:  # holds its deliveries unacked until killed
            actors.receive()

    ch = actors.spawn(channel)
    assert actors.is_process_alive(ch)
    while info(q)["messages_unacknowledged"] < 3:
        actors.sleep(1)  # the channel's consume runs in its own process
    actors.exit(ch, "kill")
    wait_exit(ch)
    assert info(q)["consumers"] == 0
    got = [gen_server.call(q, c.BasicGet(me.pid, ack_required=False)) for _ in range(3)]
    assert [(g.delivery.content, g.delivery.redelivered) for g in got] == [
        ("a", True), ("b", True), ("c", True)]


def test_the_owner_going_down_deletes_an_exclusive_queue(me: actors.Process) -> None:
    owner = actors.spawn(lambda: actors.receive())
    q = start(name="excl", exclusive_owner=owner, durable=False)
    publish(q, 1, "a")
    assert event(e.Confirm).seqs == (1,)
    watch = actors.monitor(q)
    actors.exit(owner, "kill")
    assert wait_exit(watch) == "normal"
    assert message("deleted")[1:] == ("excl", e.Deleted("owner_down", 1))


def test_consumers_are_cancelled_and_told_the_queue_is_gone_on_delete(
        me: actors.Process) -> None:
    q = start()
    assert gen_server.call(q, c.BasicConsume(me.pid, "ctag")) == e.ConsumeOk("ctag")
    watch = actors.monitor(q)
    assert gen_server.call(q, c.Delete()) == e.Ok(message_count=0)
    assert event(e.CancelConsumer) == e.CancelConsumer(me.pid, "ctag")
    assert event(EOL) == EOL
    assert wait_exit(watch) == "normal"


def test_message_ttl_expires_on_the_node_clock(me: actors.Process, clock: ManualClock) -> None:
    q = start(message_ttl=1000, dead_letter_exchange="dlx")
    publish(q, 1, "a")
    assert info(q)["messages_ready"] == 1
    clock.advance(999)
    assert info(q)["messages_ready"] == 1
    clock.advance(1)
    dead = message("dead_letter")[1]
    assert (dead.reason, [m.content for m in dead.messages]) == ("expired", ["a"])
    assert info(q)["messages_ready"] == 0


def test_an_unused_queue_expires_on_the_node_clock(me: actors.Process,
                                                   clock: ManualClock) -> None:
    q = start(expires=5000)
    watch = actors.monitor(q)
    clock.advance(4999)
    assert gen_server.call(q, ("info",))["consumers"] == 0
    clock.advance(1)
    assert wait_exit(watch) == "normal"
    assert message("deleted")[1:] == ("q", e.Deleted("expired", 0))


def _queue_pid(sup: Any) -> Any:
    """The queue process under the node's one per-queue supervisor."""
    (_id, queue_sup, _type, _mods), = supervisor.which_children(sup)
    (_id, pid, _type, _mods), = supervisor.which_children(queue_sup)
    return pid


def restarting_env(recovered: tuple[e.Delivery, ...] | None) -> QueueEnv:
    """A node that answers a crash restart with `recovered` and tells the test."""
    test = actors.self()

    def on_restart(config: QueueConfig, _store: Any) -> tuple[e.Delivery, ...] | None:
        actors.send(test, ("restarted", config.name, actors.self()))
        return recovered

    return QueueEnv(on_restart=on_restart)


def test_a_crashed_queue_process_is_restarted_with_what_the_node_recovers(
        me: actors.Process) -> None:
    stored = e.Delivery(1, True, "ex", ("rk",), 1, True, 0, None, "a")
    q = start(restarting_env((stored,)), durable=True)
    watch = actors.monitor(q)
    actors.exit(q, "kill")
    assert wait_exit(watch) == "killed"
    _, name, q2 = message("restarted")
    assert name == "q" and q2 != q
    assert _queue_pid(actors.whereis(QUEUE_SUP)) == q2
    reply = gen_server.call(q2, c.BasicGet(me.pid, ack_required=False))
    assert isinstance(reply, e.GetOk) and reply.delivery.content == "a"
    assert reply.delivery.redelivered


def test_a_queue_the_node_does_not_take_back_after_a_crash_stops_with_its_supervisor(
        me: actors.Process) -> None:
    q = start(restarting_env(None))
    sup = actors.whereis(QUEUE_SUP)
    watch = actors.monitor(supervisor.which_children(sup)[0][1])
    actors.exit(q, "kill")
    message("restarted")
    assert wait_exit(watch) == "shutdown"
    assert supervisor.count_children(sup)["active"] == 0


def test_a_queue_that_ends_normally_is_not_restarted(me: actors.Process) -> None:
    q = start()
    sup = actors.whereis(QUEUE_SUP)
    assert supervisor.count_children(sup)["active"] == 1
    queue_sup = supervisor.which_children(sup)[0][1]
    watch = actors.monitor(queue_sup)
    gen_server.call(q, c.Delete())
    wait_exit(q)
    assert wait_exit(watch) == "shutdown"
    assert supervisor.count_children(sup)["active"] == 0



def linked_to(q: Any) -> Any:
    """A process linked to queue process `q`, waiting to be told how to end."""
    def body() -> None:
        actors.link(q)
        actors.send(test, ("linked", actors.self()))
        how = actors.receive()
        actors.exit(how)  # ends this process with that reason

    test = actors.self()
    pid = actors.spawn(body)
    message("linked")
    return pid


def test_a_killed_linked_process_crashes_the_queue_and_its_supervisor_restarts_it(
        me: actors.Process) -> None:
    stored = e.Delivery(1, True, "ex", ("rk",), 1, True, 0, None, "a")
    q = start(restarting_env((stored,)), durable=True)
    assert gen_server.call(q, c.BasicConsume(me.pid, "ctag")) == e.ConsumeOk("ctag")
    watch = actors.monitor(q)
    actors.exit(linked_to(q), "kill")
    # rabbit_amqqueue_process: handle_info({'EXIT', _, Reason}) -> {stop, Reason, State}
    assert wait_exit(watch) == "killed"
    _, name, q2 = message("restarted")
    assert name == "q" and q2 != q
    assert _queue_pid(actors.whereis(QUEUE_SUP)) == q2
    assert info(q2)["consumers"] == 0  # the consumer went with the crashed process
    reply = gen_server.call(q2, c.BasicGet(me.pid, ack_required=False))
    assert isinstance(reply, e.GetOk) and reply.delivery.content == "a"


@pytest.mark.parametrize("reason", ["shutdown", ("shutdown", "why")])
def test_a_linked_process_shutting_down_stops_the_queue_for_good(
        me: actors.Process, reason: Any) -> None:
    q = start(restarting_env(()))
    sup = actors.whereis(QUEUE_SUP)
    watch, queue_sup = actors.monitor(q), supervisor.which_children(sup)[0][1]
    watch_sup = actors.monitor(queue_sup)
    actors.send(linked_to(q), reason)
    assert wait_exit(watch) == reason
    assert wait_exit(watch_sup) == "shutdown"  # intrinsic: not restarted
    assert supervisor.count_children(sup)["active"] == 0
    assert actors.receive(0, match=lambda m: type(m) is tuple and m[0] == "restarted") \
        is actors.TIMEOUT


def test_a_linked_process_ending_normally_ends_the_queue_as_a_deletion(
        me: actors.Process) -> None:
    q = start()
    publish(q, 1, "a")
    assert event(e.Confirm).seqs == (1,)
    assert gen_server.call(q, c.BasicConsume(me.pid, "ctag")) == e.ConsumeOk("ctag")
    sup = actors.whereis(QUEUE_SUP)
    watch, watch_sup = actors.monitor(q), actors.monitor(supervisor.which_children(sup)[0][1])
    actors.send(linked_to(q), "normal")
    assert wait_exit(watch) == "normal"  # upstream's terminate(normal): the delete case
    assert event(e.CancelConsumer) == e.CancelConsumer(me.pid, "ctag")
    assert event(EOL) == EOL
    assert message("deleted")[1:] == ("q", e.Deleted("delete", 0))  # "a" was delivered
    assert wait_exit(watch_sup) == "shutdown"
    assert supervisor.count_children(sup)["active"] == 0
