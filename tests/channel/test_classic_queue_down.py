"""A channel's consumers of a classic queue whose process was replaced.

A queue process that dies is restarted by its supervisor (or comes back with its
node) as a new process under the same record. The channel watches each process it
consumes from, and the ``DOWN`` of an old one can reach it late: after the channel
registered a consumer with the new process. That ``DOWN`` settles only what the
channel had on the process that died (``rabbit_channel``'s queue monitors are keyed
by pid), so it never cancels a consumer of the new one, and a delivery the channel
cannot place never bounces between queue and channel for ever.
"""

from __future__ import annotations

from typing import Any

import pytest

import actors
from actors import Node, gen_server
from actors.pid import Pid
from channel.protocol.framing import Content
from channel.queue_types.backend import Action, ConsumerCancelled, ConsumeSpec, Deliver, Message
from channel.queue_types.classic.classic_directory import ClassicRecord, LocalDirectory
from channel.queue_types.classic.classic_queue import ClassicBackend, ClassicSession
from classic import commands as c
from classic import effects as e
from classic.process import CLASSIC_EVENT
from classic.queue_sup import start_queue_sup


class LaggingDirectory(LocalDirectory):
    """A queue table read from a replica that has not yet seen a restarted queue take
    its record back: `lag` serves the record as it was, once."""

    def __init__(self) -> None:
        super().__init__()
        self.stale: dict[tuple[str, str], ClassicRecord] = {}

    def lag(self, record: ClassicRecord) -> None:
        self.stale[(record.vhost, record.name)] = record

    def lookup(self, vhost: str, name: str) -> ClassicRecord | None:
        stale = self.stale.pop((vhost, name), None)
        return stale if stale is not None else super().lookup(vhost, name)


@pytest.fixture
def backend(node: Node) -> ClassicBackend:
    with node.attached():
        result = start_queue_sup()
        assert result[0] == "ok", result
        actors.unlink(result[1])
    return ClassicBackend(node, directory=LaggingDirectory())


def _spec(tag: str) -> ConsumeSpec:
    return ConsumeSpec(tag, ack_required=True, prefetch=10)


def _declare(backend: ClassicBackend) -> tuple[ClassicSession, ClassicRecord]:
    """A channel (this process) and the durable queue `work` it declared."""
    actors.process_flag("trap_exit", True)
    session = backend.session(actors.self(), "/", actors.self(), "guest")
    session.declare("work", passive=False, durable=True, exclusive=False,
                    auto_delete=False, arguments={})
    record = backend.lookup("/", "work")
    assert record is not None
    return session, record


def _restart(backend: ClassicBackend, record: ClassicRecord) -> ClassicRecord:
    """Kill the queue's process and wait until its restarted one holds the record;
    the channel's ``DOWN`` for the old process stays in its mailbox, unread."""
    actors.exit(record.pid, "kill")
    for _ in range(500):
        now = backend.lookup("/", "work")
        if now is not None and now.pid != record.pid and actors.is_process_alive(now.pid):
            return now
        actors.sleep(10)
    raise AssertionError("the queue was not restarted")


def _late_down(old: Pid) -> Any:
    """The channel's ``DOWN`` for the old process, read now."""
    down = actors.receive(5000, match=lambda m: type(m) is tuple and len(m) == 5
                          and m[0] == "DOWN" and m[3] == old)
    assert down is not actors.TIMEOUT
    return down


def _next_event(session: ClassicSession) -> list[Action]:
    """What the channel makes of the next classic queue event in its mailbox."""
    msg = actors.receive(5000, match=lambda m: type(m) is tuple and len(m) == 5
                         and m[0] == CLASSIC_EVENT)
    assert msg is not actors.TIMEOUT
    actions = session.handle_event(msg)
    assert actions is not None
    return actions


def _deliveries(session: ClassicSession) -> list[Deliver]:
    for _ in range(20):
        delivered = [a for a in _next_event(session) if isinstance(a, Deliver)]
        if delivered:
            return delivered
    raise AssertionError("no delivery")


def _publish(session: ClassicSession) -> None:
    """One message to the queue ``work``, unconfirmed."""
    session.deliver(["work"], Message("", "work", Content.build(b"m"), ("work",)), None)


def _delivered_to(session: ClassicSession) -> list[tuple[str, Any]]:
    """Which consumer tag, on which queue process, each delivery that comes next is for."""
    return [(d.consumer_tag, d.deliveries[0].msg_id[0]) for d in _deliveries(session)]


def test_a_consume_that_reached_the_restarted_process_survives_the_old_ones_down(
        node: Node, backend: ClassicBackend) -> None:
    """The table still named the dead process when the channel consumed, the call was
    tried again on the restarted one: the consumer is the new process's, and the old
    process's late ``DOWN`` cancels only the consumer that died with it."""
    with node.attached():
        session, first = _declare(backend)
        session.consume("work", _spec("old"))
        second = _restart(backend, first)
        assert isinstance(backend.directory, LaggingDirectory)
        backend.directory.lag(first)
        session.consume("work", _spec("new"))

        actions = session.handle_event(_late_down(first.pid))
        assert actions is not None
        assert [a for a in actions if isinstance(a, ConsumerCancelled)] == [
            ConsumerCancelled("work", "old")]
        _publish(session)
        assert _delivered_to(session) == [("new", second.pid)]


def test_a_tag_cancelled_and_reused_after_a_restart_survives_the_old_processs_down(
        node: Node, backend: ClassicBackend) -> None:
    """A consumer the client cancels is taken off the process it was registered with,
    even once the queue's record names a restarted process; the same tag registered
    again on the new process is not cancelled by the old process's late ``DOWN``."""
    with node.attached():
        session, first = _declare(backend)
        session.consume("work", _spec("ctag"))
        second = _restart(backend, first)
        session.cancel("work", "ctag")
        session.consume("work", _spec("ctag"))

        actions = session.handle_event(_late_down(first.pid))
        assert actions is not None
        assert not [a for a in actions if isinstance(a, ConsumerCancelled)]
        _publish(session)
        assert _delivered_to(session) == [("ctag", second.pid)]


def test_a_delivery_to_a_consumer_the_channel_does_not_have_cancels_it_at_the_queue(
        node: Node, backend: ClassicBackend) -> None:
    """Should a queue ever hold a consumer of this channel that the channel does not
    have, its first delivery takes the consumer off the queue before the channel
    returns the messages, so they are not offered to it again and again."""
    with node.attached():
        session, record = _declare(backend)
        # the queue's own view: a consumer of this channel registered behind its back
        ghost = c.BasicConsume(actors.self(), "ghost", prefetch=10)
        assert gen_server.call(record.pid, ghost, 5000) == e.ConsumeOk("ghost")
        _publish(session)
        for delivery in _deliveries(session):
            # what the channel does with a delivery to a tag it has no consumer for
            session.settle("work", "requeue", delivery.consumer_tag,
                           [d.msg_id for d in delivery.deliveries])
        stat = session.declare("work", passive=True, durable=True, exclusive=False,
                               auto_delete=False, arguments={})
        assert (stat.message_count, stat.consumer_count) == (1, 0)


def test_a_get_that_reached_the_restarted_process_is_acked_there(
        node: Node, backend: ClassicBackend) -> None:
    """A ``basic.get`` tried again on the restarted process took its message from that
    process: the ack settles it there, and the queue holds nothing afterwards."""
    with node.attached():
        session, first = _declare(backend)
        second = _restart(backend, first)
        _publish(session)
        assert isinstance(backend.directory, LaggingDirectory)
        backend.directory.lag(first)
        got = session.get("work", ack_required=True, delivery_tag=1)
        assert got is not None
        session.settle("work", "complete", 1, [got.delivery.msg_id])
        info = gen_server.call(second.pid, ("info",), 5000)
        assert (info["messages_ready"], info["messages_unacknowledged"]) == (0, 0)
