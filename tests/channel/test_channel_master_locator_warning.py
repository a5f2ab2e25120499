"""A classic declare with `x-queue-master-locator` where the deprecated feature is
permitted (4.0 to 4.2) is taken, and the node logs RabbitMQ's deprecation warning."""

from __future__ import annotations

import logging
from typing import Any

import pika
import pytest

import actors
from actors import Node
from channel.queue_types.classic.classic_queue import ClassicBackend
from classic.queue_sup import start_queue_sup
from releases import RELEASES
from tests.channel.conftest import client
from tests.channel.test_channel_releases import _quorum_broker

WARNING = ("Deprecated features: `queue_master_locator`: queue-master-locator is "
           "deprecated. queue-leader-locator should be used instead (allowed values are "
           "'client-local' and 'balanced')")


def test_a_permitted_master_locator_is_taken_with_a_warning(
        lone_node: Node, caplog: pytest.LogCaptureFixture) -> None:
    with lone_node.attached():
        sup = start_queue_sup()
        assert sup[0] == "ok", sup
        actors.unlink(sup[1])
    listener, _registry = _quorum_broker(lone_node, RELEASES["4.2"], ClassicBackend(lone_node))

    def declare() -> Any:
        conn = pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", listener.port, connection_attempts=1))
        try:
            ok = conn.channel().queue_declare("cq", durable=True, arguments={
                "x-queue-master-locator": "client-local"})
            conn.channel().queue_delete("cq")
            return ok.method.queue
        finally:
            conn.close()

    try:
        with caplog.at_level(logging.WARNING, logger="warren.channel"):
            assert client(declare) == "cq"
    finally:
        listener.stop()
    assert WARNING in [r.getMessage() for r in caplog.records]
