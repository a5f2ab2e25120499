"""The in-memory test backend names a server-named queue as RabbitMQ does.

A declare with an empty name gets an `amq.gen-...` name from the broker; only a
name the client chose is refused for the reserved `amq.` prefix (403).
"""

from __future__ import annotations

from typing import Any

import pika

from tests.channel.conftest import client, ok, refused


def test_a_server_named_queue_gets_an_amq_gen_name(conn: pika.BlockingConnection) -> None:
    def declare(ch: Any) -> str:
        return str(ch.queue_declare("", exclusive=True).method.queue)
    assert ok(conn, declare).startswith("amq.gen-")


def test_a_client_chosen_amq_name_is_refused(conn: pika.BlockingConnection) -> None:
    assert refused(conn, lambda ch: ch.queue_declare("amq.mine")) == (
        403, "ACCESS_REFUSED - queue name 'amq.mine' contains reserved prefix 'amq.*'")
    assert client(lambda: conn.is_open)
