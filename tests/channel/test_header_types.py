"""The headers the broker adds to a delivery carry RabbitMQ's AMQP field types.

A client sees the type of every header value: RabbitMQ writes `x-delivery-count`
and an `x-death` entry's `count` as long-longs (`l`), its `time` as a timestamp
(`T`), its texts as long strings (`S`), and leaves the publisher's own headers
with the types the publisher gave them.
"""

from __future__ import annotations

from typing import Any

import pika

from channel.protocol.framing import Content
from channel.queue_types.backend import Message
from channel.queue_types.header_table import drop_header, with_headers
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
