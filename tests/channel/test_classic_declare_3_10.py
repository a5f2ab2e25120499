"""A classic queue declared without `x-queue-type` on a node modelling RabbitMQ 3.10.

3.10 stores no type argument for such a queue (only a vhost's default queue type
fills one in), so redeclaring it as a quorum queue is refused for an argument the
queue does not have, in the words RabbitMQ 3.10.8 uses; 4.x stores `classic` and
names both types.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pika
import pytest

import actors
from actors import Node
from channel.connection.config import BrokerContext, Config
from channel.connection.listener import Listener
from channel.queue_types.classic.classic_queue import ClassicBackend
from classic.queue_sup import start_queue_sup
from tests.channel.conftest import Broker, client, ok, params, refused


@pytest.fixture(params=[True, False], ids=["4.x", "3.10"])
def conn(request: pytest.FixtureRequest, node: Node, config: Config) -> Iterator[Any]:
    with node.attached():
        result = start_queue_sup()
        assert result[0] == "ok", result
        actors.unlink(result[1])
    backend = ClassicBackend(node, record_queue_type=request.param)
    ctx = BrokerContext(node, backend, config=config)
    listener = Listener(ctx, "127.0.0.1", 0).start()
    broker = Broker(node, ctx, listener, backend)  # type: ignore[arg-type]
    c = client(lambda: pika.BlockingConnection(params(broker)))
    yield c
    if c.is_open:
        client(c.close)
    listener.stop()


def test_a_classic_queue_redeclared_as_quorum(conn: Any, request: pytest.FixtureRequest) -> None:
    ok(conn, lambda ch: ch.queue_declare("c", durable=True))
    ok(conn, lambda ch: ch.queue_declare("c", durable=True))  # the same again is fine
    answer = refused(conn, lambda ch: ch.queue_declare(
        "c", durable=True, arguments={"x-queue-type": "quorum"}))
    where = "inequivalent arg 'x-queue-type' for queue 'c' in vhost '/'"
    if request.node.callspec.id == "3.10":
        assert answer == (406, f"PRECONDITION_FAILED - {where}: received the value 'quorum' "
                               "of type 'longstr' but current is none")
    else:
        assert answer == (406, f"PRECONDITION_FAILED - {where}: received 'quorum' but "
                               "current is 'classic'")
