"""``rabbit_fifo_pq``: the strict 32-level message priority queue of machine version 8.

One FIFO bucket per priority 0..31; ``out`` always takes the head of the
highest non-empty bucket, so lower priorities wait as long as higher ones have
messages (no 2:1 fairness as in `fifo.fifo_q`). Priorities outside 0..31 are
clamped by the machine before they get here; a message without one goes to 4.

Expiry is head-only per bucket: `take_while` removes the matching prefix of
*every* bucket in one pass, highest priority first, which is how machine 8
expires the heads of all levels at once.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator

from fifo.msg import Msg, msg_idx

__all__ = ["DEFAULT_PRIORITY", "MAX_PRIORITY", "PriorityQ", "clamp_priority"]

MAX_PRIORITY = 31
DEFAULT_PRIORITY = 4


def clamp_priority(p: object) -> int:
    """A message's priority level: integers clamped to 0..31, anything else 4."""
    if isinstance(p, bool) or not isinstance(p, int):
        return DEFAULT_PRIORITY
    return min(max(p, 0), MAX_PRIORITY)


class PriorityQ:
    """Mutable 32-bucket queue; only non-empty buckets are kept."""

    __slots__ = ("_buckets", "_len")

    def __init__(self) -> None:
        self._buckets: dict[int, deque[Msg]] = {}
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PriorityQ):
            return NotImplemented
        return self._buckets == other._buckets

    def __repr__(self) -> str:
        inner = ", ".join(f"{p}: {list(q)}" for p, q in sorted(self._buckets.items()))
        return f"PriorityQ({{{inner}}})"

    def copy(self) -> PriorityQ:
        q = PriorityQ()
        q._buckets = {p: b.copy() for p, b in self._buckets.items()}
        q._len = self._len
        return q

    def in_(self, priority: int, msg: Msg) -> None:
        if not 0 <= priority <= MAX_PRIORITY:
            raise ValueError(f"priority out of range: {priority!r}")
        self._buckets.setdefault(priority, deque()).append(msg)
        self._len += 1

    def _top(self) -> int | None:
        return max(self._buckets) if self._buckets else None

    def get(self) -> Msg | None:
        """The message `out` would return, without taking it."""
        p = self._top()
        return None if p is None else self._buckets[p][0]

    def out(self) -> Msg | None:
        p = self._top()
        if p is None:
            return None
        bucket = self._buckets[p]
        m = bucket.popleft()
        if not bucket:
            del self._buckets[p]
        self._len -= 1
        return m

    def heads(self) -> list[Msg]:
        """The head of every non-empty bucket, highest priority first."""
        return [self._buckets[p][0] for p in sorted(self._buckets, reverse=True)]

    def take_while(self, pred: Callable[[Msg], bool]) -> list[Msg]:
        """Remove the prefix matching `pred` from every bucket, highest priority first."""
        taken: list[Msg] = []
        for p in sorted(self._buckets, reverse=True):
            bucket = self._buckets[p]
            while bucket and pred(bucket[0]):
                taken.append(bucket.popleft())
            if not bucket:
                del self._buckets[p]
        self._len -= len(taken)
        return taken

    def get_lowest_index(self) -> int | None:
        heads = [msg_idx(b[0]) for b in self._buckets.values()]
        return min(heads) if heads else None

    def indexes(self) -> Iterator[int]:
        for bucket in self._buckets.values():
            for m in bucket:
                yield msg_idx(m)

    def overview(self) -> dict[str, object]:
        return {
            "len": self._len,
            "detail": {p: len(b) for p, b in sorted(self._buckets.items())},
            "num_active_priorities": len(self._buckets),
            "lowest_index": self.get_lowest_index(),
        }

    def drain_order(self) -> Iterator[Msg]:
        """Delivery order of the current contents, leaving this queue untouched."""
        for p in sorted(self._buckets, reverse=True):
            yield from self._buckets[p]

    def buckets(self) -> dict[int, list[Msg]]:
        """Each non-empty level's messages in order (for conversion checks and traces)."""
        return {p: list(b) for p, b in sorted(self._buckets.items())}
