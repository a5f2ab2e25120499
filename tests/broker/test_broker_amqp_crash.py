"""A crashed channel on a real node (the `warren ctl crash_channel`
hook): its whole connection is closed with
`541 INTERNAL_ERROR`, its unacked deliveries go back to the queue, and every other
connection and channel carries on.
"""

from __future__ import annotations

import pika.exceptions as pex

from tests.broker.amqp_support import Amqp, pump_until
from tests.broker.broker_support import ctl, eventually


def test_a_crashed_channel_closes_its_connection_with_541_and_nothing_else(
        amqp: Amqp, queue: str) -> None:
    amqp.declare(queue, node=2)
    filler = amqp.blocking(2).channel()
    filler.confirm_delivery()
    for body in (b"c0", b"c1"):
        filler.basic_publish("", queue, body)

    victim = amqp.select(0)
    [victim_conn] = [row["pid"] for row in amqp.ctl_json(0, "list_connections")]
    crashing, sibling = victim.channel(), victim.channel()
    crashing.consume(queue)
    victim.run_until(lambda: len(crashing.deliveries) == 2, "two unacked deliveries")

    survivor_conn = amqp.blocking(0)
    survivor = survivor_conn.channel()
    survivor.confirm_delivery()
    [target] = [row["pid"] for row in amqp.ctl_json(0, "list_channels")
                if row["connection"] == victim_conn and row["number"] == 1]
    amqp.ctl_ok(0, "crash_channel", target)

    victim.run_until(lambda: victim.closed is not None, "the connection's close")
    assert isinstance(victim.closed, pex.ConnectionClosedByBroker)
    assert (victim.closed.reply_code, victim.closed.reply_text) == (541, "INTERNAL_ERROR")
    assert sibling.closed is not None  # the other channel went with its connection
    assert eventually(lambda: [row["pid"] for row in amqp.ctl_json(0, "list_connections")
                               if row["pid"] == victim_conn] == [])

    # the other connection on the same node publishes and gets the returned deliveries
    survivor.basic_publish("", queue, b"c2")
    got: list[tuple[bytes, bool]] = []
    survivor.basic_consume(queue, lambda _c, m, _p, body: (
        got.append((body, m.redelivered)), survivor.basic_ack(m.delivery_tag)))
    pump_until(survivor_conn, lambda: len(got) == 3, "three deliveries")
    assert got == [(b"c0", True), (b"c1", True), (b"c2", False)]


def test_crashing_a_channel_that_does_not_exist_is_refused(amqp: Amqp) -> None:
    out = ctl(amqp.name(1), "crash_channel", "<0.0.0>")
    assert (out.returncode, out.stderr.strip().splitlines()[-1]) == (65, "no channel <0.0.0>")
