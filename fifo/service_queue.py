"""The service queue: consumer keys waiting for messages, by consumer priority.

Mirrors Erlang's ``priority_queue`` as ``rabbit_fifo`` uses it: the highest
priority is served first, FIFO within a priority, and a key is never queued
twice (``maybe_queue_consumer`` checks membership). Keys of consumers that
lost their credit or status stay in the queue and are skipped lazily.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable

__all__ = ["ServiceQueue"]


class ServiceQueue:
    __slots__ = ("_members", "_queues")

    def __init__(self) -> None:
        self._queues: dict[int, deque[Hashable]] = {}
        self._members: set[Hashable] = set()

    def __len__(self) -> int:
        return len(self._members)

    def __contains__(self, key: object) -> bool:
        return key in self._members

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ServiceQueue):
            return NotImplemented
        return self.to_list() == other.to_list()

    def __repr__(self) -> str:
        return f"ServiceQueue({self.to_list()})"

    def copy(self) -> ServiceQueue:
        c = ServiceQueue()
        c._queues = {p: q.copy() for p, q in self._queues.items()}
        c._members = set(self._members)
        return c

    def is_empty(self) -> bool:
        return not self._members

    def in_(self, key: Hashable, priority: int) -> None:
        self._queues.setdefault(priority, deque()).append(key)
        self._members.add(key)

    def _top(self) -> int | None:
        return max(self._queues) if self._queues else None

    def peek(self) -> Hashable | None:
        p = self._top()
        return None if p is None else self._queues[p][0]

    def out(self) -> Hashable | None:
        p = self._top()
        if p is None:
            return None
        q = self._queues[p]
        key = q.popleft()
        if not q:
            del self._queues[p]
        self._members.discard(key)
        return key

    def to_list(self) -> list[tuple[int, Hashable]]:
        """(priority, key) pairs in service order."""
        return [(p, k) for p in sorted(self._queues, reverse=True) for k in self._queues[p]]
