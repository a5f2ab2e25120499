"""Enqueue and publisher confirms: which confirm is due when, and the nack of an
overflow refusal."""

from __future__ import annotations

from classic import commands as c
from classic import effects as e

from .helpers import CH1, PUB, Q, confirms, dead


def test_transient_message_is_confirmed_at_once_and_gets_the_next_id() -> None:
    q = Q()
    reply, effects = q.publish("m1")
    assert reply == e.Ok()
    assert effects == [e.Confirm(PUB, (1,))]
    q.publish("m2")
    assert q.ids("m1", "m2") == (1, 2)
    assert q.ready() == ["m1", "m2"]


def test_publish_without_confirm_mode_emits_no_confirm() -> None:
    q = Q()
    assert q.publish("m1", confirm=False) == (e.Ok(), [])


def test_persistent_message_in_a_durable_queue_is_confirmed_once_written() -> None:
    q = Q(durable=True)
    _, effects = q.publish("m1", persistent=True)
    assert [type(x) for x in effects] == [e.StoreWrite]
    assert effects[0].messages[0].msg_id == 1
    assert q.do(c.Written((1,))) == (e.Ok(), [e.Confirm(PUB, (1,))])
    assert q.do(c.Written((1,))) == (e.Ok(), [])


def test_persistent_message_in_a_transient_or_exclusive_queue_is_confirmed_at_once() -> None:
    for q in (Q(durable=False), Q(durable=True, exclusive_owner="conn")):
        assert q.publish("m1", persistent=True)[1] == [e.Confirm(PUB, (1,))]


def test_message_acked_before_it_is_written_is_confirmed_with_the_ack() -> None:
    q = Q()
    q.consume(CH1, "t")
    q.publish("m1", persistent=True)
    _, effects = q.do(c.Ack(CH1, (1,)))
    assert effects == [e.StoreRemove((1,)), e.Confirm(PUB, (1,))]
    assert q.do(c.Written((1,))) == (e.Ok(), [])


def test_confirms_of_one_command_are_batched_per_channel() -> None:
    q = Q()
    q.publish("m1", persistent=True)
    q.publish("m2", persistent=True)
    assert q.do(c.Written((1, 2)))[1] == [e.Confirm(PUB, (1, 2))]


def test_deleting_the_queue_acks_pending_confirms() -> None:
    q = Q()
    q.publish("m1", persistent=True)
    reply, effects = q.do(c.Delete())
    assert reply == e.Ok(message_count=1)
    assert effects == [e.Confirm(PUB, (1,)), e.Deleted("delete", 1)]


def test_reject_publish_nacks_even_with_a_consumer_waiting() -> None:
    q = Q(max_length=1, overflow="reject-publish")
    q.publish("m1")
    q.consume(CH1, "t", prefetch=1)  # takes m1, queue empty again
    q.publish("m2")                   # consumer full: m2 is ready
    reply, effects = q.publish("m3")
    assert (reply, effects) == (e.Ok(), [e.RejectPublish(PUB, 3)])
    assert q.ready() == ["m2"]


def test_reject_publish_without_confirms_drops_silently() -> None:
    q = Q(max_length=0, overflow="reject-publish")
    assert q.publish("m1", confirm=False) == (e.Ok(), [])
    assert q.queue.messages == 0


def test_reject_publish_dlx_nacks_and_dead_letters_maxlen() -> None:
    q = Q(max_length=1, overflow="reject-publish-dlx", dead_letter_exchange="dlx")
    q.publish("m1")
    _, effects = q.publish("m2")
    assert effects[0] == e.RejectPublish(PUB, 2)
    assert dead(effects) == [("maxlen", "m2")]
    assert confirms(effects) == []


def test_max_length_bytes_counts_bodies_for_reject_publish() -> None:
    q = Q(max_length_bytes=10, overflow="reject-publish")
    q.publish("a", size=6)
    assert q.publish("b", size=4)[1] == [e.Confirm(PUB, (2,))]
    assert q.publish("c", size=1)[1] == [e.RejectPublish(PUB, 3)]


def test_reject_publish_refuses_at_max_length_zero_with_a_ready_consumer() -> None:
    q = Q(max_length=0, overflow="reject-publish")
    q.consume(CH1, "t")
    assert q.publish("m1") == (e.Ok(), [e.RejectPublish(PUB, 1)])


def test_drop_head_at_max_length_zero_delivers_only_to_a_ready_consumer() -> None:
    q = Q(max_length=0, dead_letter_exchange="dlx")
    _, effects = q.publish("m1")
    assert dead(effects) == [("maxlen", "m1")] and confirms(effects) == [1]
    q.consume(CH1, "t")
    _, effects = q.publish("m2")
    assert [type(x) for x in effects] == [e.Deliver, e.Confirm]
