"""Message references and their headers (``rabbit_fifo``'s ``msg`` and ``msg_header``).

The machine never holds a message body: a queued message is the raft index of
the command that carried the body plus a small header. A queue may hold
millions of them, so the common case (a header that is just the payload size)
is packed into one Python int ``idx | size << 44``; anything richer (expiry,
counters, annotations) is the pair ``(idx, header)``, the Python shape of
upstream's improper list ``[Idx | Header]``.

Packing is an internal representation only: machine version 7 has no packed
messages on the wire, so every effect and reply unpacks to ``(idx, header)``.

Headers keep upstream's "smallest form wins" encoding:

* ``int``               -- size only
* ``(size, expiry)``    -- size and absolute expiry (ms)
* ``dict``              -- ``size`` plus any of ``expiry``, ``delivery_count``,
  ``acquired_count``, ``anns``

Header dicts are treated as immutable values (every update builds a new one)
so that copies of the state taken for checkpoints may share them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "PACKED_IDX_MAX",
    "Header",
    "Msg",
    "get_header",
    "incr_delivery_count",
    "incr_msg",
    "is_packed",
    "make_msg",
    "msg_header",
    "msg_idx",
    "msg_size",
    "unpack",
    "update_header",
]

Header = int | tuple[int, int] | dict[str, Any]
Msg = int | tuple[int, Header]

IDX_BITS = 44
PACKED_IDX_MAX = (1 << IDX_BITS) - 1


def make_msg(idx: int, header: Header, size_max: int | None = None) -> Msg:
    """Build the most compact reference for a message at raft index `idx`.

    `size_max` is the largest size a packed reference may hold: machine 8 packs
    ``idx bxor (size bsl 44)`` only for sizes up to 15 bits, as upstream does,
    so larger messages stay ``(idx, size)``; ``None`` packs any size.
    """
    if (type(header) is int and 0 <= idx <= PACKED_IDX_MAX and header >= 0
            and (size_max is None or header <= size_max)):
        return idx | (header << IDX_BITS)
    return (idx, header)


def is_packed(msg: Msg) -> bool:
    """Whether `msg` is a packed reference (an immediate integer upstream)."""
    return type(msg) is int


def msg_idx(msg: Msg) -> int:
    if type(msg) is int:
        return msg & PACKED_IDX_MAX
    return msg[0]  # type: ignore[index]


def msg_header(msg: Msg) -> Header:
    if type(msg) is int:
        return msg >> IDX_BITS
    return msg[1]  # type: ignore[index]


def unpack(msg: Msg) -> tuple[int, Header]:
    """The upstream ``[Idx | Header]`` view of a message reference."""
    if type(msg) is int:
        return (msg & PACKED_IDX_MAX, msg >> IDX_BITS)
    return msg  # type: ignore[return-value]


def msg_size(msg: Msg) -> int:
    if type(msg) is int:
        return msg >> IDX_BITS
    return get_header("size", msg[1])  # type: ignore[index]


def get_header(key: str, header: Header) -> Any:
    """Value of `key` in a header of any form; ``None`` (undefined) if absent."""
    if type(header) is int:
        return header if key == "size" else None
    if type(header) is tuple:
        if key == "size":
            return header[0]
        if key == "expiry":
            return header[1]
        return None
    return header.get(key)  # type: ignore[union-attr]


def update_header(
    key: str, fun: Callable[[Any], Any], default: Any, header: Header
) -> Header:
    """Upstream ``update_header/4``: upgrade the header form only as far as needed."""
    if type(header) is int:
        if key == "expiry":
            return (header, default)
        return {"size": header, key: default}
    if type(header) is tuple:
        new: dict[str, Any] = {"size": header[0], "expiry": header[1]}
        new[key] = fun(new[key]) if key in new else default
        return new
    assert isinstance(header, Mapping) and "size" in header
    new = dict(header)
    new[key] = fun(new[key]) if key in new else default
    return new


def _incr(n: int) -> int:
    return n + 1


def incr_delivery_count(msg: Msg) -> Msg:
    """Machine 2's give-back: ``delivery_count + 1`` whatever the reason (3.10 has no
    ``acquired_count``; a requeue counts like a failed delivery)."""
    idx, header = unpack(msg)
    return make_msg(idx, update_header("delivery_count", _incr, 1, header))


def incr_msg(msg: Msg, delivery_failed: bool, anns: Mapping[str, Any]) -> Msg:
    """Header changes for a message given back by a consumer (``return_one``).

    Every give-back counts an acquisition; only a failed delivery counts towards
    ``delivery_count``; annotations from ``modify`` are merged into ``anns``.
    """
    idx, header = unpack(msg)
    header = update_header("acquired_count", _incr, 1, header)
    if anns:
        header = update_header("anns", lambda a: {**a, **anns}, dict(anns), header)
    if delivery_failed:
        header = update_header("delivery_count", _incr, 1, header)
    return make_msg(idx, header)
