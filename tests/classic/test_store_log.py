"""A durable queue's file replays to the messages it still holds, in id order, and a
record torn by a kill ends the replay without losing what came before it."""

from __future__ import annotations

from classic import commands as c
from classic import effects as e
from classic.config import QueueConfig
from classic.queue import ClassicQueue
from classic.store_log import encode_remove, encode_write, replay


def _msg(msg_id: int, priority: int = 0) -> e.Delivery:
    return e.Delivery(msg_id, False, "ex", ("rk",), 3, True, priority, None, None)


def test_replay_keeps_written_messages_not_removed_in_id_order() -> None:
    data = (encode_write(_msg(1), b"a") + encode_write(_msg(2), b"b")
            + encode_write(_msg(3), b"c") + encode_remove((2,)))
    messages, whole = replay(data)
    assert [(m.msg_id, m.content) for m in messages] == [(1, b"a"), (3, b"c")]
    assert whole == len(data)


def test_a_torn_last_record_ends_the_replay_where_the_whole_records_end() -> None:
    whole = encode_write(_msg(1), b"a")
    torn = encode_write(_msg(2), b"b")[:-2]
    messages, length = replay(whole + torn)
    assert [m.msg_id for m in messages] == [1]
    assert length == len(whole)


def test_restored_messages_are_ready_redelivered_and_new_ids_follow_them() -> None:
    q = ClassicQueue(QueueConfig("q", durable=True), now=0)
    q.restore([e.Delivery(4, True, "ex", ("rk",), 3, True, 0, None, b"x"),
               e.Delivery(7, True, "ex", ("rk",), 3, True, 0, None, b"y")], now=0)
    assert q.messages_ready == 2 and q.next_msg_id == 8
    reply, _ = q.apply(c.BasicGet("ch", ack_required=False), now=1)
    assert isinstance(reply, e.GetOk)
    assert (reply.delivery.msg_id, reply.delivery.redelivered, reply.delivery.content) == (
        4, True, b"x")
