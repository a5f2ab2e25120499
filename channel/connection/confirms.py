"""Publisher confirms: `rabbit_confirms` and the ack/nack frame coalescing.

The channel records which queues still owe a confirm for each publish sequence
number; a seqno is acked when the last queue confirms it and nacked at the
first rejection. `coalesce` turns one flush of confirmed and rejected seqnos
into the fewest basic.ack/basic.nack frames RabbitMQ would send, never sending
a `multiple` that covers a seqno still outstanding. Pure and table-tested.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from actors.wire import frozen_init

__all__ = ["Confirm", "Unconfirmed", "coalesce"]


@dataclass
class Unconfirmed:
    """seqno -> (exchange, queues still to confirm)."""

    pending: dict[int, tuple[str, set[str]]] = field(default_factory=dict)

    def insert(self, seqno: int, exchange: str, queues: Iterable[str]) -> None:
        self.pending[seqno] = (exchange, set(queues))

    def confirm(self, seqnos: Iterable[int], queue: str) -> list[int]:
        """Queue `queue` has the messages; returns the seqnos now fully confirmed."""
        done = []
        for seqno in seqnos:
            entry = self.pending.get(seqno)
            if entry is None:
                continue
            entry[1].discard(queue)
            if not entry[1]:
                del self.pending[seqno]
                done.append(seqno)
        return done

    def reject(self, seqnos: Iterable[int]) -> list[int]:
        """First rejection wins: the seqno is gone and reported once."""
        out = []
        for seqno in seqnos:
            if self.pending.pop(seqno, None) is not None:
                out.append(seqno)
        return out

    def queue_gone(self, queue: str) -> list[int]:
        """A deleted queue confirms everything it owed (acks, never nacks)."""
        waiting = [s for s, (_, qs) in self.pending.items() if queue in qs]
        return self.confirm(waiting, queue)

    def smallest(self) -> int | None:
        return min(self.pending) if self.pending else None

    def __len__(self) -> int:
        return len(self.pending)


@frozen_init
@dataclass(frozen=True, slots=True)
class Confirm:
    """One frame to write: basic.ack (ack=True) or basic.nack."""

    ack: bool
    tag: int
    multiple: bool


def _frames(ack: bool, seqnos: list[int], cutoff: int) -> list[Confirm]:
    below = [s for s in seqnos if s < cutoff]
    rest = [s for s in seqnos if s >= cutoff]
    out: list[Confirm] = []
    if below:
        out.append(Confirm(ack, below[-1], True))
    out.extend(Confirm(ack, s, False) for s in rest)
    return out


def coalesce(confirmed: Iterable[int], rejected: Iterable[int],
             smallest_outstanding: int | None) -> list[Confirm]:
    """Frames for one flush: acks first, then nacks (`send_confirms_and_nacks`).

    A lone ack is sent without `multiple`; nacks have no such special case.
    """
    acks = sorted(confirmed)
    nacks = sorted(rejected)
    out: list[Confirm] = []
    if len(acks) == 1:
        out.append(Confirm(True, acks[0], False))
    elif acks:
        limit = smallest_outstanding if smallest_outstanding is not None else acks[-1] + 1
        if nacks:
            limit = min(limit, nacks[0])
        out.extend(_frames(True, acks, limit))
    if nacks:
        limit = smallest_outstanding if smallest_outstanding is not None else nacks[-1] + 1
        if acks:
            limit = min(limit, acks[0])
        out.extend(_frames(False, nacks, limit))
    return out
