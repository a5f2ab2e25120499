"""The ranked mailbox of a classic queue process: what ``gen_server2``'s drain into a
priority queue gives ``rabbit_amqqueue_process`` (acks, then ``notify_sent``, then
publishes and the rest, each rank in arrival order), and the selective receives a
process makes (a call's reply, a flushed ``DOWN``) finding their message wherever it
waits."""

from __future__ import annotations

from typing import Any

import gevent

from actors.ranked_mailbox import RankedMailbox
from actors.runtime_gevent import EMPTY, Mailbox
from classic import commands as c
from classic.process import FLOW, RANKS, _rank

CH = "ch"


def _publish(seq: int) -> Any:
    return ("$gen_cast", (FLOW, c.Deliver(CH, seq, "ex", ("rk",), 1)))


def _ack(msg_id: int) -> Any:
    return ("$gen_cast", c.Ack(CH, (msg_id,)))


def _sent(count: int) -> Any:
    return ("$gen_cast", c.NotifySent(CH, count))


def _drain(box: Mailbox) -> list[Any]:
    out = []
    while (item := box.get(0)) is not EMPTY:
        out.append(item)
    return out


def test_acks_then_notify_sent_then_the_rest_each_in_arrival_order() -> None:
    box = RankedMailbox(_rank, RANKS)
    arrivals = [_publish(1), _sent(50), _ack(1), ("DOWN", "ref", "process", "p", "x"),
                _publish(2), _ack(2), _sent(50)]
    for item in arrivals:
        box.put(item)
    assert len(box) == 7 and not box.empty()
    assert list(box) == [_ack(1), _ack(2), _sent(50), _sent(50), _publish(1),
                         ("DOWN", "ref", "process", "p", "x"), _publish(2)]
    assert _drain(box) == [_ack(1), _ack(2), _sent(50), _sent(50), _publish(1),
                           ("DOWN", "ref", "process", "p", "x"), _publish(2)]
    assert box.empty()


def test_taking_over_a_mailbox_ranks_what_waits_in_it() -> None:
    old = Mailbox()
    for item in (_publish(1), _ack(1), _publish(2)):
        old.put(item)
    box = RankedMailbox.replacing(old, _rank, RANKS)
    assert old.empty()
    assert _drain(box) == [_ack(1), _publish(1), _publish(2)]


def test_selective_receives_find_their_message_in_any_lane() -> None:
    box = RankedMailbox(_rank, RANKS)
    for item in (_publish(1), _ack(1), ("reply", 7), _sent(50)):
        box.put(item)
    assert box.take_first(lambda m: m[0] == "reply", 0) == ("reply", 7)
    assert box.remove_first(lambda m: m == _ack(1)) == _ack(1)
    assert box.take_all(lambda m: m[0] == "$gen_cast") == [_sent(50), _publish(1)]
    assert box.take_first(lambda m: True, 0) is EMPTY
    box.put(_ack(2))
    box.clear()
    assert box.empty()


def test_a_waiting_receiver_is_woken_by_a_ranked_message() -> None:
    box = RankedMailbox(_rank, RANKS)
    got: list[Any] = []
    waiter = gevent.spawn(lambda: got.append(box.get(5.0)))
    gevent.sleep(0)
    box.put(_ack(3))
    waiter.join(5.0)
    assert got == [_ack(3)]
