"""basic.get, ack, reject/nack with and without requeue, recover: a requeued
message goes back to its original position and comes back redelivered."""

from __future__ import annotations

from classic import commands as c
from classic import effects as e

from .helpers import CH1, CH2, PUB, Q, dead, delivered, labels


def test_get_reports_ready_messages_left_then_get_empty() -> None:
    q = Q()
    q.publish_all("m1", "m2", "m3")
    counts = []
    for _ in range(3):
        reply, _ = q.do(c.BasicGet(CH1))
        assert isinstance(reply, e.GetOk)
        counts.append((reply.delivery.content, reply.message_count))
    assert counts == [("m1", 2), ("m2", 1), ("m3", 0)]
    assert q.do(c.BasicGet(CH1)) == (e.GetEmpty(), [])
    assert q.queue.messages_unacknowledged == 3


def test_get_with_ack_required_monitors_the_channel_and_no_ack_settles() -> None:
    q = Q()
    q.publish_all("m1", "m2")
    assert q.do(c.BasicGet(CH1))[1] == [e.Monitor(CH1)]
    assert q.do(c.BasicGet(CH2, ack_required=False))[1] == []
    assert q.queue.messages == 1


def test_nacked_messages_return_to_their_original_positions_before_later_ones() -> None:
    q = Q()
    q.publish_all("m1", "m2", "m3", "m4", "m5", confirm=False)
    q.consume(CH1, "t", prefetch=5)
    q.publish("m6", confirm=False)
    assert q.ready() == ["m6"]
    q.do(c.BasicCancel(CH1, "t"))
    q.do(c.Reject(CH1, q.ids("m2", "m4"), requeue=True))
    assert q.ready() == ["m2", "m4", "m6"]
    q.consume(CH2, "u")
    assert q.queue.messages_ready == 0
    q2 = Q()
    q2.publish_all("m1", "m2", "m3", "m4", "m5", confirm=False)
    q2.consume(CH1, "t", prefetch=5)
    q2.publish("m6", confirm=False)
    _, effects = q2.do(c.Reject(CH1, q2.ids("m2", "m4"), requeue=True))
    assert delivered(effects) == [(CH1, "t", "m2", True), (CH1, "t", "m4", True)]


def test_requeue_order_does_not_depend_on_the_order_of_the_settle() -> None:
    q = Q()
    q.publish_all("m1", "m2", "m3", "m4", confirm=False)
    for _ in range(3):
        q.do(c.BasicGet(CH1))
    q.do(c.Reject(CH1, q.ids("m3"), requeue=True))
    q.do(c.Reject(CH1, q.ids("m1"), requeue=True))
    assert q.ready() == ["m1", "m3", "m4"]


def test_reject_without_requeue_dead_letters_rejected_or_drops() -> None:
    q = Q(dead_letter_exchange="dlx", dead_letter_routing_key="dead")
    q.now = 1000
    q.publish("m1")
    q.do(c.BasicGet(CH1))
    _, effects = q.do(c.Reject(CH1, q.ids("m1"), requeue=False))
    (dl,) = [x for x in effects if isinstance(x, e.DeadLetter)]
    assert (dl.reason, dl.queue, dl.vhost, dl.time, dl.exchange, dl.routing_key) == (
        "rejected", "q", "/", 1000, "dlx", "dead")
    assert dl.messages[0].exchange == "ex" and dl.messages[0].routing_keys == ("rk",)
    assert dl.messages[0].redelivered is True
    plain = Q()
    plain.publish("m1")
    plain.do(c.BasicGet(CH1))
    _, effects = plain.do(c.Reject(CH1, plain.ids("m1"), requeue=False))
    assert dead(effects) == [] and plain.queue.messages == 0


def test_unknown_or_foreign_message_ids_are_ignored() -> None:
    q = Q()
    q.publish("m1")
    q.do(c.BasicGet(CH1))
    assert q.do(c.Ack(CH2, q.ids("m1"))) == (e.Ok(), [])
    assert q.do(c.Ack(CH1, (99,))) == (e.Ok(), [])
    assert q.queue.messages_unacknowledged == 1


def test_recover_requeues_every_unacked_message_of_the_channel() -> None:
    q = Q()
    q.publish_all("m1", "m2", "m3")
    q.consume(CH1, "t", prefetch=2)
    q.do(c.BasicGet(CH2))
    _, effects = q.do(c.Recover(CH1))
    assert delivered(effects) == [(CH1, "t", "m1", True), (CH1, "t", "m2", True)]
    assert q.queue.messages_unacknowledged == 3


def test_channel_down_requeues_consumer_and_get_messages_in_order() -> None:
    q = Q()
    q.publish_all("m1", "m2", "m3", "m4")
    q.do(c.BasicGet(CH1))
    q.consume(CH1, "t", prefetch=2)
    assert q.ready() == ["m4"]
    assert q.do(c.NotifyDown(CH1)) == (e.Ok(), [])
    assert q.ready() == ["m1", "m2", "m3", "m4"]
    reply, _ = q.do(c.BasicGet(CH2))
    assert isinstance(reply, e.GetOk) and reply.delivery.redelivered


def test_ack_removes_and_confirms_nothing_more() -> None:
    q = Q()
    q.consume(CH1, "t")
    _, effects = q.publish("m1")
    assert labels(effects) == ["m1"] and effects[-1] == e.Confirm(PUB, (1,))
    assert q.do(c.Ack(CH1, q.ids("m1"))) == (e.Ok(), [])
    assert q.queue.messages == 0
