"""Consumers: round robin, prefetch, priorities, single active consumer,
exclusive consume, cancel, channel DOWN, global qos and writer back-pressure."""

from __future__ import annotations

from classic import commands as c
from classic import effects as e
from classic.consumers import UNSENT_MESSAGE_LIMIT

from .helpers import CH1, CH2, Q, delivered, labels

RS = "queue 'q' in vhost '/'"


def test_consume_ok_monitors_the_channel_then_delivers_ready_messages() -> None:
    q = Q()
    q.publish_all("m1", "m2", confirm=False)
    reply, effects = q.consume(CH1, "t")
    assert reply == e.ConsumeOk("t")
    assert effects[0] == e.Monitor(CH1)
    assert delivered(effects) == [(CH1, "t", "m1", False), (CH1, "t", "m2", False)]
    assert effects[1] == e.Deliver(CH1, "t", True, (effects[1].messages[0],))


def test_equal_priority_consumers_with_prefetch_one_alternate() -> None:
    q = Q()
    q.consume(CH1, "a", prefetch=1)
    q.consume(CH2, "b", prefetch=1)
    out = []
    for m in ("m1", "m2", "m3", "m4"):
        _, effects = q.publish(m, confirm=False)
        out += [(tag, label) for _, tag, label, _ in delivered(effects)]
    assert out == [("a", "m1"), ("b", "m2")]
    _, effects = q.do(c.Ack(CH1, q.ids("m1")))
    assert labels(effects) == ["m3"]
    _, effects = q.do(c.Ack(CH2, q.ids("m2")))
    assert labels(effects) == ["m4"]


def test_round_robin_without_prefetch() -> None:
    q = Q()
    q.consume(CH1, "a")
    q.consume(CH2, "b")
    tags = [delivered(q.publish(f"m{i}", confirm=False)[1])[0][1] for i in range(4)]
    assert tags == ["a", "b", "a", "b"]


def test_lower_priority_consumer_gets_messages_only_while_higher_is_full() -> None:
    q = Q()
    q.consume(CH1, "high", prefetch=1, priority=10)
    q.consume(CH2, "low", prefetch=1, priority=0)
    assert delivered(q.publish("m1")[1])[0][1] == "high"
    assert delivered(q.publish("m2")[1])[0][1] == "low"
    q.publish("m3")
    _, effects = q.do(c.Ack(CH2, q.ids("m2")))
    assert labels(effects) == ["m3"] and delivered(effects)[0][1] == "low"
    q.do(c.Ack(CH1, q.ids("m1")))
    _, effects = q.publish("m4")
    assert delivered(effects)[0][1] == "high"


def test_no_ack_consumer_is_not_limited_by_prefetch_and_settles_at_once() -> None:
    q = Q()
    q.consume(CH1, "t", ack_required=False, prefetch=1)
    q.publish_all("m1", "m2", "m3", confirm=False)
    assert q.queue.messages == 0 and q.queue.messages_unacknowledged == 0


def test_single_active_consumer_first_registered_wins_even_against_priority() -> None:
    q = Q(single_active_consumer=True)
    q.consume(CH1, "a")
    q.consume(CH2, "b", priority=5)
    q.consume(CH2, "c", priority=5)
    assert q.queue.single_active_consumer_tag == "a"
    assert q.queue.consumer_count == 3
    assert delivered(q.publish("m1")[1])[0][1] == "a"
    assert delivered(q.publish("m2")[1])[0][1] == "a"
    q.do(c.BasicCancel(CH1, "a"))
    assert q.queue.single_active_consumer_tag == "b"
    assert delivered(q.publish("m3")[1])[0][1] == "b"
    # a's messages stay unacked on its channel after the cancel
    assert q.queue.messages_unacknowledged == 3


def test_single_active_consumer_channel_down_hands_over_with_its_messages() -> None:
    q = Q(single_active_consumer=True)
    q.consume(CH1, "a")
    q.consume(CH2, "b")
    q.publish_all("m1", "m2")
    _, effects = q.do(c.NotifyDown(CH1))
    assert delivered(effects) == [(CH2, "b", "m1", True), (CH2, "b", "m2", True)]


def test_exclusive_consume_is_refused_while_another_consumer_exists_and_vice_versa() -> None:
    refused = e.AmqpError(403, "ACCESS_REFUSED", f"{RS} in exclusive use")
    q = Q()
    q.consume(CH1, "a")
    assert q.consume(CH2, "x", exclusive=True) == (refused, [])
    q = Q()
    q.consume(CH1, "x", exclusive=True)
    assert q.queue.exclusive_consumer_tag == "x"
    assert q.consume(CH2, "b") == (refused, [])
    assert Q(single_active_consumer=True).consume(CH1, "x", exclusive=True) == (refused, [])


def test_cancel_keeps_unacked_messages_on_the_channel_until_settled() -> None:
    q = Q()
    q.consume(CH1, "t")
    q.publish_all("m1", "m2", "m3")
    assert q.do(c.BasicCancel(CH1, "t")) == (e.Ok(), [])
    assert q.queue.messages_unacknowledged == 3
    assert labels(q.publish("m4")[1]) == []
    assert q.do(c.Ack(CH1, q.ids("m1", "m2", "m3"))) == (e.Ok(), [])
    # the monitor goes once the writer has also reported the three deliveries
    assert q.do(c.NotifySent(CH1, 3)) == (e.Ok(), [e.Demonitor(CH1)])
    assert q.do(c.BasicCancel(CH1, "unknown")) == (e.Ok(), [])


def test_channel_down_returns_unacked_in_order_to_another_consumer() -> None:
    q = Q()
    q.consume(CH1, "a")
    q.publish_all("m1", "m2", "m3", confirm=False)
    q.consume(CH2, "b", prefetch=1)
    _, effects = q.do(c.NotifyDown(CH1))
    assert delivered(effects) == [(CH2, "b", "m1", True)]
    assert q.ready() == ["m2", "m3"]
    assert CH1 not in q.queue.monitored


def test_tag_reused_after_cancel_does_not_inherit_the_old_prefetch_count() -> None:
    q = Q()
    q.consume(CH1, "t", prefetch=1)
    q.publish("m1")
    q.do(c.BasicCancel(CH1, "t"))
    q.consume(CH1, "t", prefetch=1)
    assert labels(q.publish("m2")[1]) == ["m2"]
    q.do(c.Ack(CH1, q.ids("m1")))  # the old consumer's message: the new one stays full
    assert labels(q.publish("m3")[1]) == []


def test_global_qos_allowance_limits_ack_required_deliveries_of_the_channel() -> None:
    q = Q()
    q.do(c.LimiterCredit(CH1, 2))
    q.consume(CH1, "a")
    q.consume(CH1, "b")
    q.publish_all("m1", "m2", "m3", confirm=False)
    assert q.queue.messages_unacknowledged == 2 and q.ready() == ["m3"]
    _, effects = q.do(c.LimiterCredit(CH1, 1))
    assert labels(effects) == ["m3"]
    q.do(c.LimiterCredit(CH1, None))
    assert labels(q.publish("m4", confirm=False)[1]) == ["m4"]


def test_basic_get_is_not_limited_by_qos() -> None:
    q = Q()
    q.do(c.LimiterCredit(CH1, 0))
    q.publish("m1")
    reply, _ = q.do(c.BasicGet(CH1))
    assert isinstance(reply, e.GetOk) and reply.delivery.content == "m1"


def test_writer_lagging_by_the_unsent_limit_stops_deliveries_to_its_channel() -> None:
    q = Q()
    q.consume(CH1, "t", ack_required=False)
    q.consume(CH2, "u", ack_required=False)
    for i in range(2 * UNSENT_MESSAGE_LIMIT):
        q.publish(f"m{i}", confirm=False)
    _, effects = q.publish("late", confirm=False)
    assert delivered(effects) == []
    _, effects = q.do(c.NotifySent(CH1, 50))
    assert delivered(effects) == [(CH1, "t", "late", False)]


def test_basic_get_works_on_a_single_active_consumer_queue_and_takes_the_head() -> None:
    q = Q(single_active_consumer=True)
    q.consume(CH1, "a", prefetch=1)
    q.publish_all("m1", "m2", "m3")
    reply, _ = q.do(c.BasicGet(CH2))
    assert isinstance(reply, e.GetOk) and reply.delivery.content == "m2"
    assert reply.message_count == 1
