"""A recorded classic queue writes what it did with each message as `queue_events` rows:
what it took (persistent or not, refused by a limit), handed out (to which consumer,
redelivered or not), had settled, and dropped (TTL, length limit, reject without
requeue, purge) or dead-lettered; and its deletion. Message ids are the workload's,
here the message's label turned into a number."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from actors import trace
from classic import commands as c
from classic import effects as e
from classic import history
from tests.classic.helpers import CH1, Q


class Recorded:
    """A queue whose every command goes through the recording hooks, as the process's
    `_apply` does while a sink is installed."""

    def __init__(self, **config: Any) -> None:
        self.q = Q(**config)
        self.rows: list[tuple[str, dict[str, Any]]] = []

    def do(self, command: c.Command) -> tuple[e.Reply, list[e.Effect]]:
        core = self.q.queue
        seen = history.before(core, command)
        reply, effects = core.apply(command, self.q.now)
        history.record(core, command, reply, effects, seen, _label_id, self.q.now)
        return reply, effects

    def publish(self, label: str, **kw: Any) -> None:
        self.q.seq += 1
        self.do(c.Deliver("pub", self.q.seq, "", ("q",), 1, content=label, **kw))

    def kinds(self) -> list[tuple[str, int | None, str | None]]:
        return [(k, f.get("msg_id"), f.get("outcome") or f.get("reason"))
                for k, f in self.rows]


def _label_id(content: Any) -> int | None:
    return int(content[1:]) if isinstance(content, str) and content[1:].isdigit() else None


@pytest.fixture
def recorded() -> Iterator[list[Recorded]]:
    made: list[Recorded] = []

    def sink(kind: str, fields: dict[str, Any]) -> None:
        made[-1].rows.append((kind, fields))

    previous = trace.set_sink(sink)
    try:
        yield made
    finally:
        trace.set_sink(previous)


def _queue(made: list[Recorded], **config: Any) -> Recorded:
    made.append(Recorded(**config))
    return made[-1]


def test_enqueue_delivery_ack_and_requeue_are_recorded_with_the_queue_type(
        recorded: list[Recorded]) -> None:
    r = _queue(recorded)
    r.publish("m1", persistent=True)
    r.do(c.BasicConsume(CH1, "ctag", prefetch=1))
    (m1,) = r.q.ids("m1")
    r.do(c.Reject(CH1, (m1,), requeue=True))
    r.do(c.Ack(CH1, (m1,)))

    assert r.kinds() == [("queue_enqueued", 1, "ok"), ("queue_delivered", 1, None),
                         ("queue_settled", 1, "requeued"), ("queue_delivered", 1, None),
                         ("queue_settled", 1, "acked")]
    kinds = [k for k, _ in r.rows]
    delivered = [f for k, f in r.rows if k == "queue_delivered"]
    assert [(d["consumer_tag"], d["redelivered"]) for d in delivered] == \
        [("ctag", False), ("ctag", True)]
    assert r.rows[0][1]["persistent"] is True
    assert {f["queue_type"] for _, f in r.rows} == {"classic"} and len(kinds) == 5


def test_drops_say_why_and_a_dead_letter_says_so(recorded: list[Recorded]) -> None:
    ttl = _queue(recorded, message_ttl=10)
    ttl.publish("m1")
    ttl.q.now = 20
    ttl.do(c.Tick())
    assert ttl.kinds()[-1] == ("queue_dropped", 1, "dropped")
    assert ttl.rows[-1][1]["reason"] == "expired"

    limited = _queue(recorded, max_length=1)
    limited.publish("m2")
    limited.publish("m3")
    assert [(f["msg_id"], f["reason"]) for k, f in limited.rows if k == "queue_dropped"] == \
        [(2, "maxlen")]

    refused = _queue(recorded, max_length=1, overflow="reject-publish")
    refused.publish("m4")
    refused.publish("m5")
    assert refused.kinds() == [("queue_enqueued", 4, "ok"), ("queue_enqueued", 5, "rejected")]

    rejected = _queue(recorded)
    rejected.publish("m6")
    rejected.do(c.BasicConsume(CH1, "ctag"))
    rejected.do(c.Reject(CH1, rejected.q.ids("m6"), requeue=False))
    assert rejected.kinds()[-2:] == [("queue_settled", 6, "rejected"),
                                     ("queue_dropped", 6, "dropped")]

    dlx = _queue(recorded, message_ttl=10, dead_letter_exchange="dlx")
    dlx.publish("m7")
    dlx.q.now = 20
    dlx.do(c.Tick())
    assert dlx.kinds()[-1] == ("queue_dropped", 7, "dead_lettered")
    assert dlx.rows[-1][1]["reason"] == "expired"


def test_a_channel_going_returns_its_messages_and_a_delete_is_recorded(
        recorded: list[Recorded]) -> None:
    r = _queue(recorded)
    r.publish("m1")
    r.do(c.BasicConsume(CH1, "ctag"))
    r.do(c.NotifyDown(CH1))
    r.publish("m2")
    r.do(c.Purge())
    r.do(c.Delete())
    assert r.kinds()[2:] == [("queue_settled", 1, "returned"), ("queue_enqueued", 2, "ok"),
                             ("queue_dropped", 1, "dropped"), ("queue_dropped", 2, "dropped"),
                             ("queue_deleted", None, "delete")]
    assert [f["reason"] for k, f in r.rows if k == "queue_dropped"] == ["purged", "purged"]
