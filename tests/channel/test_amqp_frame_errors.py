"""RabbitMQ's answers to broken input, byte for byte, over a raw socket.

A tune-ok the server refuses, method arguments that do not decode, a heartbeat
that carries bytes, a frame that is no frame, and a publish whose header
declares a body larger than max_message_size (refused at once, its body never
held in memory).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from pamqp import commands as C
from pamqp import frame as pframe

from channel.connection.config import Config
from releases import RELEASES
from tests.channel.conftest import Broker
from tests.channel.test_amqp_raw import Raw
from tests.waiting import hub_wait_until

MAX_MESSAGE_SIZE = 1_048_576


@pytest.fixture
def config() -> Config:
    return Config(silent_close_delay_ms=20, closing_timeout_ms=2000,
                  max_message_size=MAX_MESSAGE_SIZE)


@pytest.fixture
def raw(broker: Broker) -> Iterator[Raw]:
    r = Raw(broker.port)
    r.sock.settimeout(10)  # a missing answer fails the test instead of hanging it
    yield r
    r.close()


def frame(frame_type: int, channel: int, payload: bytes) -> bytes:
    return struct.pack(">BHI", frame_type, channel, len(payload)) + payload + b"\xce"


def method_frame(channel: int, class_id: int, method_id: int, arguments: bytes) -> bytes:
    return frame(1, channel, struct.pack(">HH", class_id, method_id) + arguments)


def header_frame(channel: int, body_size: int) -> bytes:
    return frame(2, channel, struct.pack(">HHQ", 60, 0, body_size) + b"\x00\x00")


def close_of(raw: Raw) -> tuple[int, int, str, int, int]:
    """The next method: it must be a close; (channel, code, text, class id, method id)."""
    channel, method = raw.frame()
    assert method.name in ("Connection.Close", "Channel.Close"), method
    return channel, method.reply_code, method.reply_text, method.class_id, method.method_id


def everything_until_eof(raw: Raw) -> bytes:
    """All bytes the server still sends before it closes the socket."""
    data = raw.buf
    while True:
        try:
            chunk = raw.sock.recv(65536)
        except ConnectionResetError:
            return data
        if not chunk:
            return data
        data += chunk


def closes_after_close_ok(raw: Raw) -> bool:
    raw.send(C.Connection.CloseOk())
    return everything_until_eof(raw) == b""


def tune(raw: Raw, frame_max: int, channel_max: int = 2047) -> None:
    raw.sock.sendall(b"AMQP\x00\x00\x09\x01")
    assert raw.method().name == "Connection.Start"
    raw.send(C.Connection.StartOk(client_properties={}, mechanism="PLAIN",
                                  response="\x00guest\x00guest"))
    assert raw.method().name == "Connection.Tune"
    raw.send(C.Connection.TuneOk(channel_max=channel_max, frame_max=frame_max, heartbeat=0))


def open_channel(raw: Raw, channel: int = 1) -> None:
    raw.send(C.Channel.Open(), channel)
    assert raw.method().name == "Channel.OpenOk"


# ---------------------------------------------------------------- tune-ok


@pytest.mark.parametrize(("series", "floor"), [
    ("3.10", 4096), ("4.0", 4096), ("4.2", 8192), ("4.3", 8192)])
def test_the_frame_max_floor_is_the_release_s(broker: Broker, caplog: pytest.LogCaptureFixture,
                                              series: str, floor: int) -> None:
    broker.ctx.config.release = RELEASES[series]
    at_floor, below = Raw(broker.port), Raw(broker.port)
    try:
        tune(at_floor, frame_max=floor)
        at_floor.send(C.Connection.Open(virtual_host="/"))
        assert at_floor.method().name == "Connection.OpenOk"
        open_channel(at_floor)
        tune(below, frame_max=floor - 1)
        assert everything_until_eof(below) == b""
    finally:
        at_floor.close()
        below.close()
    assert (f"negotiated frame_max = {floor - 1} is lower than the minimum allowed value "
            f"({floor})") in caplog.text


@pytest.mark.parametrize(("frame_max", "channel_max", "text"), [
    (1024, 2047, "negotiated frame_max = 1024 is lower than the minimum allowed value (8192)"),
    (131073, 2047,
     "negotiated frame_max = 131073 is higher than the maximum allowed value (131072)"),
    (0, 2047, "negotiated frame_max = 0 is higher than the maximum allowed value (131072)"),
    (131072, 0,
     "negotiated channel_max = 0 (no limit) is higher than the maximum allowed value (2047)"),
    (131072, 2048,
     "negotiated channel_max = 2048 is higher than the maximum allowed value (2047)"),
])
def test_a_refused_tune_ok_is_logged_and_the_socket_closed_without_a_frame(
        raw: Raw, caplog: pytest.LogCaptureFixture, frame_max: int, channel_max: int,
        text: str) -> None:
    """RabbitMQ (3.10 to 4.3) raises this refusal with the method `connection.tune`,
    which its reader treats as a handshake failure: no connection.close, the
    socket closed after the anti-DoS delay."""
    caplog.set_level(logging.ERROR, logger="warren.reader")
    tune(raw, frame_max=frame_max, channel_max=channel_max)
    raw.send(C.Connection.Open(virtual_host="/"))
    assert everything_until_eof(raw) == b""
    assert f"failed to negotiate connection parameters: {text}" in caplog.text


# ------------------------------------------------------ undecodable methods


def _queue_declare(name: bytes = b"q", table: bytes = b"\x00\x00\x00\x00") -> bytes:
    return b"\x00\x00" + bytes([len(name)]) + name + b"\x00" + table


@pytest.mark.parametrize(("class_id", "method_id", "arguments"), [
    (50, 10, _queue_declare()[:-2]),                    # the table's length cut short
    (60, 10, b"\x00\x00\x00\x00\x00\x01\x00\x07"),      # basic.qos with a byte too many
    (50, 10, b"\x00\x00\x40ab"),                        # a short string past the end
    (60, 40, b"\x00\x00\x00"),                          # basic.publish cut short
    (60, 40, b"\x00\x00\x00\x01q\x00\x00"),             # basic.publish with a byte too many
    (60, 80, b"\x00\x00\x00\x00\x00\x00\x00\x01"),      # basic.ack without its flags
    (60, 70, b""),                                      # basic.get without arguments
])
def test_method_arguments_that_do_not_decode_are_501_cannot_decode(
        raw: Raw, class_id: int, method_id: int, arguments: bytes) -> None:
    raw.handshake()
    open_channel(raw)
    raw.sock.sendall(method_frame(1, class_id, method_id, arguments))
    expected = "FRAME_ERROR - cannot decode <<" + ",".join(map(str, arguments)) + ">>"
    assert close_of(raw) == (0, 501, expected, class_id, method_id)
    assert closes_after_close_ok(raw)


def test_a_long_cannot_decode_text_keeps_252_characters_and_ends_in_dots(raw: Raw) -> None:
    raw.handshake()
    open_channel(raw)
    raw.sock.sendall(method_frame(1, 50, 10, _queue_declare(b"q" * 200)[:-1]))
    _, code, text, *_ = close_of(raw)
    assert code == 501 and len(text) == 255
    assert text == ("FRAME_ERROR - cannot decode <<0,0,200," + "113," * 200)[:252] + "..."


def test_malformed_utf8_in_a_short_string_is_501_without_a_method(raw: Raw) -> None:
    raw.handshake()
    open_channel(raw)
    raw.sock.sendall(method_frame(1, 50, 10, _queue_declare(b"\xff\xfe")))
    assert close_of(raw) == (0, 501, "FRAME_ERROR - Malformed UTF-8 in shortstr", 0, 0)


def test_malformed_utf8_in_a_connection_method_names_that_method(raw: Raw) -> None:
    raw.handshake()
    raw.sock.sendall(method_frame(0, 10, 50, b"\x00\xc8\x01\xff\x00\x00\x00\x00"))
    assert close_of(raw) == (0, 501, "FRAME_ERROR - Malformed UTF-8 in shortstr", 10, 50)


def test_an_undecodable_connection_method_is_an_internal_error(raw: Raw) -> None:
    """On channel 0 RabbitMQ's reader catches the decoder's refusal as a failure,
    not as an AMQP error."""
    raw.handshake()
    raw.sock.sendall(method_frame(0, 10, 50, b"\x00\xc8\x03by"))
    assert close_of(raw) == (0, 541, "INTERNAL_ERROR", 0, 0)
    assert closes_after_close_ok(raw)


def test_an_undecodable_connection_open_closes_silently(raw: Raw) -> None:
    tune(raw, frame_max=131072)
    raw.sock.sendall(method_frame(0, 10, 40, b"\x01/"))
    assert everything_until_eof(raw) == b""


def test_a_field_table_that_does_not_parse_drops_the_connection(broker: Broker,
                                                                raw: Raw) -> None:
    """RabbitMQ's reader crashes on it: no close frame, the socket goes at once."""
    raw.handshake()
    open_channel(raw)
    raw.sock.sendall(method_frame(1, 50, 10, _queue_declare(table=b"\x00\x00\x00\x03\x01aZ")))
    assert everything_until_eof(raw) == b""
    hub_wait_until(lambda: not broker.listener.readers, "the reader to end")


# --------------------------------------------------- frames that are none


@pytest.mark.parametrize(("channel", "payload", "shown"), [
    (0, b"ab", 'all octets = <<"ab">>'),
    (1, b"ab", 'all octets = <<"ab">>'),
    (0, b"\x00\x01\xff", "all octets = <<0,1,255>>"),
    (0, b"x" * 20, 'first 16 octets = <<"xxxxxxxxxxxxxxxx">>'),
    (0, b'a"\\\n\x1b', 'all octets = <<"a\\"\\\\\\n\\e">>'),
    (0, "é".encode(), 'all octets = <<"é"/utf8>>'),
    (0, b"\xff\xff", 'all octets = <<"ÿÿ">>'),
    (0, b"abcdefghijklmno\x01", "all octets = <<97,98,99,100,101,102,103,104,105,106,107,"
                                "108,109,110,\n                       111,1>>"),
])
def test_a_heartbeat_with_a_payload_is_501_unknown_frame(raw: Raw, channel: int,
                                                        payload: bytes, shown: str) -> None:
    raw.handshake()
    if channel:
        open_channel(raw, channel)
    raw.sock.sendall(frame(8, channel, payload))
    assert close_of(raw) == (0, 501, f"FRAME_ERROR - type 8, {shown}: unknown_frame", 0, 0)
    assert closes_after_close_ok(raw)


def test_a_heartbeat_with_a_payload_before_tune_ok_closes_silently(raw: Raw) -> None:
    raw.sock.sendall(b"AMQP\x00\x00\x09\x01")
    raw.method()
    raw.send(C.Connection.StartOk(client_properties={}, mechanism="PLAIN",
                                  response="\x00guest\x00guest"))
    assert raw.method().name == "Connection.Tune"
    raw.sock.sendall(frame(8, 0, b"ab"))
    assert everything_until_eof(raw) == b""


def test_a_heartbeat_with_a_payload_after_tune_ok_is_answered(raw: Raw) -> None:
    tune(raw, frame_max=131072)
    raw.sock.sendall(frame(8, 0, b"ab"))
    assert close_of(raw) == (
        0, 501, 'FRAME_ERROR - type 8, all octets = <<"ab">>: unknown_frame', 0, 0)
    assert closes_after_close_ok(raw)


def test_an_empty_heartbeat_on_channel_0_is_still_welcome(broker: Broker, raw: Raw) -> None:
    raw.handshake()
    raw.sock.sendall(frame(8, 0, b""))
    open_channel(raw)


@pytest.mark.parametrize(("data", "code", "text"), [
    (frame(9, 0, b"zz"), 501, 'FRAME_ERROR - type 9, all octets = <<"zz">>: unknown_frame'),
    (frame(1, 0, b"\x00\x14\x00"), 501,
     "FRAME_ERROR - type 1, all octets = <<0,20,0>>: unknown_frame"),
    (frame(2, 0, struct.pack(">HHQ", 60, 0, 5) + b"\x00\x00"), 505,
     "UNEXPECTED_FRAME - type 2, all octets = <<0,60,0,0,0,0,0,0,0,0,0,5,0,0>>"),
    (frame(3, 0, b"hello"), 505, 'UNEXPECTED_FRAME - type 3, all octets = <<"hello">>'),
    (pframe.marshal(C.Basic.Publish(routing_key="q"), 1) + frame(2, 1, b"\x00\x3c" + b"\x00" * 9),
     501, "FRAME_ERROR - type 2, all octets = <<0,60,0,0,0,0,0,0,0,0,0>>: unknown_frame"),
])
def test_frames_that_are_none_or_not_for_channel_0_show_their_payload(
        raw: Raw, data: bytes, code: int, text: str) -> None:
    raw.handshake()
    open_channel(raw)
    raw.sock.sendall(data)
    assert close_of(raw) == (0, code, text, 0, 0)


def test_a_frame_on_a_channel_before_open_is_505_with_its_payload(raw: Raw) -> None:
    tune(raw, frame_max=131072)
    raw.sock.sendall(method_frame(1, 20, 10, b"\x00"))
    assert close_of(raw) == (0, 505, "UNEXPECTED_FRAME - type 1, all octets = <<0,20,0,10,0>>",
                             0, 0)


# ------------------------------------------- bodies above max_message_size


def _publish_header(raw: Raw, body_size: int) -> None:
    raw.send(C.Basic.Publish(exchange="", routing_key="q"), 1)
    raw.sock.sendall(header_frame(1, body_size))


def _parsed(broker: Broker, frames: int) -> Any:
    """The reader, once it has parsed `frames` frames."""
    reader = broker.only_reader()
    hub_wait_until(lambda: reader.frames_parsed >= frames, f"{frames} frames parsed")
    return reader


def test_a_body_declared_above_max_message_size_is_refused_on_its_header_and_never_held(
        broker: Broker, raw: Raw) -> None:
    raw.handshake()
    open_channel(raw)
    before = _parsed(broker, 0).frames_parsed
    _publish_header(raw, 256 * 1024 * 1024)
    for _ in range(4):
        raw.sock.sendall(frame(3, 1, b"x" * 65536))
    reader = _parsed(broker, before + 6)
    assembler = reader.channels[1].assembler
    assert sum(map(len, assembler.body)) == 0  # four body frames came, none was kept
    assert assembler.buffered == 0
    assert close_of(raw) == (
        1, 406, "PRECONDITION_FAILED - message size 268435456 is larger than configured "
                f"max size {MAX_MESSAGE_SIZE}", 60, 40)
    assert (assembler.state, assembler.remaining) == ("discard", 256 * 1024 * 1024 - 4 * 65536)
    # the connection is still there
    raw.send(C.Connection.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0))
    assert raw.method().name == "Connection.CloseOk"


def test_after_the_refused_body_the_channel_waits_for_close_ok_and_the_connection_goes_on(
        broker: Broker, raw: Raw) -> None:
    raw.handshake()
    open_channel(raw)
    raw.send(C.Queue.Declare(queue="q", durable=True), 1)
    assert raw.method().name == "Queue.DeclareOk"
    size = 2 * MAX_MESSAGE_SIZE
    _publish_header(raw, size)
    assert close_of(raw)[:2] == (1, 406)
    for _ in range(size // 131064):
        raw.sock.sendall(frame(3, 1, b"x" * 131064))
    raw.sock.sendall(frame(3, 1, b"x" * (size % 131064)))
    raw.send(C.Queue.Declare(queue="ignored"), 1)  # the closing channel ignores it
    raw.send(C.Channel.CloseOk(), 1)
    open_channel(raw)
    raw.send(C.Basic.Publish(exchange="", routing_key="q"), 1)
    raw.sock.sendall(header_frame(1, 2) + frame(3, 1, b"ok"))
    raw.send(C.Basic.Get(queue="q", no_ack=True), 1)
    assert raw.method().name == "Basic.GetOk"
    _, header = raw.frame()
    _, body = raw.frame()
    assert (header.body_size, body.value) == (2, b"ok")  # the refused message never got in
    raw.send(C.Basic.Get(queue="q", no_ack=True), 1)
    assert raw.method().name == "Basic.GetEmpty"
    assert broker.backend.queue("/", "ignored") is None


def test_a_method_in_the_middle_of_a_refused_body_is_505(raw: Raw) -> None:
    raw.handshake()
    open_channel(raw)
    _publish_header(raw, 2 * MAX_MESSAGE_SIZE)
    assert close_of(raw)[:2] == (1, 406)
    raw.send(C.Channel.CloseOk(), 1)
    assert close_of(raw) == (
        0, 505, "UNEXPECTED_FRAME - expected content body, got non content body frame instead",
        60, 40)
