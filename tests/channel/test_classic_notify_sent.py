"""How a channel tells a classic queue that its deliveries reached the writer.

A classic queue stops delivering to a channel 200 deliveries ahead of what the
channel has handed to its writer. The channel does not say so after every delivery:
as ``rabbit_amqqueue_common:notify_sent`` does, it tells each queue process once per
50 deliveries (one ``notify_sent`` for 50), so a busy consumer costs its queue one
command per 50 messages instead of one per message.
"""

from __future__ import annotations

from typing import Any

import actors
from actors import Node
from channel.queue_types.classic.classic_queue import (
    NOTIFY_SENT_EVERY,
    ClassicBackend,
    ClassicSession,
)
from classic import commands as c
from classic import effects as e
from classic.process import CLASSIC_EVENT, EOL


def _deliver(queue: Any, channel: Any, msg_id: int) -> Any:
    delivery = e.Delivery(msg_id, False, "", ("q",), 1, False, 0, None, b"x")
    return (CLASSIC_EVENT, "/", "q", queue, e.Deliver(channel, "ctag", True, (delivery,)))


def _session(node: Node, queue: Any) -> ClassicSession:
    """Channel ``channel-1``'s session, consuming from `queue` as ``ctag``."""
    session = ClassicSession(ClassicBackend(node), "channel-1", "/", None)
    session.consuming[queue] = {"ctag"}
    return session


def _notify_sent(timeout_ms: int = 200) -> list[c.NotifySent]:
    """Every notify_sent cast waiting in this process's mailbox."""
    out: list[c.NotifySent] = []
    while True:
        msg = actors.receive(timeout_ms, match=lambda m: type(m) is tuple and len(m) == 2
                             and m[0] == "$gen_cast" and isinstance(m[1], c.NotifySent))
        if msg is actors.TIMEOUT:
            return out
        out.append(msg[1])


def test_a_channel_tells_a_queue_of_its_sent_deliveries_once_per_fifty(node: Node) -> None:
    assert NOTIFY_SENT_EVERY == 50
    with node.attached():
        queue = actors.self()  # plays the queue process: the casts come here
        session = _session(node, queue)
        for msg_id in range(1, 121):
            session.handle_event(_deliver(queue, "channel-1", msg_id))
        assert _notify_sent() == [c.NotifySent("channel-1", 50)] * 2
        for msg_id in range(121, 151):
            session.handle_event(_deliver(queue, "channel-1", msg_id))
        assert _notify_sent() == [c.NotifySent("channel-1", 50)]


def test_a_deleted_queue_is_forgotten_with_the_deliveries_not_told(node: Node) -> None:
    with node.attached():
        queue = actors.self()
        session = _session(node, queue)
        for msg_id in range(1, 41):
            session.handle_event(_deliver(queue, "channel-1", msg_id))
        session.handle_event((CLASSIC_EVENT, "/", "q", queue, EOL))
        assert session.sent_to == {}
        assert _notify_sent() == []
