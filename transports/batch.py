"""Per-peer batching of outgoing signals, shared by every transport.

The node sends many signals within one hub iteration; a transport queues them
per peer and ships each peer's list as one frame from a single callback at
the end of the iteration (batching at every hop). Order within a peer's
list is the order of `add`, which is what keeps each node pair's stream FIFO.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gevent

__all__ = ["Batches"]


class Batches:
    """Signals waiting per peer, and the one scheduled flush that ships them."""

    __slots__ = ("_flush", "_scheduled", "pending")

    def __init__(self, flush: Callable[[], None]) -> None:
        self.pending: dict[str, list[tuple[Any, ...]]] = {}
        self._flush = flush
        self._scheduled = False

    def add(self, peer: str, signal: tuple[Any, ...]) -> None:
        out = self.pending.get(peer)
        if out is None:
            self.pending[peer] = [signal]
        else:
            out.append(signal)
        self.schedule()

    def schedule(self) -> None:
        """Make sure a flush runs at the end of this hub iteration."""
        if not self._scheduled:
            self._scheduled = True
            gevent.get_hub().loop.run_callback(self._flush)

    def take(self) -> dict[str, list[tuple[Any, ...]]]:
        """Everything pending, per peer; called by the flush."""
        self._scheduled = False
        out, self.pending = self.pending, {}
        return out

    def pop(self, peer: str) -> list[tuple[Any, ...]] | None:
        return self.pending.pop(peer, None)
