"""A publisher's headers reach the consumer in the field types it wrote them in.

RabbitMQ decodes a table with each value's type and writes it back in that type,
also when it changes the table: the `BCC` header is removed before a message is
stored, and every other header comes out as it went in (a short as a short, a
double as a double). pika writes only its own types, so the publisher here
writes the table's bytes itself.
"""

from __future__ import annotations

import struct
from typing import Any

import pika
import pika.data
import pytest

from tests.channel.conftest import Broker, client
from tests.differential.wire_types import capture, header_types, raw_properties


class Typed:
    """A header value given as its field type letter and encoded bytes."""

    def __init__(self, encoded: bytes) -> None:
        self.encoded = encoded


TYPED = {
    "b": Typed(b"b" + struct.pack(">b", -5)), "B": Typed(b"B" + struct.pack(">B", 200)),
    "s": Typed(b"s" + struct.pack(">h", -300)), "u": Typed(b"u" + struct.pack(">H", 60000)),
    "I": Typed(b"I" + struct.pack(">i", 1)), "l": Typed(b"l" + struct.pack(">q", 3)),
    "f": Typed(b"f" + struct.pack(">f", 1.5)), "d": Typed(b"d" + struct.pack(">d", 2.25)),
    "A": Typed(b"A" + struct.pack(">I", 5) + b"b\x07" + b"s\x00\x08"),
}


@pytest.fixture
def typed_pika(monkeypatch: pytest.MonkeyPatch) -> None:
    """pika's table encoder, taught to write a `Typed` value as it is."""
    original = pika.data.encode_value

    def encode_value(pieces: list[bytes], value: Any) -> int:
        if isinstance(value, Typed):
            pieces.append(value.encoded)
            return len(value.encoded)
        return original(pieces, value)

    monkeypatch.setattr(pika.data, "encode_value", encode_value)


def test_removing_bcc_keeps_the_other_headers_field_types(broker: Broker,
                                                          typed_pika: None) -> None:
    def work() -> Any:
        conn = pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", broker.port, connection_attempts=1))
        try:
            ch = conn.channel()
            for q in ("to", "hidden"):
                ch.queue_declare(q, durable=True)
            ch.confirm_delivery()
            ch.basic_publish("", "to", b"m", pika.BasicProperties(
                headers={**TYPED, "BCC": ["hidden"]}))
            with capture():
                got = [ch.basic_get(q, auto_ack=True) for q in ("to", "hidden")]
            return [header_types(raw_properties(props) or b"") for _m, props, _b in got]
        finally:
            conn.close()

    sent = {"b": "b", "B": "B", "s": "s", "u": "u", "I": "I", "l": "l", "f": "f",
            "d": "d", "A": ["A", ["b", "s"]]}
    assert client(work) == [sent, sent]
