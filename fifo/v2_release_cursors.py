"""Machine version 2's stored release cursors (RabbitMQ 3.10's snapshots).

Before checkpoints (4.0), ``rabbit_fifo`` kept copies of its own state in the
state: every ``release_cursor_interval`` accepted enqueues it stores
``{release_cursor, RaftIdx, Dehydrated}``, and once every message that was in
the queue at `RaftIdx` has left (the smallest raft index still referenced is
above it) it hands the newest such cursor to Ra, which snapshots that state and
truncates the log below it. A queue that becomes empty releases the log up to
the command being applied at once. Replaying the log after a cursor on its
state gives the state a full replay gives, which is what makes the snapshot
safe although it lists messages that were consumed after it was taken.

Pure: the state is changed in place, effects are appended to a list.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from fifo.delivery import messages_total
from fifo.index import RaIndexes
from fifo.queries import smallest_raft_index
from fifo.records import RabbitFifoState, copy_state
from ra.effect_types import Effect

__all__ = [
    "RELEASE_CURSOR_EVERY",
    "RELEASE_CURSOR_EVERY_MAX",
    "configure",
    "dehydrate",
    "maybe_store",
    "update_smallest",
]

#: ``?RELEASE_CURSOR_EVERY``: the default interval (and the floor it grows from)
RELEASE_CURSOR_EVERY = 2048
#: ``?RELEASE_CURSOR_EVERY_MAX``: the interval never grows beyond this
RELEASE_CURSOR_EVERY_MAX = 3_200_000


def configure(conf: Mapping[str, Any], s: RabbitFifoState) -> None:
    """``update_config``: the interval restarts from the configured base; the state
    gets its (empty) cursor queue the first time."""
    base = conf.get("release_cursor_interval", RELEASE_CURSOR_EVERY)
    s.release_cursor_interval = (base, base)
    if s.release_cursors is None:
        s.release_cursors = deque()


def dehydrate(s: RabbitFifoState) -> RabbitFifoState:
    """The state to snapshot later: indexes, cursors, the enqueue count and the
    message cache emptied (bodies are never in the state anyway)."""
    d = copy_state(s)
    d.ra_indexes = RaIndexes()
    d.release_cursors = deque()
    d.enqueue_count = 0
    d.msg_cache = None
    d.dlx = replace(d.dlx, ra_indexes=RaIndexes())
    return d


def maybe_store(idx: int, s: RabbitFifoState) -> None:
    """After an accepted enqueue (or requeue) at `idx`: store a cursor once
    ``enqueue_count`` reached the interval, which then follows the queue's length."""
    base, current = s.release_cursor_interval
    if s.enqueue_count < current:
        return
    total = messages_total(s)
    if total == 0:  # the message was dropped at once
        s.enqueue_count = 0
        return
    interval = 0 if base == 0 else min(max(total, base), RELEASE_CURSOR_EVERY_MAX)
    s.release_cursor_interval = (base, interval)
    cursor = ("release_cursor", idx, dehydrate(s))
    s.enqueue_count = 0
    assert s.release_cursors is not None
    s.release_cursors.append(cursor)


def update_smallest(idx: int, s: RabbitFifoState, effects: list[Effect]) -> None:
    """``update_smallest_raft_index``: an empty queue releases everything up to `idx`;
    otherwise the newest stored cursor below the smallest live index is emitted."""
    assert s.release_cursors is not None
    smallest = smallest_raft_index(s)
    if smallest is None:
        if messages_total(s) == 0:
            base = s.release_cursor_interval[0]
            s.release_cursor_interval = (base, base)
            s.release_cursors = deque()
            s.enqueue_count = 0
            effects.append(("release_cursor", idx, copy_state(s)))
        return
    found = None
    while s.release_cursors and s.release_cursors[0][1] < smallest:
        found = s.release_cursors.popleft()
    if found is not None:
        effects.append(found)
