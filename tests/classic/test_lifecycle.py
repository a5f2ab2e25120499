"""Queue-level operations: purge, delete with if-empty / if-unused, auto-delete,
x-expires, the exclusive owner going away, and the counts a declare reports."""

from __future__ import annotations

from classic import commands as c
from classic import effects as e

from .helpers import CH1, CH2, Q

RS = "queue 'q' in vhost '/'"


def test_purge_removes_ready_messages_only_and_reports_how_many() -> None:
    q = Q()
    q.publish_all("m1", "m2", "m3", confirm=False)
    q.do(c.BasicGet(CH1))
    assert q.do(c.Purge()) == (e.Ok(message_count=2), [])
    assert q.queue.messages_unacknowledged == 1
    q.do(c.Reject(CH1, q.ids("m1"), requeue=True))
    reply, _ = q.do(c.BasicGet(CH2))
    assert isinstance(reply, e.GetOk) and reply.delivery.redelivered


def test_purge_acks_pending_confirms_and_forgets_stored_messages() -> None:
    q = Q()
    q.publish("m1", persistent=True)
    assert q.do(c.Purge())[1] == [e.StoreRemove((1,)), e.Confirm("pub-ch", (1,))]


def test_delete_if_empty_counts_ready_messages_only() -> None:
    q = Q()
    q.publish("m1")
    assert q.do(c.Delete(if_empty=True)) == (
        e.AmqpError(406, "PRECONDITION_FAILED", f"{RS} not empty"), [])
    q.do(c.BasicGet(CH1))
    reply, effects = q.do(c.Delete(if_empty=True))
    assert reply == e.Ok(message_count=0) and effects == [e.Deleted("delete", 0)]
    assert q.queue.deleted == "delete"


def test_delete_if_unused_refuses_while_a_consumer_exists() -> None:
    q = Q()
    q.consume(CH1, "t")
    assert q.do(c.Delete(if_unused=True)) == (
        e.AmqpError(406, "PRECONDITION_FAILED", f"{RS} in use"), [])


def test_if_empty_is_checked_before_if_unused() -> None:
    q = Q()
    q.publish("m1")
    q.consume(CH1, "t", prefetch=1)
    q.publish("m2")
    reply, _ = q.do(c.Delete(if_empty=True, if_unused=True))
    assert reply == e.AmqpError(406, "PRECONDITION_FAILED", f"{RS} not empty")


def test_delete_cancels_every_consumer_and_reports_ready_messages() -> None:
    q = Q(single_active_consumer=True)
    q.consume(CH1, "a", prefetch=1)
    q.consume(CH2, "b")
    q.publish_all("m1", "m2", confirm=False)
    reply, effects = q.do(c.Delete())
    assert reply == e.Ok(message_count=1)
    assert effects == [e.CancelConsumer(CH1, "a"), e.CancelConsumer(CH2, "b"),
                       e.Deleted("delete", 1)]


def test_auto_delete_after_the_last_consumer_cancels() -> None:
    q = Q(auto_delete=True)
    q.consume(CH1, "a")
    q.consume(CH2, "b")
    assert q.do(c.BasicCancel(CH1, "a"))[1] == [e.Demonitor(CH1)]
    q.publish("m1", confirm=False)
    assert q.do(c.BasicCancel(CH2, "b")) == (e.Ok(), [e.Deleted("auto_delete", 0)])


def test_auto_delete_when_the_last_consumers_channel_goes_down() -> None:
    q = Q(auto_delete=True)
    q.consume(CH1, "a")
    q.publish("m1", confirm=False)
    assert q.do(c.NotifyDown(CH1))[1] == [e.Deleted("auto_delete", 1)]


def test_auto_delete_queue_that_never_had_a_consumer_survives_gets() -> None:
    q = Q(auto_delete=True)
    q.publish("m1")
    q.do(c.BasicGet(CH1))
    q.do(c.NotifyDown(CH1))
    assert q.queue.deleted is None and q.queue.messages_ready == 1


def test_x_expires_runs_only_without_consumers_and_restarts_on_use() -> None:
    q = Q(now=1000, expires=500)
    assert q.queue.queue_expiry_deadline() == 1500
    q.now = 1200
    q.publish("m1", confirm=False)  # publishing is not a use
    assert q.queue.queue_expiry_deadline() == 1500
    q.do(c.BasicGet(CH1, ack_required=False))
    assert q.queue.queue_expiry_deadline() == 1700
    q.consume(CH1, "t")
    assert q.queue.queue_expiry_deadline() is None
    q.now = 5000
    assert q.do(c.Tick()) == (e.Ok(), [])
    q.do(c.BasicCancel(CH1, "t"))
    assert q.queue.queue_expiry_deadline() == 5500
    q.now = 5300
    q.do(c.Stat())
    q.now = 5799
    assert q.do(c.Tick()) == (e.Ok(), [])
    q.now = 5800
    assert q.do(c.Tick()) == (e.Ok(), [e.Deleted("expired", 0)])


def test_owner_down_deletes_the_queue_discarding_messages() -> None:
    q = Q(exclusive_owner="conn-1")
    q.publish("m1", confirm=False)
    assert q.do(c.OwnerDown()) == (e.Ok(), [e.Deleted("owner_down", 1)])


def test_stat_counts_ready_messages_and_every_consumer_including_standbys() -> None:
    q = Q(single_active_consumer=True)
    q.consume(CH1, "a", prefetch=2)
    q.consume(CH2, "b")
    q.publish_all("m1", "m2", "m3", "m4", "m5", confirm=False)
    assert q.do(c.Stat()) == (e.Ok(message_count=3, consumer_count=2), [])
    assert (q.queue.messages_ready, q.queue.messages_unacknowledged, q.queue.messages) == (3, 2, 5)
    assert (q.queue.message_bytes, q.queue.message_bytes_ready,
            q.queue.message_bytes_unacknowledged) == (10, 6, 4)


def test_x_expires_restarts_when_a_channel_without_consumers_goes_down() -> None:
    q = Q(expires=500)
    q.publish("m1", confirm=False)
    q.now = 300
    q.do(c.BasicGet(CH1))
    q.now = 700
    q.do(c.NotifyDown(CH1))
    assert q.queue.queue_expiry_deadline() == 1200
