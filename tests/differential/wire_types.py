"""The AMQP field types of a delivery's headers, read from the bytes on the wire.

pika decodes every integer of a field table to a Python int, whatever type the
broker wrote (`b` short-short, `I` long, `l` long-long, ...), so comparing
decoded headers cannot tell two brokers apart that encode a header differently.
`capture()` keeps the raw property bytes of every content header pika decodes
while it is active, and `header_types` walks their headers table, naming each
value's type letter: `{"x-delivery-count": "l", "x-death": ["A", [["F", {...}]]]}`.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pika.spec

__all__ = ["capture", "header_types", "raw_properties"]

_RAW = "_warren_raw_properties"

#: the fixed width of each scalar field type (AMQP 0-9-1 with RabbitMQ's errata)
_WIDTH = {b"t": 1, b"b": 1, b"B": 1, b"s": 2, b"u": 2, b"I": 4, b"i": 4, b"l": 8,
          b"f": 4, b"d": 8, b"D": 5, b"T": 8, b"V": 0}


_lock = threading.Lock()
_active = 0
_original = pika.spec.BasicProperties.decode


def _decode(self: Any, encoded: bytes, offset: int = 0) -> Any:
    setattr(self, _RAW, bytes(encoded[offset:]))
    return _original(self, encoded, offset)


@contextmanager
def capture() -> Iterator[None]:
    """While active, every `BasicProperties` pika decodes remembers its raw bytes.

    Counted, so that probes against two brokers may capture at once from two
    threads: pika's own decode comes back when the last one ends."""
    global _active
    with _lock:
        _active += 1
        pika.spec.BasicProperties.decode = _decode
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if not _active:
                pika.spec.BasicProperties.decode = _original


def raw_properties(props: Any) -> bytes | None:
    """The raw property bytes `props` was decoded from under `capture()`."""
    return getattr(props, _RAW, None)


def header_types(raw: bytes) -> dict[str, Any] | None:
    """The type letter of every header in raw properties (None without headers):
    tables and arrays show their members' types."""
    flags = struct.unpack_from(">H", raw, 0)[0]
    at = 2
    if flags & 1:  # continuation flags: never sent by a broker for basic
        raise ValueError("property flags continue")
    for bit in (15, 14):  # content-type, content-encoding: short strings
        if flags & (1 << bit):
            at += 1 + raw[at]
    if not flags & (1 << 13):
        return None
    table, _ = _table(raw, at)
    return table


def _table(raw: bytes, at: int) -> tuple[dict[str, Any], int]:
    size = struct.unpack_from(">I", raw, at)[0]
    at += 4
    end = at + size
    out: dict[str, Any] = {}
    while at < end:
        name = raw[at + 1:at + 1 + raw[at]].decode()
        at += 1 + raw[at]
        out[name], at = _value(raw, at)
    return out, end


def _value(raw: bytes, at: int) -> tuple[Any, int]:
    kind = raw[at:at + 1]
    at += 1
    if kind in _WIDTH:
        return kind.decode(), at + _WIDTH[kind]
    if kind in (b"S", b"x"):
        return kind.decode(), at + 4 + struct.unpack_from(">I", raw, at)[0]
    if kind == b"F":
        table, at = _table(raw, at)
        return ["F", table], at
    if kind == b"A":
        size = struct.unpack_from(">I", raw, at)[0]
        at += 4
        end, items = at + size, []
        while at < end:
            item, at = _value(raw, at)
            items.append(item)
        return ["A", items], end
    raise ValueError(f"unknown field type {kind!r}")
