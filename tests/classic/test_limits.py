"""Message TTL (expiry only at the head), length limits with drop-head, and
priority queues."""

from __future__ import annotations

from classic import QueueConfig
from classic import commands as c
from classic import effects as e

from .helpers import CH1, PUB, Q, confirms, dead, labels


def test_expired_messages_leave_only_from_the_head() -> None:
    q = Q()
    q.publish("A", expiration=10_000)
    q.publish("B", expiration=100)
    assert q.queue.message_expiry_deadline() == 10_000
    q.now = 500
    assert q.do(c.Tick()) == (e.Ok(), [])
    assert q.queue.messages == 2
    reply, _ = q.do(c.BasicGet(CH1))
    assert isinstance(reply, e.GetOk) and reply.delivery.content == "A"
    assert reply.message_count == 0 and q.queue.messages_ready == 0


def test_expiry_is_the_minimum_of_queue_ttl_and_message_expiration() -> None:
    q = Q(message_ttl=1000, dead_letter_exchange="dlx")
    q.publish("short", expiration=50)
    q.publish("long", expiration=5000)
    assert [x.expires_at for x in q.queue.ready] == [50, 1000]
    q.now = 1000
    _, effects = q.do(c.Tick())
    assert dead(effects) == [("expired", "short"), ("expired", "long")]
    (dl,) = [x for x in effects if isinstance(x, e.DeadLetter)]
    assert dl.time == 1000 and dl.messages[0].expiration == 50


def test_requeued_message_keeps_its_expiry() -> None:
    q = Q(message_ttl=100)
    q.publish("m1")
    q.do(c.BasicGet(CH1))
    q.now = 200
    _, effects = q.do(c.Reject(CH1, q.ids("m1"), requeue=True))
    assert q.queue.messages == 0 and dead(effects) == []


def test_ttl_zero_delivers_to_a_ready_consumer_else_drops_and_confirms() -> None:
    q = Q(message_ttl=0)
    assert q.publish("m1")[1] == [e.Confirm(PUB, (1,))]
    assert q.queue.messages == 0
    q.consume(CH1, "t")
    assert labels(q.publish("m2")[1]) == ["m2"]


def test_ttl_zero_with_a_dlx_dead_letters_expired() -> None:
    q = Q(message_ttl=0, dead_letter_exchange="dlx")
    _, effects = q.publish("m1")
    assert dead(effects) == [("expired", "m1")] and confirms(effects) == [1]


def test_drop_head_keeps_the_newest_messages_and_confirms_all() -> None:
    q = Q(max_length=2, dead_letter_exchange="dlx")
    out = []
    for m in ("m1", "m2", "m3"):
        _, effects = q.publish(m)
        out += confirms(effects)
        if m == "m3":
            assert dead(effects) == [("maxlen", "m1")]
    assert out == [1, 2, 3] and q.ready() == ["m2", "m3"]


def test_drop_head_by_bytes_after_a_requeue() -> None:
    q = Q(max_length_bytes=10)
    q.publish("a", size=6)
    q.do(c.BasicGet(CH1))
    q.publish("b", size=6)
    q.do(c.Reject(CH1, q.ids("a"), requeue=True))
    assert q.ready() == ["b"]


def test_unacked_messages_do_not_count_towards_the_length_limit() -> None:
    q = Q(max_length=1, overflow="reject-publish")
    q.publish("m1")
    q.do(c.BasicGet(CH1))
    assert confirms(q.publish("m2")[1]) == [2]
    q.do(c.Reject(CH1, q.ids("m1"), requeue=True))  # a requeue is never refused
    assert q.ready() == ["m1", "m2"]


def test_priority_queue_delivers_higher_priority_first_fifo_within_a_level() -> None:
    q = Q(max_priority=5)
    for label, prio in (("p1", 1), ("p9", 9), ("p3", 3), ("p3b", 3), ("none", None)):
        q.publish(label, priority=prio)
    assert q.ready() == ["p9", "p3", "p3b", "p1", "none"]
    assert [x.priority for x in q.queue.ready] == [5, 3, 3, 1, 0]


def test_max_priority_zero_behaves_like_one_and_no_max_means_one_level() -> None:
    assert QueueConfig("q", max_priority=0).clamp_priority(7) == 1
    assert QueueConfig("q").clamp_priority(7) == 0
    q = Q()
    q.publish_all("a", "b")
    q.publish("c", priority=9)
    assert q.ready() == ["a", "b", "c"]


def test_priority_requeue_returns_to_its_level_and_drop_head_takes_the_top_level() -> None:
    q = Q(max_priority=2, max_length=2)
    q.publish("low", priority=0)
    q.publish("high", priority=2)
    q.do(c.BasicGet(CH1))
    q.publish("low2", priority=0)
    _, effects = q.do(c.Reject(CH1, q.ids("high"), requeue=True))
    assert q.ready() == ["low", "low2"]  # the requeued high message was the head and dropped
    assert effects == [e.Demonitor(CH1)]
