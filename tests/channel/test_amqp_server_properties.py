"""What a client is told the server is: `connection.start`'s server properties name
the RabbitMQ release the node models, as that release sends them.

Clients decide on them (Celery picks global QoS from the product and the version),
so a pika client must read RabbitMQ's product, version, platform, copyright,
information and capabilities, the node's cluster name, and whatever the operator
set in `server_properties` (except the capabilities, which stay the server's).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pika
import pytest

from actors import Node
from channel.connection.config import Config
from releases import RELEASES
from tests.channel.conftest import client, make_broker, params

CAPABILITIES = {name: True for name in (
    "publisher_confirms", "exchange_exchange_bindings", "basic.nack",
    "consumer_cancel_notify", "connection.blocked", "consumer_priorities",
    "authentication_failure_close", "per_consumer_qos", "direct_reply_to")}


def seen_by_pika(node: Node, config: Config) -> dict[str, Any]:
    broker = make_broker(node, config)
    try:
        def read() -> dict[str, Any]:
            conn = pika.BlockingConnection(params(broker))
            try:
                props = conn._impl.server_properties
            finally:
                conn.close()
            return {k: v.decode() if isinstance(v, bytes) else v for k, v in props.items()}
        return client(read)
    finally:
        broker.listener.stop()


@pytest.fixture
def props(node: Node) -> Iterator[dict[str, Any]]:
    yield seen_by_pika(node, Config(cluster_name="rabbit@orders", release=RELEASES["4.2"]))


def test_a_4_2_node_says_it_is_rabbitmq_4_2_9(props: dict[str, Any]) -> None:
    assert props == {
        "capabilities": CAPABILITIES,
        "product": "RabbitMQ",
        "version": "4.2.9",
        "platform": "Erlang/OTP 27.3.4.1",
        "copyright": "Copyright (c) 2007-2026 Broadcom Inc and/or its subsidiaries",
        "information": "Licensed under the MPL 2.0. Website: https://rabbitmq.com",
        "cluster_name": "rabbit@orders",
    }


def test_a_4_0_node_says_it_is_4_0_5(node: Node) -> None:
    props = seen_by_pika(node, Config(release=RELEASES["4.0"]))
    assert (props["product"], props["version"]) == ("RabbitMQ", "4.0.5")
    assert props["copyright"] == "Copyright (c) 2007-2024 Broadcom Inc and/or its subsidiaries"


def test_a_4_3_node_says_it_is_4_3_5(node: Node) -> None:
    props = seen_by_pika(node, Config(release=RELEASES["4.3"]))
    assert (props["product"], props["version"]) == ("RabbitMQ", "4.3.5")
    assert props["copyright"] == "Copyright (c) 2007-2026 Broadcom Inc and/or its subsidiaries"


def test_configured_properties_win_except_the_capabilities(node: Node) -> None:
    props = seen_by_pika(node, Config(release=RELEASES["4.2"], server_properties={
        "product": "Orders broker", "region": "eu-1", "capabilities": {"basic.nack": False}}))
    assert props["product"] == "Orders broker"
    assert props["region"] == "eu-1"
    assert props["version"] == "4.2.9"
    assert props["capabilities"] == CAPABILITIES
