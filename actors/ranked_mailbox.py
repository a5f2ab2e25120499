"""A process mailbox ranked as ``gen_server2`` ranks its messages.

A ``gen_server2`` process (``rabbit_amqqueue_process`` is one) drains its mailbox
into a priority queue before it handles a message, each message ranked once by its
``prioritise_cast``/``prioritise_info`` callbacks, and handles the highest-ranked
first, in arrival order within a rank. For a classic queue that lets a consumer's
acks (rank 4) and ``notify_sent``s (2) overtake the hundreds of publishes (0) a
publisher with credit keeps waiting, so the consumer is not held back behind them.

`RankedMailbox` ranks a message as it arrives (what the drain does, without a
second copy of the mailbox): a ranked message goes to the lane of its rank, the
rest to the mailbox's own queue. Selective receives (a call's reply, a flushed
``DOWN``) look at every lane and the queue. Any actor type can install one over its
mailbox with `RankedMailbox.replacing` and a rank function of its own.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from actors.runtime_gevent import EMPTY, Mailbox

__all__ = ["RankedMailbox"]


class RankedMailbox(Mailbox):
    """Lanes for ranked messages ahead of the FIFO queue of the others.

    `rank` gives a message's lane (1 .. `lanes`, higher first) or 0 for the queue."""

    __slots__ = ("_lanes", "_rank")

    def __init__(self, rank: Callable[[Any], int], lanes: int) -> None:
        super().__init__()
        self._rank = rank
        #: highest rank first
        self._lanes: tuple[deque[Any], ...] = tuple(deque() for _ in range(lanes))

    @classmethod
    def replacing(cls, old: Mailbox, rank: Callable[[Any], int], lanes: int) -> RankedMailbox:
        """A ranked mailbox holding what `old` holds, each message ranked."""
        new = cls(rank, lanes)
        for item in old:
            new.put(item)
        old.clear()
        return new

    def put(self, item: Any, /) -> None:
        rank = self._rank(item)
        if not rank:
            super().put(item)
            return
        self._lanes[len(self._lanes) - rank].append(item)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            self._hub.loop.run_callback(waiter.switch, None)

    def _pop(self) -> Any:
        for lane in self._lanes:
            if lane:
                return lane.popleft()
        if self._q:
            return self._q.popleft()
        return EMPTY

    def empty(self) -> bool:
        return not self._q and not any(self._lanes)

    def __len__(self) -> int:
        return len(self._q) + sum(len(lane) for lane in self._lanes)

    def __iter__(self) -> Iterator[Any]:
        """In the order the process will handle them."""
        for lane in self._lanes:
            yield from lane
        yield from self._q

    def clear(self) -> None:
        for lane in self._lanes:
            lane.clear()
        self._q.clear()

    def get(self, timeout: float | None = None) -> Any:
        item = self._pop()
        if item is not EMPTY or (timeout is not None and timeout <= 0):
            return item
        self._wait(timeout)
        return self._pop()

    def wait_nonempty(self, timeout: float | None = None) -> bool:
        if not self.empty():
            return True
        if timeout is not None and timeout <= 0:
            return False
        self._wait(timeout)
        return not self.empty()

    def remove_first(self, pred: Callable[[Any], bool]) -> Any:
        for lane in self._lanes:
            for i, item in enumerate(lane):
                if pred(item):
                    del lane[i]
                    return item
        return super().remove_first(pred)

    def take_all(self, pred: Callable[[Any], bool]) -> list[Any]:
        taken: list[Any] = []
        for lane in self._lanes:
            hits = [item for item in lane if pred(item)]
            if hits:
                kept = [item for item in lane if not pred(item)]
                lane.clear()
                lane.extend(kept)
                taken.extend(hits)
        return taken + super().take_all(pred)

    def take_first(self, pred: Callable[[Any], bool], timeout: float | None) -> Any:
        """Selective receive: the first match in the lanes, else in the queue (a reply or a
        ``DOWN`` is never ranked, so it is in the queue)."""
        deadline = None if timeout is None else self._hub.loop.now() + timeout
        while True:
            item = self.remove_first(pred)
            if item is not EMPTY:
                return item
            remaining = None if deadline is None else deadline - self._hub.loop.now()
            if remaining is not None and remaining <= 0:
                return EMPTY
            self._wait(remaining)
            self._hub.loop.update_now()
