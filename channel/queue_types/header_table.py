"""Headers the broker adds to a delivery, written with RabbitMQ's field types.

An AMQP field table says the type of every value, and clients keep it (pika
shows a long-long as `0L` in Python 2, Java clients give a `Long` or an
`Integer`). RabbitMQ writes the integers it adds as long-long (`l`):
`x-delivery-count`, an `x-death` entry's `count`, every integer `x-`
annotation; its `time` is a timestamp (`T`), the texts long strings (`S`).
pamqp instead picks the smallest integer type that holds the value (`b` for
0), and re-encodes a client's own headers the same way, so the table is built
here: the broker's headers first, in RabbitMQ's types, then the publisher's
entries byte for byte as they came, as RabbitMQ keeps a client's table. For the
same reason a dead letter loses its `expiration` property by cutting it out of
the property bytes (`drop_expiration`), never by encoding the properties again.

Pure: bytes in, bytes out.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping
from typing import Any

from pamqp import encode

__all__ = ["Long", "drop_expiration", "drop_header", "with_headers"]

#: property flag bits of basic's first three properties
_CONTENT_TYPE, _CONTENT_ENCODING, _HEADERS = 1 << 15, 1 << 14, 1 << 13
#: basic's properties up to `expiration`, in flag-bit order, with their encoding:
#: a short string, an octet, or a table
_UP_TO_EXPIRATION = ((15, "shortstr"), (14, "shortstr"), (13, "table"), (12, "octet"),
                     (11, "octet"), (10, "shortstr"), (9, "shortstr"))
_EXPIRATION = 1 << 8

#: the width of each fixed-size field value (AMQP 0-9-1 with RabbitMQ's errata)
_WIDTH = {b"t": 1, b"b": 1, b"B": 1, b"s": 2, b"u": 2, b"I": 4, b"i": 4, b"l": 8,
          b"f": 4, b"d": 8, b"D": 5, b"T": 8, b"V": 0}


class Long(int):
    """An integer the broker sends as a signed 64-bit long-long (field type `l`),
    whatever its size: RabbitMQ's `long` in a table it builds."""

    __slots__ = ()


def with_headers(properties_bin: bytes, extra: Mapping[str, Any]) -> bytes:
    """The properties with `extra` added to their headers table (replacing entries of
    the same name), the publisher's other entries kept with their own types."""
    if not extra:
        return properties_bin
    flags, start, end = _locate(properties_bin)
    kept = b"".join(raw for name, raw in _entries(properties_bin, start, end)
                    if name not in extra)
    table = b"".join(_entry(name, value) for name, value in extra.items()) + kept
    return _replace(properties_bin, flags, start, end, table)


def drop_header(properties_bin: bytes, name: str) -> bytes:
    """The properties without header `name` (unchanged when it is absent)."""
    flags, start, end = _locate(properties_bin)
    entries = list(_entries(properties_bin, start, end))
    if all(n != name for n, _raw in entries):
        return properties_bin
    table = b"".join(raw for n, raw in entries if n != name)
    return _replace(properties_bin, flags, start, end, table)


def drop_expiration(properties_bin: bytes) -> bytes:
    """The properties without `expiration` (unchanged when it is absent), every other
    property, the headers table included, byte for byte as it was."""
    flags = struct.unpack_from(">H", properties_bin, 0)[0]
    if not flags & _EXPIRATION:
        return properties_bin
    if flags & 1:
        raise ValueError("basic properties never need a second flag word")
    at = 2
    for bit, kind in _UP_TO_EXPIRATION:
        if flags & (1 << bit):
            at += _property_width(kind, properties_bin, at)
    end = at + _property_width("shortstr", properties_bin, at)
    return (struct.pack(">H", flags & ~_EXPIRATION) + properties_bin[2:at]
            + properties_bin[end:])


def _property_width(kind: str, data: bytes, at: int) -> int:
    """How many bytes the property of encoding `kind` at `at` takes."""
    if kind == "octet":
        return 1
    if kind == "shortstr":
        return 1 + data[at]
    return 4 + struct.unpack_from(">I", data, at)[0]


def _locate(properties_bin: bytes) -> tuple[int, int, int]:
    """The property flags and where the headers table's entries start and end
    (start == end at the table's place when there is none)."""
    flags = struct.unpack_from(">H", properties_bin, 0)[0]
    if flags & 1:
        raise ValueError("basic properties never need a second flag word")
    at = 2
    for bit in (_CONTENT_TYPE, _CONTENT_ENCODING):
        if flags & bit:
            at += 1 + properties_bin[at]
    if not flags & _HEADERS:
        return flags, at, at
    size = struct.unpack_from(">I", properties_bin, at)[0]
    return flags, at + 4, at + 4 + size


def _replace(properties_bin: bytes, flags: int, start: int, end: int, table: bytes) -> bytes:
    """The properties with the entries between `start` and `end` replaced by `table`."""
    head = struct.pack(">H", flags | _HEADERS)
    before = properties_bin[2:start - 4] if flags & _HEADERS else properties_bin[2:start]
    return head + before + struct.pack(">I", len(table)) + table + properties_bin[end:]


def _entries(data: bytes, at: int, end: int) -> Iterator[tuple[str, bytes]]:
    """Each entry of a table as (name, its raw bytes: name, type and value)."""
    while at < end:
        first = at
        name = data[at + 1:at + 1 + data[at]].decode()
        at = _skip(data, at + 1 + data[at])
        yield name, data[first:at]


def _skip(data: bytes, at: int) -> int:
    """Where the field value at `at` (its type letter) ends."""
    kind = data[at:at + 1]
    at += 1
    if kind in _WIDTH:
        return at + _WIDTH[kind]
    if kind in (b"S", b"x", b"F", b"A"):
        return at + 4 + struct.unpack_from(">I", data, at)[0]
    raise ValueError(f"unknown field type {kind!r}")


def _entry(name: str, value: Any) -> bytes:
    return encode.short_string(name) + _value(value)


def _value(value: Any) -> bytes:
    if isinstance(value, Long):
        return b"l" + struct.pack(">q", value)
    if isinstance(value, Mapping):
        table = b"".join(_entry(k, v) for k, v in value.items())
        return b"F" + struct.pack(">I", len(table)) + table
    if isinstance(value, list | tuple):
        items = b"".join(_value(v) for v in value)
        return b"A" + struct.pack(">I", len(items)) + items
    return encode.encode_table_value(value)
