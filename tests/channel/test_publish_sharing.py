"""Consecutive publishes with the same properties and routing key share them.

A publisher nearly always sends the same properties and the same routing key with
every message, and a classic queue keeps each message it holds in memory with its
routing keys and raw properties. The channel hands the queue one routing-key
string and tuple, and the assembler one properties bytes object, for a run of
publishes that repeat them, instead of fresh copies decoded from every frame.
What the queue holds is unchanged: equal values, in the same order.
"""

from __future__ import annotations

from typing import Any

import pika
from pamqp import commands

from channel.protocol.assembler import Assembler
from channel.protocol.framing import Content
from tests.channel.conftest import Broker, client, ok


def _header_payload(properties_bin: bytes, size: int) -> bytes:
    return (60).to_bytes(2, "big") + (0).to_bytes(2, "big") + size.to_bytes(8, "big") \
        + properties_bin


def test_equal_raw_properties_of_consecutive_headers_are_one_object() -> None:
    raw = Content.build(b"", delivery_mode=1).properties_bin
    assembler = Assembler()
    seen = [_assemble_properties(assembler, _header_payload(bytes(raw), 0))
            for _ in range(3)]
    assert seen[0] == raw and seen[1] is seen[0] and seen[2] is seen[0]
    other = Content.build(b"", delivery_mode=2).properties_bin
    assert _assemble_properties(assembler, _header_payload(bytes(other), 0)) == other


def _assemble_properties(assembler: Assembler, payload: bytes) -> bytes:
    """The raw properties of the content a basic.publish with this header carries."""
    assembler.method = commands.Basic.Publish()  # a class-60 method awaits its header
    assembler.state = "header"
    command = assembler._header(2, payload)
    assert command is not None and command.content is not None
    return command.content.properties_bin


def test_publishes_with_one_key_and_properties_share_them_in_the_queue(
        broker: Broker, conn: Any) -> None:
    ok(conn, lambda ch: ch.queue_declare("shared", durable=True))

    def publish() -> None:
        ch = conn.channel()
        for body in (b"a", b"b", b"c"):
            ch.basic_publish("", "shared", body, pika.BasicProperties(delivery_mode=1))
        ch.basic_publish("", "shared", b"d", pika.BasicProperties(delivery_mode=2))
        ch.close()
    client(publish)
    queue = broker.backend.queues[("/", "shared")]
    messages = [d.message for d in queue.ready]
    assert [m.content.body for m in messages] == [b"a", b"b", b"c", b"d"]
    assert all(m.routing_keys == ("shared",) and m.routing_key == "shared" for m in messages)
    first = messages[0]
    for later in messages[1:]:
        assert later.routing_keys is first.routing_keys
        assert later.routing_key is first.routing_key
    assert messages[1].content.properties_bin is first.content.properties_bin
    assert messages[2].content.properties_bin is first.content.properties_bin
    assert messages[3].content.properties_bin != first.content.properties_bin
