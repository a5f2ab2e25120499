"""Hand-written histories of classic queues for `total_queue`: what RabbitMQ keeps and
what it does not promise to keep. They join `cases.CASES` (imported at the end of
`cases`), so the reference and the merged Spark pass check them like every other case.

A classic queue records its declaration (durable, exclusive; its home node is the
row's node), what it enqueued (persistent or not), dropped and deleted
(`queue_events`); the nemesis records its kills. A confirmed persistent message in a
durable queue must survive its home node's kill; a message of a non-durable or
exclusive queue, a transient message, one its queue dropped or that went with a
deleted queue, and one the broker returned as unroutable, is not lost.
"""

from __future__ import annotations

from typing import Any

from analysis.model import Violation
from tests.analysis.cases import Builder, Row, case

TQ = "total_queue"


def declare(b: Builder, queue: str, node: str = "n1", durable: bool = True,
            exclusive: bool = False) -> None:
    """A classic queue process started on `node` (namespaced: kills are per case)."""
    q = b.q(queue)
    b._emit("queue_events", f"classic/{q}", "queue_declared", b.p + node, queue=q,
            queue_type="classic", durable=durable, exclusive=exclusive, auto_delete=exclusive)


def qev(b: Builder, kind: str, queue: str, node: str = "n1", m: int | None = None,
        **f: Any) -> Row:
    q = b.q(queue)
    return b._emit("queue_events", f"classic/{q}", kind, b.p + node, queue=q,
                   queue_type="classic", msg_id=None if m is None else b.m(m), **f)


def kill(b: Builder, node: str = "n1") -> None:
    """The nemesis kills `node` (and restarts it later)."""
    target = f"{b.p}{node}@127.0.0.1:25000"
    b._emit("nemesis_events", "nemesis", "start", "nemesis", fault="kill", targets=[target])
    b._emit("nemesis_events", "nemesis", "stop", "nemesis", fault="kill", targets=[target])


def published(b: Builder, queue: str, m: int, persistent: bool = True) -> None:
    b.publish(queue, m)
    qev(b, "queue_enqueued", queue, m=m, persistent=persistent, outcome="ok")


@case
def classic_durable_queue_loses_a_persistent_message_to_a_kill(
        b: Builder) -> tuple[list[Violation], dict[str, str]]:
    b.open("p")
    declare(b, "work")
    published(b, "work", 1)
    kill(b)
    declare(b, "work")  # recovered after the restart, without the message
    b.drain()
    return [b.v(TQ, "lost_never_delivered", "work", 1)], {TQ: "fail"}


@case
def classic_transient_queue_goes_with_its_home_node(
        b: Builder) -> tuple[list[Violation], dict[str, str]]:
    b.open("p")
    declare(b, "tmp", durable=False)
    published(b, "tmp", 1)
    kill(b)
    b.drain()
    return [], {TQ: "pass"}


@case
def classic_exclusive_queue_goes_with_its_owner_node(
        b: Builder) -> tuple[list[Violation], dict[str, str]]:
    b.open("p")
    declare(b, "reply", node="n2", exclusive=True)
    published(b, "reply", 1)
    kill(b, "n2")
    b.drain()
    return [], {TQ: "pass"}


@case
def classic_transient_message_goes_with_its_node_but_not_a_later_one(
        b: Builder) -> tuple[list[Violation], dict[str, str]]:
    b.open("p")
    declare(b, "work")
    published(b, "work", 1, persistent=False)
    kill(b)
    declare(b, "work")
    published(b, "work", 2, persistent=False)  # after the kill: must be delivered
    b.drain()
    return [b.v(TQ, "lost_never_delivered", "work", 2)], {TQ: "fail"}


@case
def classic_exclusive_queue_deleted_with_its_owner_takes_its_messages(
        b: Builder) -> tuple[list[Violation], dict[str, str]]:
    b.open("p")
    declare(b, "reply", exclusive=True)
    published(b, "reply", 1)
    qev(b, "queue_deleted", "reply", reason="owner_down", value=1)
    b.publish("reply", 2)  # to the deleted queue: unroutable, returned
    b.op("return", "p", queue="reply", msg_id=2)
    b.drain()
    return [], {TQ: "pass"}


@case
def classic_drops_by_ttl_and_length_are_not_lost(
        b: Builder) -> tuple[list[Violation], dict[str, str]]:
    b.open("p")
    b.open("c")
    declare(b, "ttl")
    published(b, "ttl", 1)
    qev(b, "queue_dropped", "ttl", m=1, reason="expired", outcome="dropped")
    published(b, "ttl", 2)
    t = b.deliver("ttl", 2)
    b.settle("ack", "ttl", 2, t)
    b.drain()
    return [], {TQ: "pass"}


@case
def classic_ack_to_a_queue_that_went_down_may_be_redelivered(
        b: Builder) -> tuple[list[Violation], dict[str, str]]:
    # the consumer acked, then the broker cancelled it (the queue's node died): the ack
    # may never have reached the queue, which recovers the message and hands it out again
    b.open("p")
    b.open("c")
    declare(b, "work")
    published(b, "work", 1)
    t1 = b.deliver("work", 1)
    b.settle("ack", "work", 1, t1)
    b.op("cancel", "c", queue="work", consumer_tag="t")
    kill(b)
    declare(b, "work")
    t2 = b.deliver("work", 1, tag="t2", redelivered=True)
    b.settle("ack", "work", 1, t2)
    b.drain()
    return [], {TQ: "pass"}
