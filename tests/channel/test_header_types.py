"""The headers the broker adds to a delivery carry RabbitMQ's AMQP field types.

A client sees the type of every header value: RabbitMQ writes `x-delivery-count`
and an `x-death` entry's `count` as long-longs (`l`), its `time` as a timestamp
(`T`), its texts as long strings (`S`), and leaves the publisher's own headers
with the types the publisher gave them.
"""

from __future__ import annotations

import struct
from typing import Any

import pika
import pytest

from channel.protocol.framing import Content
from channel.queue_types.backend import Message
from channel.queue_types.header_table import drop_expiration, drop_header, with_headers
from channel.queue_types.qq_message import QqMessage
from tests.differential.wire_types import header_types


def published(**properties: object) -> QqMessage:
    """A message as pika would publish it (pika encodes its own integers as `I`)."""
    raw = pika.BasicProperties(**properties).encode()
    content = Content(b"".join(raw), b"body")
    return QqMessage.from_message(Message("", "q", content))


def types(msg: QqMessage, last_death: bool = True) -> dict[str, object] | None:
    return header_types(msg.to_message(last_death).content.properties_bin)


def test_x_delivery_count_is_a_long_long_even_when_small() -> None:
    msg = published().mc_set_annotation("x-delivery-count", 0)
    assert types(msg) == {"x-delivery-count": "l"}
    assert msg.to_message().content.properties().headers == {"x-delivery-count": 0}


def test_x_death_counts_are_long_longs_and_its_time_a_timestamp() -> None:
    msg = published(headers={"app": "probe"}, expiration="60000")
    dead = msg.mc_record_death("rejected", "src", 1_700_000_000_123)
    entry = ["F", {"count": "l", "reason": "S", "queue": "S", "time": "T", "exchange": "S",
                   "routing-keys": ["A", ["S"]], "original-expiration": "S"}]
    assert types(dead) == {
        "app": "S", "x-first-death-queue": "S", "x-first-death-reason": "S",
        "x-first-death-exchange": "S", "x-last-death-queue": "S", "x-last-death-reason": "S",
        "x-last-death-exchange": "S", "x-death": ["A", [entry]]}
    headers: Any = dead.to_message().content.properties().headers
    assert headers["x-death"][0]["count"] == 1
    assert headers["x-death"][0]["time"].timestamp() == 1_700_000_000


def test_the_publishers_own_headers_keep_their_types() -> None:
    msg = published(headers={"n": 7, "big": 2**40, "flag": True, "CC": ["a"]})
    before = types(msg)
    assert before == {"n": "I", "big": "l", "flag": "t", "CC": ["A", ["S"]]}
    redelivered = msg.mc_set_annotation("x-delivery-count", 1)
    assert types(redelivered) == {"x-delivery-count": "l", **before}


def test_a_header_the_broker_sets_replaces_the_publishers_entry() -> None:
    msg = published(headers={"x-delivery-count": 9, "keep": 1})
    props = msg.mc_set_annotation("x-delivery-count", 2).to_message().content.properties()
    assert props.headers == {"x-delivery-count": 2, "keep": 1}


def test_other_properties_survive_the_new_table() -> None:
    msg = published(content_type="text/plain", content_encoding="gzip", delivery_mode=2,
                    priority=3, message_id="m1")
    props = msg.mc_set_annotation("x-delivery-count", 1).to_message().content.properties()
    assert (props.content_type, props.content_encoding, props.delivery_mode, props.priority,
            props.message_id, props.headers) == ("text/plain", "gzip", 2, 3, "m1",
                                                 {"x-delivery-count": 1})


def test_dropping_a_header_keeps_the_rest_as_sent() -> None:
    msg = published(headers={"CC": ["a"], "n": 7}, content_type="text/plain")
    raw = drop_header(msg.properties_bin, "CC")
    assert header_types(raw) == {"n": "I"}
    assert Content(raw).properties().content_type == "text/plain"
    assert drop_header(raw, "CC") == raw
    assert with_headers(raw, {}) == raw


#: one header of every AMQP field type, as a publisher that picks its types writes
#: them (pika would write its integers as `I` or `l` and its floats as `d`)
EVERY_TYPE = {
    "t": b"t\x01", "b": b"b" + struct.pack(">b", -5), "B": b"B" + struct.pack(">B", 200),
    "s": b"s" + struct.pack(">h", -300), "u": b"u" + struct.pack(">H", 60000),
    "I": b"I" + struct.pack(">i", 1), "i": b"i" + struct.pack(">I", 3_000_000_000),
    "l": b"l" + struct.pack(">q", 3), "f": b"f" + struct.pack(">f", 1.5),
    "d": b"d" + struct.pack(">d", 2.25), "D": b"D" + struct.pack(">BI", 2, 12345),
    "T": b"T" + struct.pack(">Q", 1_700_000_000), "S": b"S" + struct.pack(">I", 4) + b"text",
    "x": b"x" + struct.pack(">I", 3) + b"abc", "V": b"V",
    "A": b"A" + struct.pack(">I", 5) + b"b\x07" + b"s\x00\x08",
    "F": b"F" + struct.pack(">I", 11) + b"\x02bb" + b"b\x09" + b"\x02ss" + b"s\x00\x02",
}


def shortstr(text: str) -> bytes:
    return bytes([len(text)]) + text.encode()


def with_every_type(expiration: str) -> QqMessage:
    """A message whose headers hold every field type, published with `expiration`
    between properties before and after it (content-type, headers; message-id,
    timestamp, app-id)."""
    table = b"".join(shortstr(name) + value for name, value in EVERY_TYPE.items())
    flags = (1 << 15) | (1 << 13) | (1 << 8) | (1 << 7) | (1 << 6) | (1 << 3)
    raw = (struct.pack(">H", flags) + shortstr("text/plain")
           + struct.pack(">I", len(table)) + table + shortstr(expiration)
           + shortstr("m1") + struct.pack(">Q", 1_700_000_001) + shortstr("app"))
    return QqMessage.from_message(Message("", "src", Content(raw, b"body")))


@pytest.mark.parametrize("reason", ["expired", "rejected", "maxlen", "delivery_limit"])
def test_a_dead_letter_with_an_expiration_keeps_the_publishers_header_types(
        reason: str) -> None:
    # RabbitMQ 3.10.8 and 4.x give every one back in the type it was published in
    msg = with_every_type(expiration="60000")
    assert msg.mc_ttl() == 60000
    dead = msg.mc_record_death(reason, "src", 1_700_000_000_123)
    got = types(dead)
    assert got is not None
    assert {k: v for k, v in got.items() if not k.startswith("x-")} == {
        "t": "t", "b": "b", "B": "B", "s": "s", "u": "u", "I": "I", "i": "i", "l": "l",
        "f": "f", "d": "d", "D": "D", "T": "T", "S": "S", "x": "x", "V": "V",
        "A": ["A", ["b", "s"]], "F": ["F", {"bb": "b", "ss": "s"}]}
    props: Any = dead.to_message().content.properties()
    assert props.headers["x-death"][0]["original-expiration"] == "60000"
    assert (props.expiration, props.content_type, props.message_id, props.app_id,
            props.timestamp.timestamp(), dead.mc_ttl()) == (
        None, "text/plain", "m1", "app", 1_700_000_001, None)


def test_dropping_the_expiration_keeps_every_other_property_byte_for_byte() -> None:
    msg = with_every_type(expiration="5")
    raw = drop_expiration(msg.properties_bin)
    before, after = msg.properties_bin, raw
    cut = before.index(shortstr("5") + shortstr("m1"))
    assert after[2:] == before[2:cut] + before[cut + 2:]
    assert drop_expiration(raw) == raw
