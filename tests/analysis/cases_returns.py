"""Hand-written histories for `ordering_returns`: messages a consumer's end gives back
come back in the order that consumer got them. They join `cases.CASES` (imported at
the end of `cases`), so the reference and the merged Spark pass check them like every
other case.

The shape of every case is pika's acceptance test "close connection from basic consume
callback": one consumer holds two messages when its connection closes, and another
consumer gets them again.
"""

from __future__ import annotations

from analysis.model import Violation
from tests.analysis.cases import Builder, case

RO = "ordering_returns"


def held_then_closed(b: Builder, *, nack_second: bool = False) -> None:
    """`c` gets messages 1 and 2 of `q` and its connection closes with both unsettled
    (or with 2 requeued first by a nack)."""
    b.open("p"), b.open("c"), b.open("d")
    b.publish("q", 1)
    b.publish("q", 2)
    b.deliver("q", 1)
    t2 = b.deliver("q", 2)
    if nack_second:
        b.settle("nack", "q", 2, t2, requeue=True)
    b.op("conn_close", "c", None)


def redeliver(b: Builder, m: int, conn: str = "d", count: int = 1, ack: bool = True) -> int:
    """`conn`'s consumer gets `m` again (with `x-delivery-count` = `count`) and acks it;
    the delivery's time."""
    tag = b.deliver("q", m, conn=conn, redelivered=True, count=count)
    ts: int = b.rows["client_ops"][-1]["ts_ns"]
    if ack:
        b.settle("ack", "q", m, tag, conn=conn)
    return ts


@case
def returned_messages_come_back_in_the_order_they_were_held(
        b: Builder) -> tuple[list[Violation], dict[str, str]]:
    held_then_closed(b)
    redeliver(b, 1)
    redeliver(b, 2)
    b.drain()
    return [], {RO: "pass", "total_queue": "pass"}


@case
def returned_messages_out_of_order_at_the_next_consumer(
        b: Builder) -> tuple[list[Violation], dict[str, str]]:
    held_then_closed(b)
    early = redeliver(b, 2)
    redeliver(b, 1)
    b.drain()
    return [b.v(RO, "return_order", "q", 2, 1, key=b.ckey("d"), ts_ns=early,
                detail=f"returned by {b.ckey('c')}, redelivered as delivery tags 2>1")], \
        {RO: "fail", "total_queue": "pass"}


@case
def returns_shared_by_competing_consumers_are_not_ordered(
        b: Builder) -> tuple[list[Violation], dict[str, str]]:
    # which consumer records its delivery first is a race between two clients
    held_then_closed(b)
    b.open("e")
    redeliver(b, 2)
    redeliver(b, 1, conn="e")
    b.drain()
    return [], {RO: "pass"}


@case
def a_message_requeued_before_the_close_went_back_first(
        b: Builder) -> tuple[list[Violation], dict[str, str]]:
    held_then_closed(b, nack_second=True)
    redeliver(b, 2)
    redeliver(b, 1)
    b.drain()
    return [], {RO: "pass", "total_queue": "pass"}


@case
def a_hand_out_nobody_saw_is_not_judged(
        b: Builder) -> tuple[list[Violation], dict[str, str]]:
    # 1 went to a consumer that died before the delivery reached it, and came back
    # behind 2: its delivery count tells
    held_then_closed(b)
    redeliver(b, 2)
    redeliver(b, 1, count=2)
    b.drain()
    return [], {RO: "pass", "total_queue": "pass"}


@case
def a_message_requeued_again_by_the_next_consumer_keeps_its_first_redelivery(
        b: Builder) -> tuple[list[Violation], dict[str, str]]:
    held_then_closed(b)
    tag = b.deliver("q", 1, conn="d", redelivered=True, count=1)
    b.settle("reject", "q", 1, tag, conn="d", requeue=True)
    redeliver(b, 2)
    redeliver(b, 1, count=2)
    b.drain()
    return [], {RO: "pass", "total_queue": "pass"}
