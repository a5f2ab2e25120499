"""The order in which returned messages are served again (machine version 7).

Returned messages wait in ``returns``, which is served before the rest of the
queue, in the order they were returned. A consumer that goes down (or is
removed) returns everything it still holds in message-id order, which is its
delivery order, behind the returns already waiting. A requeue from a client
goes through the leader's aux handler: with a delivery limit (RabbitMQ 4.x
gives every quorum queue one, 20 by default) it is appended as a ``return``;
without one the message is appended again at the back of the queue (a
``requeue``), as RabbitMQ 3.10 does for every quorum queue.
"""

from __future__ import annotations

from typing import Any

import pytest

from fifo import make_checkout, make_return

from .helpers import Driver, FakeRaAux, bodies, delivered_ids, pid

P1 = pid(1)
C1 = pid(10)
C2 = pid(11)
UNLIMITED = ("auto", ("simple_prefetch", 2000))


def two_checked_out(**cfg: Any) -> tuple[Driver, int]:
    """m1 and m2 delivered to consumer C1 (ids 0 and 1); C1's key."""
    d = Driver(**cfg)
    d.enqueue(P1, 1, b"m1")
    d.enqueue(P1, 2, b"m2")
    _, effects = d.apply(make_checkout(("c1", C1), UNLIMITED, {}))
    assert bodies(d, effects) == [b"m1", b"m2"]
    return d, d.index


def requeue(d: Driver, key: int, msg_ids: list[int]) -> list[Any]:
    """A client's requeue: a cast to the leader's aux handler, whose appends are applied."""
    aux = d.machine.init_aux("q1")
    cast = (make_return(key, msg_ids), 0, C1)
    _, _, _, appends = d.machine.handle_aux("leader", "cast", cast, aux, FakeRaAux(d))
    effects: list[Any] = []
    for kind, cmd, _reply_mode in appends:
        assert kind == "append"
        effects.extend(d.apply(cmd)[1])
    return effects


def next_consumer(d: Driver) -> list[bytes]:
    _, effects = d.apply(make_checkout(("c2", C2), UNLIMITED, {}))
    return bodies(d, effects)


@pytest.mark.parametrize("limit", [20, None])
def test_a_consumer_that_goes_down_returns_its_messages_in_delivery_order(
        limit: int | None) -> None:
    d, _key = two_checked_out(delivery_limit=limit)
    d.apply(("down", C1, "noproc"))
    assert next_consumer(d) == [b"m1", b"m2"]


def test_returns_of_a_consumer_that_goes_down_follow_message_ids_not_enqueue_order() -> None:
    d, key = two_checked_out(delivery_limit=20)
    d.apply(make_return(key, [0]))  # m1 comes back to C1 as id 2, after m2 (id 1)
    assert sorted(d.state.consumers[key].checked_out) == [1, 2]
    d.apply(("down", C1, "noproc"))
    assert next_consumer(d) == [b"m2", b"m1"]


@pytest.mark.parametrize(("limit", "served"), [
    (20, [b"m2", b"m1"]),    # RabbitMQ 4.x: the requeued m2 waits in returns, ahead of m1
    (None, [b"m1", b"m2"]),  # no delivery limit: m2 was requeued at the back
])
def test_a_connection_closed_while_its_consumer_holds_two_messages(
        limit: int | None, served: list[bytes]) -> None:
    """pika's "close connection from basic_consume callback": the callback for m1
    closes the connection; pika first rejects (requeue) m2, which it had not handed
    to the callback, cancels the consumer, then closes the channel holding m1."""
    d, key = two_checked_out(delivery_limit=limit)
    redelivered = requeue(d, key, [1])
    assert delivered_ids(d, redelivered) == [2]  # C1 is still up: m2 again, as id 2
    d.apply(make_checkout(("c1", C1), "cancel", {}))
    # the channel no longer has the consumer: it requeues the late delivery
    assert delivered_ids(d, requeue(d, key, [2])) == []
    d.apply(("down", C1, "noproc"))  # the channel is gone: m1 comes back
    assert next_consumer(d) == served
