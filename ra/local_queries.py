"""Local queries that wait for a condition (Ra's ``local_query/3`` options).

A caller may ask a member to run its query only once that member has applied
a given entry: ``{"condition": ("applied", (idx, term))}``. The classic use is
reading your own write on a follower: the client got ``(idx, term)`` back from
a command and wants a local read that includes it. The query is parked in the
server process and evaluated after every event that may have advanced
``last_applied``; it runs once ``idx`` is applied *and* the local entry at
``idx`` has term ``term``. If the entry at ``idx`` has another term (the
command was overwritten by a newer leader), the query stays parked and the
caller's own timeout ends the wait, as in Ra.

This module is pure: it decides which parked queries are ready, given
``last_applied`` and a way to read the term of an index. The shell runs them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class BadCondition(ValueError):
    """A ``condition`` option that is not ``("applied", (idx, term))``."""


@dataclass(frozen=True, slots=True)
class PendingQuery:
    """A local query parked until ``index`` is applied with ``term``."""

    index: int
    term: int
    from_: Any
    query_fun: Any


def parse_condition(condition: Any) -> tuple[int, int] | None:
    """``(idx, term)`` of an ``("applied", (idx, term))`` condition; ``None`` for none."""
    if condition is None:
        return None
    match condition:
        case ("applied", (int() as idx, int() as term)):
            return idx, term
    raise BadCondition(condition)


def park(pending: list[PendingQuery], idx_term: tuple[int, int], from_: Any,
         query_fun: Any) -> list[PendingQuery]:
    """Pending queries with a new one added, newest first (as Ra keeps them)."""
    return [PendingQuery(idx_term[0], idx_term[1], from_, query_fun), *pending]


def take_ready(pending: list[PendingQuery], last_applied: int,
               term_at: Callable[[int], int | None]
               ) -> tuple[list[PendingQuery], list[PendingQuery]]:
    """Split parked queries into ``(still_pending, ready)``.

    A query is ready when its index is applied and the term read at that index
    is the one it waits for; the term is read only for applied indexes.
    ``still_pending`` keeps its order; ``ready`` lists the newest first, the
    order in which Ra replies.
    """
    still: list[PendingQuery] = []
    ready: list[PendingQuery] = []
    for query in pending:
        if query.index <= last_applied and term_at(query.index) == query.term:
            ready.append(query)
        else:
            still.append(query)
    return still, ready
