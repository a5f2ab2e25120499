"""The ready messages of a classic queue: one level per priority, each in
enqueue order.

``rabbit_priority_queue`` keeps one backing queue per level and always serves
the highest non-empty one; ``rabbit_variable_queue`` merges a requeued message
back by its sequence id, so it returns to its original position. Sequence ids
only grow, so each level is a min-heap on the id: appends and requeues are
both a push, and the head is the oldest message of the level.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["Entry", "ReadyQueue"]


@dataclass(slots=True)
class Entry:
    """One message held by the queue, ready or unacked."""

    msg_id: int
    exchange: str
    routing_keys: tuple[str, ...]
    size: int
    persistent: bool
    priority: int
    expiration: int | None
    expires_at: int | None
    content: Any
    channel: Any
    seq: int | None
    confirm_pending: bool = False
    stored: bool = False
    delivered: bool = False


class ReadyQueue:
    """Ready entries by priority level, with message and byte totals."""

    def __init__(self) -> None:
        self._levels: dict[int, list[tuple[int, Entry]]] = {}
        self.count = 0
        self.bytes = 0

    def __len__(self) -> int:
        return self.count

    def push(self, entry: Entry) -> None:
        """Append a new message or put a returned one back at its original position."""
        level = self._levels.setdefault(entry.priority, [])
        heapq.heappush(level, (entry.msg_id, entry))
        self.count += 1
        self.bytes += entry.size

    def _top(self) -> list[tuple[int, Entry]] | None:
        best: int | None = None
        for prio, level in self._levels.items():
            if level and (best is None or prio > best):
                best = prio
        return None if best is None else self._levels[best]

    def peek(self) -> Entry | None:
        """The head: the oldest message of the highest non-empty level."""
        level = self._top()
        return None if level is None else level[0][1]

    def pop(self) -> Entry:
        level = self._top()
        assert level is not None, "pop from an empty queue"
        _, entry = heapq.heappop(level)
        self.count -= 1
        self.bytes -= entry.size
        assert self.count >= 0 and self.bytes >= 0
        return entry

    def drain(self) -> list[Entry]:
        """Remove everything, in delivery order."""
        out = [self.pop() for _ in range(self.count)]
        self._levels.clear()
        assert self.count == 0 and self.bytes == 0
        return out

    def __iter__(self) -> Iterator[Entry]:
        """Entries in delivery order (for introspection and tests; O(n log n))."""
        for prio in sorted(self._levels, reverse=True):
            for _, entry in sorted(self._levels[prio], key=lambda p: p[0]):
                yield entry
