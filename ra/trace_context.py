"""What a machine's tracer is told about the Ra server that calls it.

A machine's callbacks see the machine state and the Meta map, nothing of the
server: that keeps them deterministic. A history of each replica needs more —
the server's current term and leader, the membership, how far it has applied,
and its log (for the entries the machine is never called for: noops and
cluster changes). Ra builds a `TraceContext` where it calls the machine and
hands it over explicitly (`ra.apply.server_trace_context` builds it), as a
keyword argument the machine opts into (`ra.machine.tracing`), in the way
etcd's raft calls explicit trace hooks.

Nothing is built unless the machine asks for it: when no history is being
recorded, applying an entry costs what it did without tracing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ra.types import Entry, ServerId

__all__ = ["LogReader", "TraceContext"]


class LogReader(Protocol):
    """Read access to a member's log: the entry at an index, if the log still holds it."""

    def fetch(self, idx: int) -> Entry | None: ...


@dataclass(frozen=True, slots=True)
class TraceContext:
    """The calling server as a tracer may read it, at the moment of one callback.

    `index` is the index of the entry being applied (None for a state entry);
    `last_applied` is the last index applied before this callback.
    """

    term: int
    leader: ServerId | None
    cluster: tuple[ServerId, ...]
    last_applied: int
    index: int | None
    log: LogReader

