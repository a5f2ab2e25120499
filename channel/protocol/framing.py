"""AMQP 0-9-1 frames in and out, with pamqp as the codec and its traps avoided.

pamqp decodes well but validates on construction and on marshal, refusing
names and properties RabbitMQ accepts (empty or long short-strings, for one). So decoding goes
through pamqp's method classes, while every server-to-client method is encoded
here from the same class metadata (field order and types) without validation.
The two methods that come once per message, ``basic.publish`` and
``basic.ack``, are read straight into those same classes (a test holds them to
pamqp's result for any payload); all other methods go through pamqp's decoder.
Content properties are never re-encoded: the raw property bytes of the
publisher's content header are kept and replayed, as RabbitMQ keeps
`properties_bin`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from pamqp import commands, decode, encode
from pamqp.base import Frame as MethodFrame

from actors.wire import frozen_init, wire_record
from channel.protocol.access_methods import EXTRA_METHODS
from channel.protocol.method_check import BadTable, MalformedUtf8, check_arguments

__all__ = [
    "EMPTY_PROPERTIES",
    "FRAME_BODY",
    "FRAME_END",
    "FRAME_HEADER",
    "FRAME_HEARTBEAT",
    "FRAME_METHOD",
    "FRAME_MIN_SIZE",
    "HEARTBEAT_FRAME",
    "PROTOCOL_HEADER",
    "Content",
    "ContentHeader",
    "MethodFrame",
    "Out",
    "UnreadContent",
    "analyze_frame",
    "decode_method",
    "decode_properties",
    "encode_command",
    "encode_method",
    "frame_header",
    "method_ids",
    "parse_content_header",
]

PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
FRAME_METHOD, FRAME_HEADER, FRAME_BODY, FRAME_HEARTBEAT = 1, 2, 3, 8
FRAME_END = 0xCE
FRAME_MIN_SIZE = 4096
"""The lowest frame_max floor of any release (3.10, 4.0); the node's own floor is
its release's `frame_min_size` (8192 from 4.1)."""
HEARTBEAT_FRAME = b"\x08\x00\x00\x00\x00\x00\x00\xce"
EMPTY_PROPERTIES = b"\x00\x00"
_HEADER = struct.Struct(">BHI")
_CONTENT_HEADER = struct.Struct(">HHQ")

_DEFAULTS = {
    "bit": False, "octet": 0, "short": 0, "long": 0, "longlong": 0,
    "shortstr": "", "longstr": "", "table": {}, "timestamp": 0,
}


def frame_header(data: bytes | bytearray) -> tuple[int, int, int]:
    """(type, channel, payload size) from the first 7 bytes."""
    return _HEADER.unpack_from(data, 0)


def analyze_frame(frame_type: int, payload: bytes) -> str | None:
    """`rabbit_command_assembler:analyze_frame/3`: what a frame is, None if it is none.

    A method needs its two ids, a content header its class, weight and body
    size; a heartbeat has no payload at all. Anything else (an unknown type, a
    heartbeat carrying bytes) is an unknown frame.
    """
    if frame_type == FRAME_METHOD:
        return "method" if len(payload) >= 4 else None
    if frame_type == FRAME_HEADER:
        return "header" if len(payload) >= _CONTENT_HEADER.size else None
    if frame_type == FRAME_BODY:
        return "body"
    if frame_type == FRAME_HEARTBEAT:
        return "heartbeat" if not payload else None
    return None


def method_ids(method: type[MethodFrame] | MethodFrame) -> tuple[int, int]:
    """(class-id, method-id) of a pamqp method class or instance."""
    return method.index >> 16, method.index & 0xFFFF


_INDEX = struct.Struct(">I")
_PUBLISH, _ACK = commands.Basic.Publish, commands.Basic.Ack
_ACK_PAYLOAD = struct.Struct(">IqB")  # pamqp reads a longlong as signed


def _publish_fast(payload: bytes) -> MethodFrame | None:
    """`basic.publish` read directly: the same object pamqp's generic decoder
    builds, for a payload that holds exactly its fields; None sends it down the
    generic path (so a malformed one fails exactly as it does there)."""
    n = len(payload)
    if n < 9:
        return None
    x_end = 7 + payload[6]
    if x_end >= n:
        return None
    r_end = x_end + 1 + payload[x_end]
    if r_end + 1 != n:
        return None
    try:
        exchange = bytes(payload[7:x_end]).decode("utf-8")
        routing_key = bytes(payload[x_end + 1:r_end]).decode("utf-8")
    except UnicodeDecodeError:
        return None
    bits = payload[r_end]
    method = _PUBLISH.__new__(_PUBLISH)
    method.ticket = (payload[4] << 8) | payload[5]
    method.exchange = exchange
    method.routing_key = routing_key
    method.mandatory = bits & 1 != 0
    method.immediate = bits & 2 != 0
    return method


def decode_method(payload: bytes) -> MethodFrame:
    """Decode a method frame payload; KeyError for unknown ids, ValueError if malformed
    (one of `method_check`'s errors when RabbitMQ's decoder would refuse it too).

    The two methods a busy connection sends once per message, ``basic.publish``
    and ``basic.ack``, are read directly (pamqp's generic decoder walks the
    field list with a call per field); every other method, and any payload too
    short for those two, goes through pamqp.
    """
    if len(payload) < 4:
        raise ValueError("method frame too short")
    index = _INDEX.unpack_from(payload, 0)[0]
    if index == _PUBLISH.index:
        fast = _publish_fast(payload)
        if fast is not None:
            return fast
    elif index == _ACK.index and len(payload) == 13:
        _, tag, bits = _ACK_PAYLOAD.unpack_from(payload, 0)
        ack = _ACK.__new__(_ACK)
        ack.delivery_tag = tag
        ack.multiple = bits & 1 != 0
        return ack
    return _decode_generic(index, payload)


def _decode_generic(index: int, payload: bytes) -> MethodFrame:
    """pamqp's decoder, after the arguments passed RabbitMQ's own checks.

    A method pamqp does not define (`access.request`) comes from
    `access_methods`; an index neither knows is a KeyError. What pamqp still
    refuses then is a name it cannot hold as text: a table key,
    or a short string of a content-bearing method (which RabbitMQ keeps as
    bytes); it is refused as malformed UTF-8.
    """
    cls = commands.INDEX_MAPPING.get(index) or EXTRA_METHODS[index]
    fields = payload[4:]
    check_arguments(cls, fields)
    method: Any = object.__new__(cls)
    try:
        method.unmarshal(fields)
    except UnicodeDecodeError:
        raise MalformedUtf8("Malformed UTF-8 in shortstr") from None
    except (struct.error, IndexError, ValueError) as exc:
        raise BadTable(str(exc)) from exc
    return method


@frozen_init
@dataclass(frozen=True, slots=True)
class ContentHeader:
    class_id: int
    weight: int
    body_size: int
    properties_bin: bytes
    """Property flags and property list exactly as received."""


def parse_content_header(payload: bytes) -> ContentHeader:
    """Class, weight and body size; the property bytes are kept as they are, unread
    (as RabbitMQ does, which reads them only when it needs a property)."""
    if len(payload) < _CONTENT_HEADER.size:
        raise ValueError("content header too short")
    class_id, weight, body_size = _CONTENT_HEADER.unpack_from(payload, 0)
    return ContentHeader(class_id, weight, body_size, bytes(payload[12:]))


def decode_properties(properties_bin: bytes) -> commands.Basic.Properties:
    """Decode raw property bytes (flags + list) into pamqp's Basic.Properties."""
    flags, offset, word = 0, 0, 0
    while True:
        partial = struct.unpack_from(">H", properties_bin, offset)[0]
        offset += 2
        flags |= (partial & 0xFFFE) << (16 * word)
        if not partial & 1:
            break
        word += 1
    props = commands.Basic.Properties.__new__(commands.Basic.Properties)
    for name in props.__slots__:
        setattr(props, name, None)
    props.unmarshal(flags, properties_bin[offset:])
    return props


@wire_record
@dataclass(frozen=True, slots=True)
class Content:
    """A message's content as it travels: raw properties and body bytes (pickled as
    its constructor call: it crosses nodes in every remote delivery)."""

    properties_bin: bytes = EMPTY_PROPERTIES
    body: bytes = b""
    class_id: int = 60

    @property
    def body_size(self) -> int:
        """The body's size in bytes, which `basic.publish` compares with max_message_size."""
        return len(self.body)

    def properties(self) -> commands.Basic.Properties:
        return decode_properties(self.properties_bin)

    @classmethod
    def build(cls, body: bytes, **properties: Any) -> Content:
        """Content with freshly encoded properties (for messages the broker makes)."""
        props = commands.Basic.Properties.__new__(commands.Basic.Properties)
        for name in props.__slots__:
            setattr(props, name, properties.get(name))
        return cls(props.marshal(), body)


@wire_record
@dataclass(frozen=True, slots=True)
class UnreadContent(Content):
    """The content of a publish refused on its header for the body size it declares.

    Its body is never read (the frames that carry it are dropped as they come),
    so only the declared size travels, for the refusal's text.
    """

    declared_size: int = 0

    @property
    def body_size(self) -> int:
        return self.declared_size


@frozen_init
@dataclass(frozen=True, slots=True)
class Out:
    """A method to send: a pamqp class plus field values (unvalidated)."""

    cls: type[MethodFrame]
    fields: dict[str, Any]

    @classmethod
    def of(cls, method_cls: type[MethodFrame], **fields: Any) -> Out:
        return cls(method_cls, fields)

    @property
    def name(self) -> str:
        return self.cls.name


#: per method class: its index bytes and its fields in order, each as
#: ``(name, encoder, default)``, or ``(names, None, None)`` for a run of up to eight
#: bits packed into one octet
_Plan = tuple[bytes, tuple[tuple[Any, Any, Any], ...]]
_PLANS: dict[type[MethodFrame], _Plan] = {}


def _plan(cls: type[MethodFrame]) -> _Plan:
    """Read the class metadata once: which encoder and default each field takes."""
    steps: list[tuple[Any, Any, Any]] = []
    bits: list[str] = []
    for arg in cls.__slots__:
        data_type = cls.amqp_type(arg)
        if data_type == "bit":
            if len(bits) == 8:
                steps.append((tuple(bits), None, None))
                bits = []
            bits.append(arg)
            continue
        if bits:
            steps.append((tuple(bits), None, None))
            bits = []
        steps.append((arg, encode.METHODS[data_type], _DEFAULTS.get(data_type)))
    if bits:
        steps.append((tuple(bits), None, None))
    plan = _PLANS[cls] = (struct.pack(">I", cls.index), tuple(steps))
    return plan


def _method_payload(cls: type[MethodFrame], fields: dict[str, Any]) -> bytes:
    index, steps = _PLANS.get(cls) or _plan(cls)
    parts: list[bytes] = [index]
    get = fields.get
    for name, encoder, default in steps:
        if encoder is not None:
            parts.append(encoder(get(name, default)))
            continue
        octet = 0
        for offset, bit in enumerate(name):
            if get(bit):
                octet |= 1 << offset
        parts.append(bytes((octet,)))
    return b"".join(parts)


def _frame(frame_type: int, channel: int, payload: bytes) -> bytes:
    return _HEADER.pack(frame_type, channel, len(payload)) + payload + b"\xce"


def encode_method(channel: int, out: Out | MethodFrame) -> bytes:
    """One method frame; `Out` skips pamqp's validation."""
    if isinstance(out, Out):
        return _frame(FRAME_METHOD, channel, _method_payload(out.cls, out.fields))
    payload = _method_payload(type(out), {a: getattr(out, a) for a in out.__slots__})
    return _frame(FRAME_METHOD, channel, payload)


def encode_command(channel: int, out: Out | MethodFrame, content: Content | None,
                   frame_max: int) -> bytes:
    """Method frame, then (for content) header frame and body frames of frame_max − 8."""
    data = encode_method(channel, out)
    if content is None:
        return data
    body = content.body
    header = _CONTENT_HEADER.pack(content.class_id, 0, len(body)) + content.properties_bin
    parts = [data, _frame(FRAME_HEADER, channel, header)]
    chunk = len(body) if frame_max == 0 else frame_max - 8
    for start in range(0, len(body), max(chunk, 1)):
        parts.append(_frame(FRAME_BODY, channel, body[start:start + chunk]))
    return b"".join(parts)


def decode_table(data: bytes) -> dict[str, Any]:
    """A field table *without* its length prefix (AMQPLAIN responses)."""
    return decode.field_table(struct.pack(">I", len(data)) + data)[1]


__all__ += ["decode_table"]
