"""Machine 8's delayed retry: returned messages that wait before they are ready again.

A queue with ``delayed_retry = (mode, min_ms, max_ms)`` holds a message given
back by a consumer for ``min(min_ms * max(1, delivery_count), max_ms)`` before
it joins the returns again: every give-back in mode ``all``, failed deliveries
only in ``failed``, plain returns only in ``returned``. A ``modify`` may also
name the time itself (annotation ``x-opt-delivery-time``, honoured even when
delayed retry is disabled) and a deferral token (``x-opt-deferral-token``)
with which a consumer can later claim the message (``assign_deferred``).

Delayed messages are not ready (not counted as ready, never delivered) but
they still count against max-length and max-length-bytes, keep their log
entries alive and are dropped by a purge. The ``{delayed_cmd, Op}`` command
moves them on demand.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from typing import Any

from fifo.msg import Header, Msg, get_header, msg_idx

__all__ = ["DEFERRAL_TOKEN", "DELIVERY_TIME", "Delayed", "should_delay"]

DELIVERY_TIME = "x-opt-delivery-time"
DEFERRAL_TOKEN = "x-opt-deferral-token"

Key = tuple[int, int]  # (ready_at, raft index): upstream's gb_tree key [ReadyAt | Idx]


def _ann(anns: Mapping[Any, Any], name: str) -> Any:
    return anns.get(name, anns.get(name.encode()))


def should_delay(delivery_failed: bool, delayed_retry: Any, ts: int, header: Header,
                 anns: Mapping[Any, Any]) -> tuple[int, Any] | None:
    """``(ready_at, deferral_token)`` when a returned message must wait, else ``None``."""
    token = _ann(anns, DEFERRAL_TOKEN)
    if not isinstance(token, bytes | str):
        token = None
    at = _ann(anns, DELIVERY_TIME)
    if isinstance(at, int) and not isinstance(at, bool) and at > ts:
        return (at, token)
    if not isinstance(delayed_retry, tuple):
        return None
    mode, low, high = delayed_retry
    if mode == "all" or (mode == "failed") == delivery_failed:
        count = get_header("delivery_count", header)
        delay = min(low * max(1, count or 1), high)
        return (ts + delay, token)
    return None


class Delayed:
    """``#delayed{}``: messages ordered by ready time, and the deferral tokens."""

    __slots__ = ("_keys", "deferred", "msgs")

    def __init__(self) -> None:
        self._keys: list[Key] = []
        self.msgs: dict[Key, Msg] = {}
        self.deferred: dict[Any, Key] = {}

    def __len__(self) -> int:
        return len(self._keys)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Delayed):
            return NotImplemented
        return self.msgs == other.msgs and self.deferred == other.deferred

    def __repr__(self) -> str:
        return f"Delayed({[(k, self.msgs[k]) for k in self._keys]}, {self.deferred})"

    def copy(self) -> Delayed:
        d = Delayed()
        d._keys = list(self._keys)
        d.msgs = dict(self.msgs)
        d.deferred = dict(self.deferred)
        return d

    def next_at(self) -> int | None:
        return self._keys[0][0] if self._keys else None

    def last_at(self) -> int | None:
        return self._keys[-1][0] if self._keys else None

    def values(self) -> list[Msg]:
        """The delayed messages in ready-time order."""
        return [self.msgs[k] for k in self._keys]

    def put(self, ready_at: int, msg: Msg, token: Any) -> None:
        key = (ready_at, msg_idx(msg))
        bisect.insort(self._keys, key)
        self.msgs[key] = msg
        if token is not None:
            self.deferred[token] = key

    def _pop(self, key: Key) -> Msg:
        self._keys.remove(key)
        self.deferred = {t: k for t, k in self.deferred.items() if k != key}
        return self.msgs.pop(key)

    def take_ready(self, ts: int) -> list[Msg]:
        """Every message whose ready time has come, earliest first."""
        out = []
        while self._keys and ts >= self._keys[0][0]:
            out.append(self._pop(self._keys[0]))
        return out

    def take_for_retry(self, n: Any) -> list[Msg]:
        """``{retry, all | N}``: all, or the `n` earliest, whatever their time."""
        if n == "all":
            out = self.values()
            self._keys, self.msgs, self.deferred = [], {}, {}
            return out
        out = []
        while n > 0 and self._keys:
            out.append(self._pop(self._keys[0]))
            n -= 1
        return out

    def take_deferred(self, tokens: list[Any]) -> tuple[list[Msg], list[Any]]:
        """The messages of `tokens` (in the order given) and the tokens not found."""
        found, missing = [], []
        for token in tokens:
            key = self.deferred.pop(token, None)
            if key is None or key not in self.msgs:
                missing.append(token)
                continue
            self._keys.remove(key)
            found.append(self.msgs.pop(key))
        return found, missing

    def clear(self) -> list[Msg]:
        out = self.values()
        self._keys, self.msgs, self.deferred = [], {}, {}
        return out
