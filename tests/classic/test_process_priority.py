"""Acks and ``notify_sent`` overtake waiting publishes in a queue process's mailbox.

A publisher with credit can keep hundreds of publishes waiting in a classic queue's
mailbox. RabbitMQ's queue process ranks an ack (and, while its consumers lag, a
``notify_sent``) above a publish (``prioritise_cast``), so a consumer is not held
back behind them. A warren queue process ranks each message as it arrives
(`actors.ranked_mailbox`): acks first, then ``notify_sent``, then the rest, each
rank in arrival order.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import actors
from actors import Node, gen_server
from actors.clock import ManualClock
from classic import commands as c
from classic import effects as e
from classic.process import FLOW
from classic.queue_sup import start_queue_sup
from tests.classic.test_process import event, start


@pytest.fixture
def me() -> Iterator[actors.Process]:
    node = Node("classic@127.0.0.1:1", clock=ManualClock()).start()
    try:
        with node.attached() as proc:
            actors.process_flag("trap_exit", True)
            assert start_queue_sup()[0] == "ok"
            yield proc
    finally:
        node.stop()


def _flow_publish(q: Any, seq: int, body: str) -> None:
    gen_server.cast(q, (FLOW, c.Deliver(actors.self(), seq, "ex", ("rk",), len(body),
                                        content=body)))


def _events_in_order(count: int) -> list[Any]:
    return [actors.receive(5000, match=lambda m: type(m) is tuple and len(m) == 5
                           and isinstance(m[4], (e.Confirm, e.Deliver)))[4]
            for _ in range(count)]


def test_an_ack_behind_many_publishes_is_taken_before_them(me: actors.Process) -> None:
    q = start()
    assert gen_server.call(q, c.BasicConsume(me.pid, "ctag", prefetch=1)) == e.ConsumeOk("ctag")
    _flow_publish(q, 1, "first")
    assert event(e.Confirm).seqs == (1,)
    (held,) = event(e.Deliver).messages
    # without yielding, so that all of it waits in the queue's mailbox at once
    for seq in range(2, 72):
        _flow_publish(q, seq, f"m{seq}")
    gen_server.cast(q, c.Ack(me.pid, (held.msg_id,)))
    seen = _events_in_order(71)
    confirmed = [x.seqs[0] for x in seen if isinstance(x, e.Confirm)]
    assert confirmed == list(range(2, 72))
    (at,) = [i for i, x in enumerate(seen) if isinstance(x, e.Deliver)]
    # the ack freed the consumer before any of the waiting publishes was handled: the
    # first of them went straight to it
    assert at == 0
    assert seen[at].messages[0].content == "m2"

