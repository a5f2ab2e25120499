"""What a redelivered quorum-queue message's headers count, per release, through a
real client: up to 4.2 `x-delivery-count` counts every earlier delivery (a
`basic.nack` with requeue included); 4.3 counts only failed deliveries there and
puts every earlier delivery in `x-acquired-count`."""

from __future__ import annotations

from typing import Any

import pika
import pytest

from actors import Node
from releases import RELEASES
from tests.channel.conftest import client
from tests.channel.test_channel_releases import _quorum_broker


@pytest.mark.parametrize(("series", "counts"), [
    ("4.2", {"x-delivery-count": 1}),
    ("4.3", {"x-acquired-count": 1}),
])
def test_a_requeued_message_comes_back_counted_as_its_release_counts(
        lone_node: Node, series: str, counts: dict[str, int]) -> None:
    listener, _registry = _quorum_broker(lone_node, RELEASES[series])

    def requeue_once() -> Any:
        conn = pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", listener.port, connection_attempts=1))
        try:
            ch = conn.channel()
            ch.queue_declare("dc", durable=True, arguments={"x-queue-type": "quorum"})
            ch.confirm_delivery()
            ch.basic_publish("", "dc", b"m")
            method, _props, _body = ch.basic_get("dc")
            ch.basic_nack(method.delivery_tag, requeue=True)
            method, props, _body = ch.basic_get("dc", auto_ack=True)
            headers = props.headers or {}
            ch.queue_delete("dc")
            return method.redelivered, {k: v for k, v in headers.items()
                                        if k in ("x-delivery-count", "x-acquired-count")}
        finally:
            conn.close()

    try:
        assert client(requeue_once) == (True, counts)
    finally:
        listener.stop()
