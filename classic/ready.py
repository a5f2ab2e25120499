"""The ready messages of a classic queue: one level per priority, each in
enqueue order.

``rabbit_priority_queue`` keeps one backing queue per level and always serves
the highest non-empty one; ``rabbit_variable_queue`` merges a requeued message
back by its sequence id, so it returns to its original position. Sequence ids
only grow, so a level is two sorted runs: the messages never returned, in a
deque (a publish is appended, the head is taken from the left, no ordering
work), and the returned ones, in a min-heap on the id. The head of the level is
the older of the two heads. A message in the deque costs one slot of it; a heap
entry costs a tuple beside it, which only returned messages pay.
"""

from __future__ import annotations

import heapq
from collections import deque
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
    """The publisher's confirm number, kept only while the confirm is pending."""
    confirm_pending: bool = False
    stored: bool = False
    delivered: bool = False


class _Level:
    """One priority level: never-returned entries in id order, returned ones in a heap."""

    __slots__ = ("fresh", "returned")

    def __init__(self) -> None:
        self.fresh: deque[Entry] = deque()
        self.returned: list[tuple[int, Entry]] = []

    def __bool__(self) -> bool:
        return bool(self.fresh) or bool(self.returned)

    def push(self, entry: Entry) -> None:
        fresh = self.fresh
        if not fresh or entry.msg_id > fresh[-1].msg_id:
            fresh.append(entry)  # a publish, or a return behind every fresh entry
        else:
            heapq.heappush(self.returned, (entry.msg_id, entry))

    def peek(self) -> Entry:
        fresh, returned = self.fresh, self.returned
        if returned and (not fresh or returned[0][0] < fresh[0].msg_id):
            return returned[0][1]
        return fresh[0]

    def pop(self) -> Entry:
        fresh, returned = self.fresh, self.returned
        if returned and (not fresh or returned[0][0] < fresh[0].msg_id):
            return heapq.heappop(returned)[1]
        return fresh.popleft()

    def in_order(self) -> list[Entry]:
        """Every entry of the level, oldest first (O(n log n))."""
        return sorted([*self.fresh, *(entry for _, entry in self.returned)],
                      key=lambda entry: entry.msg_id)


class ReadyQueue:
    """Ready entries by priority level, with message and byte totals."""

    def __init__(self) -> None:
        self._levels: dict[int, _Level] = {}
        self.count = 0
        self.bytes = 0

    def __len__(self) -> int:
        return self.count

    def push(self, entry: Entry) -> None:
        """Append a new message or put a returned one back at its original position."""
        level = self._levels.get(entry.priority)
        if level is None:
            level = self._levels[entry.priority] = _Level()
        level.push(entry)
        self.count += 1
        self.bytes += entry.size

    def _top(self) -> _Level | None:
        levels = self._levels
        if len(levels) == 1:
            for level in levels.values():
                return level if level else None
        best: int | None = None
        for prio, level in levels.items():
            if level and (best is None or prio > best):
                best = prio
        return None if best is None else levels[best]

    def peek(self) -> Entry | None:
        """The head: the oldest message of the highest non-empty level."""
        level = self._top()
        return None if level is None else level.peek()

    def pop(self) -> Entry:
        level = self._top()
        assert level is not None, "pop from an empty queue"
        entry = level.pop()
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
            yield from self._levels[prio].in_order()
