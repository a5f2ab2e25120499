"""The message id channels put on `publish_in` / `deliver_out` history rows: the
integer in header `x-warren-id`, whatever type the client sent it as, else None."""

from __future__ import annotations

import pytest

from channel.connection.trace_ids import id_in, msg_id_of
from channel.protocol.framing import Content


@pytest.mark.parametrize("value", [42, "42"], ids=["int", "str"])
def test_the_header_is_read_as_an_integer(value: object) -> None:
    assert msg_id_of(Content.build(b"body", headers={"x-warren-id": value})) == 42
    assert id_in({"x-warren-id": b"42"}) == 42  # a byte string as decoded


def test_messages_without_a_usable_id_have_none() -> None:
    assert msg_id_of(Content.build(b"body")) is None
    assert msg_id_of(Content.build(b"body", headers={"other": 1})) is None
    assert id_in({"x-warren-id": "not-a-number"}) is None
    assert msg_id_of(Content(b"\xff\xff\x01", b"body")) is None  # undecodable properties
