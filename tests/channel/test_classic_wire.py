"""What crosses the node link for a classic queue, and how it is pickled.

A consumer on another node than its classic queue gets every delivery over the node
link, and its acks and ``notify_sent`` go back the same way. Each of those records,
and the message inside a delivery, pickles as a constructor call: unpickling runs
the class's ``__init__`` with the field values, never a ``__setstate__`` that walks
``dataclasses.fields`` (which cost as much as the rest of the delivery). A message
travels with its raw properties only; the node that needs them decoded decodes them.
"""

from __future__ import annotations

import pickle
import pickletools
from typing import Any

import pytest

from channel.protocol.framing import Content, UnreadContent
from channel.queue_types.backend import Message
from classic import commands as c
from classic import effects as e


def _message() -> Message:
    content = Content.build(b"0123456789abcdef", delivery_mode=1, priority=3)
    return Message("", "q", content, ("q",), content.properties())


def _opcodes(obj: Any) -> set[str]:
    return {op.name for op, _arg, _pos in pickletools.genops(pickle.dumps(obj, 5))}


RECORDS = [
    c.Deliver("ch", 7, "", ("q",), 16, False, None, None, b"x"),
    c.Ack("ch", (1, 2)),
    c.Reject("ch", (3,), True),
    c.NotifySent("ch", 50),
    e.Confirm("ch", (7,)),
    e.Deliver("ch", "ctag", True, (e.Delivery(1, False, "", ("q",), 16, False, 0, None,
                                              b"x"),)),
    e.CancelConsumer("ch", "ctag"),
    Content(b"\x00\x00", b"body"),
    UnreadContent(b"\x00\x00", b"", 60, 1000),
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r).__name__)
def test_a_record_crossing_nodes_unpickles_through_its_constructor(record: Any) -> None:
    assert "BUILD" not in _opcodes(record)
    copy = pickle.loads(pickle.dumps(record, 5))
    assert copy == record and type(copy) is type(record)


def test_a_message_travels_with_its_raw_properties_only() -> None:
    message = _message()
    assert "BUILD" not in _opcodes(message)
    copy = pickle.loads(pickle.dumps(message, 5))
    assert copy == message
    assert copy.properties is None
    props = copy.decoded_properties()
    assert (props.delivery_mode, props.priority) == (1, 3)


def test_a_delivery_to_another_node_carries_its_message_unchanged() -> None:
    message = _message()
    effect = e.Deliver("ch", "ctag", True,
                       (e.Delivery(9, True, "", ("q",), 16, False, 0, None, message),))
    copy = pickle.loads(pickle.dumps(effect, 5))
    (delivery,) = copy.messages
    assert delivery.content.content == message.content
    assert (delivery.msg_id, delivery.redelivered) == (9, True)
