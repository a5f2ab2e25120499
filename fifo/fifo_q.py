"""``rabbit_fifo_q``: the two-level weighted priority queue of v4-v7.

Messages with a priority above 4 go to ``hi``, everything else to ``no``.
While both levels have a backlog, two ``hi`` messages are served for every
``no`` message -- but on every third ``out`` the *older* head (lower raft
index) wins, so normal messages are never starved and high messages that were
published first are never held back behind a normal one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Literal

from fifo.msg import Msg, msg_idx

__all__ = ["FifoQ", "PriorityTag"]

PriorityTag = Literal["hi", "no"]

WEIGHT = 2


class FifoQ:
    """Mutable two-bucket queue; ``out`` advances the 0, 1, 2 dequeue counter."""

    __slots__ = ("dequeue_counter", "hi", "no")

    def __init__(self) -> None:
        self.hi: deque[Msg] = deque()
        self.no: deque[Msg] = deque()
        self.dequeue_counter = 0

    def __len__(self) -> int:
        return len(self.hi) + len(self.no)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FifoQ):
            return NotImplemented
        return (
            self.hi == other.hi
            and self.no == other.no
            and self.dequeue_counter == other.dequeue_counter
        )

    def __repr__(self) -> str:
        return f"FifoQ(hi={list(self.hi)}, no={list(self.no)}, counter={self.dequeue_counter})"

    def copy(self) -> FifoQ:
        q = FifoQ()
        q.hi = self.hi.copy()
        q.no = self.no.copy()
        q.dequeue_counter = self.dequeue_counter
        return q

    def in_(self, tag: PriorityTag, msg: Msg) -> None:
        (self.hi if tag == "hi" else self.no).append(msg)

    def _next(self) -> PriorityTag | None:
        hi, no = self.hi, self.no
        if hi and no and self.dequeue_counter == WEIGHT:
            return "hi" if msg_idx(hi[0]) < msg_idx(no[0]) else "no"
        if hi:
            return "hi"
        if no:
            return "no"
        return None

    def get(self) -> Msg | None:
        """The message `out` would return, without taking it."""
        tag = self._next()
        if tag is None:
            return None
        return self.hi[0] if tag == "hi" else self.no[0]

    def out(self) -> Msg | None:
        tag = self._next()
        if tag is None:
            return None
        self.dequeue_counter = 0 if self.dequeue_counter == WEIGHT else self.dequeue_counter + 1
        return self.hi.popleft() if tag == "hi" else self.no.popleft()

    def out_tagged(self) -> tuple[PriorityTag, Msg] | None:
        tag = self._next()
        msg = self.out()
        if tag is None or msg is None:
            return None
        return (tag, msg)

    def get_lowest_index(self) -> int | None:
        heads = [msg_idx(q[0]) for q in (self.hi, self.no) if q]
        return min(heads) if heads else None

    def overview(self) -> dict[str, int]:
        return {"len": len(self), "num_hi": len(self.hi), "num_no": len(self.no)}

    def drain_order(self) -> Iterator[Msg]:
        """Delivery order of the current contents, leaving this queue untouched."""
        q = self.copy()
        while (m := q.out()) is not None:
            yield m
