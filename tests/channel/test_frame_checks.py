"""The pure parts behind RabbitMQ's answers to broken input.

Method arguments checked as RabbitMQ's decoder checks them, payloads printed as
Erlang's ``~tp`` and ``~w`` print them (the expected texts come from Erlang/OTP
and from RabbitMQ 3.10 and 4.0), reply texts cut as RabbitMQ cuts them, and the
assembler dropping the body of a publish refused for its declared size.
"""

from __future__ import annotations

import struct

import pytest
from pamqp import commands as C

from channel.errors import AmqpError
from channel.protocol.assembler import Assembler
from channel.protocol.frame_text import cannot_decode, erlang_binary, frame_error_text
from channel.protocol.framing import UnreadContent, analyze_frame
from channel.protocol.method_check import BadTable, CannotDecode, MalformedUtf8, check_arguments

# ------------------------------------------------------------- method_check

EMPTY_TABLE = b"\x00\x00\x00\x00"


def declare(name: bytes = b"q", table: bytes = EMPTY_TABLE) -> bytes:
    return b"\x00\x00" + bytes([len(name)]) + name + b"\x00" + table


def table(*entries: bytes) -> bytes:
    body = b"".join(entries)
    return struct.pack(">I", len(body)) + body


@pytest.mark.parametrize(("cls", "fields"), [
    (C.Queue.Declare, declare()),
    (C.Queue.Declare, declare(table=table(b"\x01aS\x00\x00\x00\x02hi", b"\x01bI\x00\x00\x00\x01"))),
    (C.Queue.Declare, declare(table=table(b"\x01aF" + table(b"\x01bA\x00\x00\x00\x02tV")))),
    (C.Basic.Qos, b"\x00\x00\x00\x00\x00\x01\x00"),
    (C.Basic.Ack, b"\x00" * 8 + b"\x01"),
    (C.Basic.Publish, b"\x00\x00\x00\x01\xff\x00"),  # content methods skip the UTF-8 check
    (C.Connection.TuneOk, b"\x07\xff\x00\x02\x00\x00\x00\x3c"),
    (C.Channel.CloseOk, b""),
])
def test_arguments_rabbitmq_decodes(cls: object, fields: bytes) -> None:
    check_arguments(cls, fields)


@pytest.mark.parametrize(("cls", "fields"), [
    (C.Queue.Declare, declare()[:-1]),
    (C.Queue.Declare, declare() + b"\x00"),
    (C.Queue.Declare, b"\x00\x00\x09q"),
    (C.Basic.Qos, b"\x00\x00\x00\x00\x00\x01"),
    (C.Basic.Ack, b"\x00" * 8),
    (C.Basic.Publish, b"\x00\x00\x00\x00\x00\x00"),
    (C.Channel.CloseOk, b"\x00"),
])
def test_arguments_that_do_not_have_the_method_layout(cls: object, fields: bytes) -> None:
    with pytest.raises(CannotDecode):
        check_arguments(cls, fields)


def test_a_short_string_that_is_not_utf8() -> None:
    with pytest.raises(MalformedUtf8, match=r"^Malformed UTF-8 in shortstr$"):
        check_arguments(C.Queue.Declare, declare(b"\xc3"))


@pytest.mark.parametrize("bad", [
    table(b"\x01aZ"),                                  # no such type
    table(b"\x01aS\x00\x00\x00\x09hi"),                # a long string past its table
    table(b"\x01a"),                                   # a name without a value
    table(b"\x01a\x00"),                               # pamqp's void, not RabbitMQ's
    table(b"\x01ad" + struct.pack(">d", float("nan"))),  # Erlang's float match refuses NaN
    table(b"\x01aF" + table(b"\x01bQ")),               # a bad type inside a nested table
])
def test_tables_rabbitmq_cannot_parse(bad: bytes) -> None:
    with pytest.raises(BadTable):
        check_arguments(C.Queue.Declare, declare(table=bad))


def test_the_layout_is_checked_before_utf8_and_tables() -> None:
    with pytest.raises(CannotDecode):
        check_arguments(C.Queue.Declare, declare(b"\xff", table(b"\x01aZ")) + b"\x00")


@pytest.mark.parametrize(("frame_type", "payload", "kind"), [
    (1, b"\x00\x14\x00\x0a", "method"), (1, b"\x00\x14\x00", None),
    (2, b"\x00" * 12, "header"), (2, b"\x00" * 11, None),
    (3, b"", "body"), (8, b"", "heartbeat"), (8, b"x", None), (9, b"", None),
])
def test_what_a_frame_is(frame_type: int, payload: bytes, kind: str | None) -> None:
    assert analyze_frame(frame_type, payload) == kind


# --------------------------------------------------------------- frame_text


@pytest.mark.parametrize(("data", "column", "printed"), [
    (b"", 21, "<<>>"),
    (b"ab", 21, '<<"ab">>'),
    (b'a"\\\n\r\t\x0b\x08\x0c\x1b', 21, '<<"a\\"\\\\\\n\\r\\t\\v\\b\\f\\e">>'),
    ("é".encode(), 21, '<<"é"/utf8>>'),
    (b"\xff\xa0", 21, '<<"ÿ\xa0">>'),               # not UTF-8, printable as Latin-1
    ("€".encode(), 21, "<<226,130,172>>"),           # UTF-8, but not printable
    ("ȩ".encode(), 21, "<<200,169>>"),               # UTF-8 outside Latin-1: no Latin-1 try
    (b"a\x7f", 21, "<<97,127>>"),
    (b"\xff\x00" * 8, 21, "<<255,0,255,0,255,0,255,0,255,0,255,0,255,0,255,0>>"),
    # the whole binary fits up to column 81; past it, lines of at most 79
    (bytes([10, 1, 255, 1, 255, 100, 100, 10, 10, 255, 255, 1, 10, 255, 1, 10]), 26,
     "<<10,1,255,1,255,100,100,10,10,255,255,1,10,255,1,10>>"),
    (bytes([13, 27, 97, 160, 255, 160, 12, 99, 127, 9, 8, 97, 255, 92, 160, 11]), 26,
     "<<13,27,97,160,255,160,12,99,127,9,8,97,255,92,160,11>>"),
    (b"abcdefghijklmno\x01", 21,
     "<<97,98,99,100,101,102,103,104,105,106,107,108,109,110,\n" + " " * 23 + "111,1>>"),
    (b"\xff\x01" * 8, 27,
     "<<255,1,255,1,255,1,255,1,255,1,255,1,255,1,255,1>>"),
    (bytes([200] * 15 + [1]), 27,
     "<<200,200,200,200,200,200,200,200,200,200,200,200,\n" + " " * 29 + "200,200,200,1>>"),
])
def test_binaries_print_as_erlang_tp_prints_them(data: bytes, column: int, printed: str) -> None:
    assert erlang_binary(data, column) == printed


def test_frame_error_texts_show_at_most_16_octets() -> None:
    assert frame_error_text(8, b"x" * 17, "unknown_frame") == (
        'type 8, first 16 octets = <<"xxxxxxxxxxxxxxxx">>: unknown_frame')
    assert frame_error_text(1, b"", "{frame_too_large,9000,8184}") == (
        "type 1, all octets = <<>>: {frame_too_large,9000,8184}")


def test_cannot_decode_prints_integers_even_for_text() -> None:
    assert cannot_decode(b"\x00\x00\x01q") == "cannot decode <<0,0,1,113>>"


def test_reply_texts_over_255_characters_keep_252_and_three_dots() -> None:
    assert AmqpError("NOT_FOUND", "x" * 243).reply_text == "NOT_FOUND - " + "x" * 243
    cut = AmqpError("NOT_FOUND", "x" * 244).reply_text
    assert cut == "NOT_FOUND - " + "x" * 240 + "..." and len(cut) == 255


# ---------------------------------------------------------------- assembler

PUBLISH = C.Basic.Publish(exchange="", routing_key="q")


def header(size: int) -> bytes:
    return struct.pack(">HHQ", 60, 0, size) + b"\x00\x00"


def test_a_body_above_the_limit_is_handed_over_at_once_and_its_frames_dropped() -> None:
    a = Assembler(max_body_size=10)
    a.method_frame(PUBLISH)
    command = a.content_frame(2, header(25))
    assert command is not None and command.method is PUBLISH
    assert command.content == UnreadContent(b"\x00\x00", b"", 60, 25)
    assert command.content.body_size == 25
    for chunk in (b"x" * 10, b"y" * 10):
        assert a.content_frame(3, chunk) is None
        assert (a.state, a.body, a.buffered) == ("discard", [], 0)
    assert a.content_frame(3, b"z" * 5) is None
    assert (a.state, a.remaining) == ("method", 0)
    # the next publish is assembled as usual
    a.method_frame(PUBLISH)
    a.content_frame(2, header(3))
    assert a.buffered == 0
    assert a.content_frame(3, b"ab") is None and a.buffered == 2
    done = a.content_frame(3, b"c")
    assert done is not None and done.content is not None and done.content.body == b"abc"
    assert a.buffered == 0


def test_a_body_at_the_limit_is_assembled() -> None:
    a = Assembler(max_body_size=3)
    a.method_frame(PUBLISH)
    a.content_frame(2, header(3))
    done = a.content_frame(3, b"abc")
    assert done is not None and done.content is not None and done.content.body_size == 3


@pytest.mark.parametrize(("frame_type", "payload", "code", "text"), [
    (1, None, 505, "UNEXPECTED_FRAME - expected content body, got non content body frame "
                   "instead"),
    (2, header(1), 505, "UNEXPECTED_FRAME - expected content body, got non content body "
                        "frame instead"),
    (3, b"x" * 16, 501, "FRAME_ERROR - content body frame exceeds remaining content size"),
])
def test_a_dropped_body_keeps_the_frame_rules(frame_type: int, payload: bytes | None,
                                              code: int, text: str) -> None:
    a = Assembler(max_body_size=10)
    a.method_frame(PUBLISH)
    a.content_frame(2, header(15))
    with pytest.raises(AmqpError) as info:
        if payload is None:
            a.method_frame(PUBLISH)
        else:
            a.content_frame(frame_type, payload)
    assert (info.value.code, info.value.reply_text, info.value.method) == (code, text, (60, 40))


def test_a_header_above_512_mib_is_a_frame_error_where_the_release_checks_it() -> None:
    """RabbitMQ 4.2.9 and 4.3 refuse such a header outright."""
    a = Assembler(max_body_size=16_777_216, header_size_check=True)
    a.method_frame(PUBLISH)
    with pytest.raises(AmqpError) as info:
        a.content_frame(2, header(536_870_913))
    assert info.value.reply_text == ("FRAME_ERROR - content body size 536870913 exceeds "
                                     "maximum allowed size 536870912")


def test_a_header_above_512_mib_is_left_to_max_message_size_before_4_2() -> None:
    """RabbitMQ 3.10 and 4.0 take the header; the channel refuses the size."""
    a = Assembler(max_body_size=16_777_216, header_size_check=False)
    a.method_frame(PUBLISH)
    command = a.content_frame(2, header(536_870_913))
    assert command is not None and command.content is not None
    assert command.content.body_size == 536_870_913 and a.state == "discard"
