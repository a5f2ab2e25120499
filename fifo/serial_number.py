"""RFC 1982 serial-number arithmetic on 32 bits (AMQP 1.0 delivery-count).

Credit arithmetic for credited consumers wraps at 2^32; comparing with plain
integers would hand out billions of credits after a wrap.
"""

from __future__ import annotations

__all__ = ["add", "diff"]

_MOD = 1 << 32
_HALF = 1 << 31


def add(s: int, n: int) -> int:
    if not 0 <= n < _HALF:
        raise ValueError(f"serial addition out of range: {n}")
    return (s + n) % _MOD


def diff(a: int, b: int) -> int:
    """Signed shortest distance from `b` to `a`."""
    d = (a - b) % _MOD
    return d - _MOD if d >= _HALF else d
