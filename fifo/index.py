"""``rabbit_fifo_index``: the set of live raft indexes outside the ready queue.

It holds the indexes of checked-out and returned messages (and, in the dlx
state, of dead-lettered ones) so that the smallest live index -- the point up
to which the log may be truncated -- is cheap to find after every batch.
A lazily cleaned min-heap gives amortised O(log n) appends and deletes.
"""

from __future__ import annotations

import heapq

__all__ = ["RaIndexes"]


class RaIndexes:
    __slots__ = ("_heap", "_set")

    def __init__(self) -> None:
        self._set: set[int] = set()
        self._heap: list[int] = []

    def __len__(self) -> int:
        return len(self._set)

    def __contains__(self, idx: object) -> bool:
        return idx in self._set

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RaIndexes):
            return NotImplemented
        return self._set == other._set

    def __repr__(self) -> str:
        return f"RaIndexes({sorted(self._set)})"

    def copy(self) -> RaIndexes:
        c = RaIndexes()
        c._set = set(self._set)
        c._heap = sorted(self._set)
        return c

    def append(self, idx: int) -> None:
        if idx not in self._set:
            self._set.add(idx)
            heapq.heappush(self._heap, idx)

    def delete(self, idx: int) -> None:
        self._set.discard(idx)
        if len(self._heap) > 2 * len(self._set) + 64:
            self._heap = sorted(self._set)

    def smallest(self) -> int | None:
        heap, live = self._heap, self._set
        while heap and heap[0] not in live:
            heapq.heappop(heap)
        return heap[0] if heap else None

    def to_list(self) -> list[int]:
        return sorted(self._set)
