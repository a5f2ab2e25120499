"""Frames, command assembly, tune rules, login checks and throttle decisions."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pamqp import commands as C
from pamqp import frame as pframe

from channel.access.auth import Users, check_login, is_loopback
from channel.errors import AmqpError
from channel.limits.throttle import PAUSE_HEARTBEAT, RESUME_HEARTBEAT, SEND_UNBLOCKED, Throttle
from channel.protocol.assembler import Assembler
from channel.protocol.framing import (
    Content,
    Out,
    decode_method,
    decode_properties,
    encode_command,
    encode_method,
)
from channel.protocol.tune import TuneError, negotiate


def test_server_methods_are_encoded_without_pamqp_validation() -> None:
    data = encode_method(3, Out.of(C.Basic.Deliver, consumer_tag="tag with space!",
                                   delivery_tag=7, redelivered=True, exchange="é x",
                                   routing_key="k"))
    _, channel, method = pframe.unmarshal(data)
    assert channel == 3
    assert (method.consumer_tag, method.delivery_tag, method.redelivered, method.exchange) == (
        "tag with space!", 7, True, "é x")


def _built_with_defaults(cls: type) -> object | None:
    try:
        method = cls()
        method.marshal()
    except (TypeError, ValueError):
        return None  # pamqp wants arguments for it: see the examples below
    return method


_EXAMPLES = [m for m in map(_built_with_defaults, C.INDEX_MAPPING.values()) if m is not None] + [
    C.Connection.Close(320, "CONNECTION_FORCED", 0, 0), C.Channel.Flow(False),
    C.Channel.FlowOk(True), C.Channel.Close(404, "NOT_FOUND - no queue 'q'", 50, 10),
    C.Queue.DeclareOk("q", 3, 1), C.Queue.PurgeOk(2), C.Queue.DeleteOk(5),
    C.Basic.ConsumeOk("ctag"), C.Basic.Cancel("ctag", True), C.Basic.CancelOk("ctag"),
    C.Basic.Return(312, "NO_ROUTE", "x", "k"), C.Basic.Deliver("ctag", 2**40, True, "x", "k"),
    C.Basic.GetOk(9, False, "", "q", 4), C.Basic.Reject(3, False),
    C.Basic.Nack(7, multiple=True, requeue=False),
    C.Queue.Declare(queue="q", passive=True, exclusive=True, auto_delete=True, nowait=True),
]


@pytest.mark.parametrize("method", _EXAMPLES, ids=lambda m: m.name)
def test_methods_encode_as_pamqp_marshals_them(method: object) -> None:
    """After the class and method ids, the per-class field plans (bits packed
    eight to an octet) give the bytes pamqp marshals."""
    fields = {a: getattr(method, a) for a in method.__slots__}
    assert encode_method(1, Out.of(type(method), **fields))[11:-1] == method.marshal()


def test_unbind_ok_has_method_id_51() -> None:
    payload = encode_method(1, Out.of(C.Exchange.UnbindOk))[7:-1]
    assert struct.unpack(">HH", payload[:4]) == (40, 51)


def test_content_is_split_into_frame_max_minus_8_and_properties_replayed() -> None:
    content = Content.build(b"x" * 20, headers={"h": "v"}, delivery_mode=2)
    data = encode_command(1, Out.of(C.Basic.Deliver, consumer_tag="c", delivery_tag=1,
                                    exchange="", routing_key="q"), content, frame_max=16)
    frames = []
    while data:
        n, _, f = pframe.unmarshal(data)
        frames.append(f)
        data = data[n:]
    assert [type(f).__name__ for f in frames] == ["Deliver", "ContentHeader"] + ["ContentBody"] * 3
    assert [len(f.value) for f in frames[2:]] == [8, 8, 4]
    assert frames[1].properties.headers == {"h": "v"}
    assert decode_properties(content.properties_bin).delivery_mode == 2


def test_empty_body_has_no_body_frame() -> None:
    data = encode_command(1, Out.of(C.Basic.GetOk, delivery_tag=1, exchange="", routing_key="q",
                                    message_count=0), Content(), frame_max=131072)
    n1, _, _ = pframe.unmarshal(data)
    n2, _, _ = pframe.unmarshal(data[n1:])
    assert n1 + n2 == len(data)


def test_decode_method_rejects_unknown_ids() -> None:
    with pytest.raises(KeyError):
        decode_method(struct.pack(">HH", 99, 1))
    publish = decode_method(pframe.marshal(C.Basic.Publish(exchange="x", routing_key="k"), 1)[7:-1])
    assert (publish.exchange, publish.routing_key) == ("x", "k")


def _generic_or_error(payload: bytes) -> object:
    """What pamqp's generic decoder makes of `payload`: its fields, or the error type."""
    from channel.protocol.framing import _decode_generic

    try:
        m = _decode_generic(struct.unpack_from(">I", payload)[0], payload)
    except Exception as exc:
        return type(exc)
    return (type(m), {a: getattr(m, a) for a in m.__slots__})


def _fast_or_error(payload: bytes) -> object:
    try:
        m = decode_method(payload)
    except Exception as exc:
        return type(exc)
    return (type(m), {a: getattr(m, a) for a in m.__slots__})


_shortstr = st.binary(max_size=12).map(lambda b: bytes([len(b)]) + b)


@settings(max_examples=400, deadline=None)
@given(index=st.sampled_from([C.Basic.Publish.index, C.Basic.Ack.index]),
       body=st.one_of(
           st.binary(max_size=24),
           st.tuples(st.binary(min_size=2, max_size=2), _shortstr, _shortstr,
                     st.binary(max_size=2)).map(b"".join),
           st.tuples(st.binary(min_size=8, max_size=8), st.binary(max_size=2)).map(b"".join)),
       cut=st.integers(0, 3))
def test_publish_and_ack_read_directly_agree_with_pamqp(index: int, body: bytes,
                                                         cut: int) -> None:
    """basic.publish and basic.ack skip pamqp's field walk; for any payload, well
    formed, truncated or with bad UTF-8, the result (or the error) is pamqp's."""
    payload = struct.pack(">I", index) + body
    payload = payload[:len(payload) - cut] if cut < len(body) else payload
    assert _fast_or_error(payload) == _generic_or_error(payload)


def test_publish_read_directly_keeps_names_and_flags() -> None:
    x = "é x".encode()  # a name pamqp itself would refuse to encode
    payload = struct.pack(">IH", C.Basic.Publish.index, 0) + bytes([len(x)]) + x + b"\x03k.1\x01"
    publish = decode_method(payload)
    assert type(publish) is C.Basic.Publish
    assert (publish.ticket, publish.exchange, publish.routing_key, publish.mandatory,
            publish.immediate) == (0, "é x", "k.1", True, False)
    ack = decode_method(pframe.marshal(C.Basic.Ack(delivery_tag=2**40, multiple=True), 1)[7:-1])
    assert (type(ack), ack.delivery_tag, ack.multiple) == (C.Basic.Ack, 2**40, True)


def header_payload(class_id: int, size: int, weight: int = 0) -> bytes:
    return struct.pack(">HHQ", class_id, weight, size) + b"\x00\x00"


PUBLISH = C.Basic.Publish(exchange="", routing_key="q")


def test_publish_completes_after_its_last_body_frame() -> None:
    a = Assembler()
    assert a.method_frame(PUBLISH) is None
    assert a.content_frame(2, header_payload(60, 5)) is None
    assert a.content_frame(3, b"he") is None
    command = a.content_frame(3, b"llo")
    assert command is not None and command.content is not None
    assert command.content.body == b"hello"
    assert a.state == "method"


def test_zero_size_body_completes_on_the_header() -> None:
    a = Assembler()
    a.method_frame(PUBLISH)
    command = a.content_frame(2, header_payload(60, 0))
    assert command is not None and command.content is not None and command.content.body == b""


def test_method_without_content_completes_at_once() -> None:
    command = Assembler().method_frame(C.Basic.Ack(delivery_tag=1))
    assert command is not None and command.content is None


@pytest.mark.parametrize(
    ("steps", "code", "text"),
    [
        ([("body", b"x")], 505, "UNEXPECTED_FRAME - expected method frame, got non method "
                                "frame instead"),
        ([("method", PUBLISH), ("method", PUBLISH)], 505,
         "UNEXPECTED_FRAME - expected content header for class 60, got non content header "
         "frame instead"),
        ([("method", PUBLISH), ("header", header_payload(50, 1))], 505,
         "UNEXPECTED_FRAME - expected content header for class 60, got one for class 50 "
         "instead"),
        ([("method", PUBLISH), ("header", header_payload(60, 1, weight=1))], 505, None),
        ([("method", PUBLISH), ("header", header_payload(60, 536_870_913))], 501,
         "FRAME_ERROR - content body size 536870913 exceeds maximum allowed size 536870912"),
        ([("method", PUBLISH), ("header", header_payload(60, 2)), ("body", b"xyz")], 501,
         "FRAME_ERROR - content body frame exceeds remaining content size"),
        ([("method", PUBLISH), ("header", header_payload(60, 2)), ("method", PUBLISH)], 505,
         "UNEXPECTED_FRAME - expected content body, got non content body frame instead"),
    ],
)
def test_out_of_order_frames(steps: list[tuple[str, object]], code: int,
                             text: str | None) -> None:
    a = Assembler()
    with pytest.raises(AmqpError) as info:
        for kind, value in steps:
            if kind == "method":
                a.method_frame(value)  # type: ignore[arg-type]
            else:
                a.content_frame(2 if kind == "header" else 3, value)  # type: ignore[arg-type]
    assert info.value.code == code and info.value.hard
    if text is not None:
        assert info.value.reply_text == text


@pytest.mark.parametrize(
    ("client", "floor", "expected"),
    [
        ((131072, 2047, 60), 8192, (131072, 2047, 60)),
        ((8192, 1, 0), 8192, (8192, 1, 0)),
        ((4096, 1, 0), 4096, (4096, 1, 0)),  # the floor up to RabbitMQ 4.0
    ],
)
def test_tune_ok_accepted(client: tuple[int, int, int], floor: int,
                          expected: tuple[int, int, int]) -> None:
    t = negotiate(*client, server_frame_max=131072, server_channel_max=2047, frame_min=floor)
    assert (t.frame_max, t.channel_max, t.heartbeat) == expected


@pytest.mark.parametrize(
    ("client", "floor", "text"),
    [
        ((4095, 10, 0), 4096, "negotiated frame_max = 4095 is lower than the minimum allowed "
                              "value (4096)"),
        ((4096, 10, 0), 8192, "negotiated frame_max = 4096 is lower than the minimum allowed "
                              "value (8192)"),
        ((200000, 10, 0), 8192, "negotiated frame_max = 200000 is higher than the maximum "
                                "allowed value (131072)"),
        ((0, 10, 0), 8192, "negotiated frame_max = 0 is higher than the maximum allowed value "
                           "(131072)"),
        ((8192, 0, 0), 8192, "negotiated channel_max = 0 (no limit) is higher than the maximum "
                             "allowed value (2047)"),
        ((8192, 4000, 0), 8192, "negotiated channel_max = 4000 is higher than the maximum "
                                "allowed value (2047)"),
    ],
)
def test_tune_ok_refused(client: tuple[int, int, int], floor: int, text: str) -> None:
    with pytest.raises(TuneError) as info:
        negotiate(*client, server_frame_max=131072, server_channel_max=2047, frame_min=floor)
    assert str(info.value) == text


def test_login_plain_and_amqplain_and_loopback_rule() -> None:
    users = Users.default()
    assert check_login(users, "PLAIN", "\x00guest\x00guest", "127.0.0.1").name == "guest"
    table = b"\x05LOGINS\x00\x00\x00\x05guest\x08PASSWORDS\x00\x00\x00\x05guest"
    assert check_login(users, "AMQPLAIN", table, "::1").name == "guest"
    from channel.access.auth import LoginRefused
    with pytest.raises(LoginRefused):
        check_login(users, "PLAIN", "\x00guest\x00wrong", "127.0.0.1")
    with pytest.raises(LoginRefused, match="can only connect via localhost"):
        check_login(users, "PLAIN", "\x00guest\x00guest", "10.1.2.3")
    with pytest.raises(AmqpError) as info:
        check_login(users, "CRAM-MD5", "", "127.0.0.1")
    assert info.value.reply_text == (
        "COMMAND_INVALID - unknown authentication mechanism 'CRAM-MD5'")


@pytest.mark.parametrize(("addr", "loop"), [("127.0.0.1", True), ("127.9.9.9", True),
                                            ("::1", True), ("::ffff:127.0.0.1", True),
                                            ("192.168.0.1", False), ("bogus", False)])
def test_is_loopback(addr: str, loop: bool) -> None:
    assert is_loopback(addr) is loop


def test_throttle_blocks_only_after_a_publish_and_notifies_capable_clients() -> None:
    t = Throttle(capability=True)
    t.blocked_by.add("memory")
    assert t.control("running", False, 0) == ("running", [])   # consumers keep working
    assert t.connection_state("running", False, 0) == "blocking"
    state, effects = t.publish_received("running", 10)
    assert state == "blocked"
    assert effects == [PAUSE_HEARTBEAT, ("send_blocked", "low on memory")]
    t.blocked_by.add("disk")
    assert t.publish_received("blocked", 11) == ("blocked", [])   # one notification per period
    assert t.reason() == "low on memory & disk"
    t.blocked_by -= {"memory", "disk"}
    assert t.control("blocked", False, 12) == ("running", [RESUME_HEARTBEAT, SEND_UNBLOCKED])


def test_credit_block_never_sends_connection_blocked() -> None:
    t = Throttle(capability=True)
    assert t.control("running", True, 0) == ("running", [])
    state, effects = t.publish_received("running", 1)
    assert (state, effects) == ("blocked", [PAUSE_HEARTBEAT])
    assert t.connection_state(state, True, 2) == "flow"
    assert t.control("blocked", False, 3) == ("running", [RESUME_HEARTBEAT])


def test_clients_without_the_capability_hear_nothing() -> None:
    t = Throttle(capability=False)
    t.blocked_by.add("disk")
    assert t.publish_received("running", 0) == ("blocked", [PAUSE_HEARTBEAT])
