"""Whether a method frame's argument bytes decode as RabbitMQ's decoder decodes them.

RabbitMQ's generated decoder (`rabbit_framing_amqp_0_9_1:decode_method_fields`)
matches the whole argument binary against the method's layout: every field
present, strings and tables within their lengths, and not one byte more. Then,
in field order, it parses each table (`rabbit_binary_parser:parse_table`) and,
for methods without content, checks each short string is UTF-8. pamqp is more
lenient (it cuts strings short and ignores trailing bytes), so the reader runs
this check first and answers what RabbitMQ answers:

* `CannotDecode`: the layout does not match (501 ``cannot decode <<...>>``);
* `MalformedUtf8`: a short string is not UTF-8 (501 ``Malformed UTF-8 in shortstr``);
* `BadTable`: a table does not parse; RabbitMQ's reader crashes on it, so the
  connection is dropped without a close frame.

Pure: class metadata and bytes in, an exception or nothing out.
"""

from __future__ import annotations

import math
import struct
from functools import cache
from typing import Any

__all__ = ["CONTENT_METHODS", "BadTable", "CannotDecode", "MalformedUtf8", "check_arguments"]

CONTENT_METHODS = frozenset({"Basic.Publish", "Basic.Return", "Basic.Deliver", "Basic.GetOk"})
"""Methods followed by content; RabbitMQ skips their UTF-8 checks for speed."""

_FIXED = {"octet": 1, "short": 2, "long": 4, "longlong": 8, "timestamp": 8}

#: table and array value types RabbitMQ parses: fixed size, or a 32-bit length prefix
_VALUE_SIZE = {"T": 8, "b": 1, "B": 1, "s": 2, "u": 2, "I": 4, "i": 4, "d": 8, "f": 4,
               "l": 8, "L": 8, "t": 1, "D": 5, "V": 0}
_LENGTH_PREFIXED = frozenset("SFAx")
_FLOATS = {"d": struct.Struct(">d"), "f": struct.Struct(">f")}
_LONG = struct.Struct(">I")


class CannotDecode(ValueError):
    """The argument bytes do not have the method's layout."""


class MalformedUtf8(ValueError):
    """A short string argument of a method without content is not UTF-8."""


class BadTable(ValueError):
    """A field table argument does not parse as RabbitMQ parses tables."""


@cache
def _layout(cls: Any) -> tuple[str, ...]:
    """The method's fields as RabbitMQ lays them out: bits packed into octets."""
    steps: list[str] = []
    bits = 0
    for name in cls.__slots__:
        kind = cls.amqp_type(name)
        if kind == "bit":
            if bits == 0 or bits == 8:
                steps.append("octet")
                bits = 0
            bits += 1
            continue
        bits = 0
        steps.append(kind)
    return tuple(steps)


def check_arguments(cls: Any, fields: bytes) -> None:
    """Raise what RabbitMQ's decoder raises for `fields`, the bytes after the method ids."""
    spans: list[tuple[str, int, int]] = []
    at, end = 0, len(fields)
    for kind in _layout(cls):
        if kind in _FIXED:
            at += _FIXED[kind]
        elif kind == "shortstr":
            if at >= end:
                raise CannotDecode(kind)
            start = at + 1
            at = start + fields[at]
            spans.append((kind, start, at))
        elif kind in ("longstr", "table"):
            if at + 4 > end:
                raise CannotDecode(kind)
            start = at + 4
            at = start + _LONG.unpack_from(fields, at)[0]
            spans.append((kind, start, at))
        else:
            raise CannotDecode(f"no layout for type {kind}")
        if at > end:
            raise CannotDecode(kind)
    if at != end:
        raise CannotDecode("trailing bytes")
    check_utf8 = cls.name not in CONTENT_METHODS
    for kind, start, stop in spans:
        if kind == "table":
            _table(fields[start:stop])
        elif kind == "shortstr" and check_utf8:
            try:
                fields[start:stop].decode("utf-8")
            except UnicodeDecodeError:
                raise MalformedUtf8("Malformed UTF-8 in shortstr") from None


def _table(data: bytes) -> None:
    at = 0
    while at < len(data):
        at += 1 + data[at]  # the name: any bytes
        at = _value(data, at)


def _array(data: bytes) -> None:
    at = 0
    while at < len(data):
        at = _value(data, at)


def _value(data: bytes, at: int) -> int:
    """Check one typed value starting at its type octet; return the offset after it."""
    if at >= len(data):
        raise BadTable("value missing")
    kind = chr(data[at])
    at += 1
    if kind in _VALUE_SIZE:
        end = at + _VALUE_SIZE[kind]
        if end > len(data):
            raise BadTable(f"value of type {kind} cut short")
        if kind in _FLOATS and not math.isfinite(_FLOATS[kind].unpack_from(data, at)[0]):
            raise BadTable("not a finite float")  # Erlang's binary match refuses NaN and inf
        return end
    if kind not in _LENGTH_PREFIXED:
        raise BadTable(f"unknown field type {kind!r}")
    if at + 4 > len(data):
        raise BadTable(f"value of type {kind} cut short")
    start = at + 4
    end = start + _LONG.unpack_from(data, at)[0]
    if end > len(data):
        raise BadTable(f"value of type {kind} cut short")
    if kind == "F":
        _table(data[start:end])
    elif kind == "A":
        _array(data[start:end])
    return end
