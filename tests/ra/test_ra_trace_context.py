"""The trace context: what Ra tells a tracing machine about the server calling it.

A machine that answers `tracing()` with True is handed a `TraceContext` with every
``apply`` and ``state_enter``: the server's current term, its leader, the members,
the index applied last and the index being applied, and a reader of its log. A
machine that does not trace is called with the plain callback arguments and no
context is built for it.
"""

from __future__ import annotations

from typing import Any

import pytest

from ra import server as core
from ra.apply import DeleteAndTerminate, apply_to
from ra.machine import Machine
from ra.trace_context import TraceContext
from ra.types import RA_CLUSTER, usr
from tests.ra.ra_testlib import S1, S2, S3, server


class Tracing(Machine):
    """Keeps the context of every callback; traces while `on` is True."""

    def __init__(self) -> None:
        self.on = True
        self.seen: list[tuple[str, Any, TraceContext | None]] = []

    def init(self, config: dict[str, Any]) -> int:
        return 0

    def tracing(self) -> bool:
        return self.on

    def apply(self, meta: dict[str, Any], command: Any, state: int,
              trace_context: TraceContext | None = None) -> tuple[Any, ...]:
        self.seen.append(("apply", command, trace_context))
        return (state + 1, "ok")

    def state_enter(self, ra_state: str, state: int,
                    trace_context: TraceContext | None = None) -> list[Any]:
        self.seen.append(("enter", ra_state, trace_context))
        return []


def test_each_apply_is_handed_the_servers_term_leader_members_and_indexes() -> None:
    mac = Tracing()
    log = [(1, 3, usr({}, "a")), (2, 3, usr({}, "b"))]
    st = server(sid=S2, log=log, machine=mac, term=4)
    st.leader_id = S1
    apply_to(2, st, [])

    assert [(kind, cmd) for kind, cmd, _ctx in mac.seen] == [("apply", "a"), ("apply", "b")]
    first, second = (ctx for _kind, _cmd, ctx in mac.seen)
    assert first is not None and second is not None
    assert (first.term, first.leader, set(first.cluster)) == (4, S1, {S1, S2, S3})
    assert (first.index, first.last_applied) == (1, 0)
    assert (second.index, second.last_applied) == (2, 1)
    assert second.log.fetch(2) == (2, 3, usr({}, "b"))


def test_state_entries_are_handed_the_context_without_an_index() -> None:
    mac = Tracing()
    st = server(sid=S2, log=[(1, 1, usr({}, "a"))], machine=mac, term=7)
    apply_to(1, st, [])
    st.leader_id = S3
    core.handle_state_enter("follower", "candidate", st)

    kind, ra_state, ctx = mac.seen[-1]
    assert (kind, ra_state) == ("enter", "follower")
    assert ctx is not None
    assert (ctx.term, ctx.leader, ctx.last_applied, ctx.index) == (7, S3, 1, None)


def test_the_end_of_life_state_entry_is_handed_the_context_too() -> None:
    mac = Tracing()
    st = server(log=[(1, 2, usr({}, "a")), (2, 2, (RA_CLUSTER, {}, "delete", "none"))],
                machine=mac, term=2)
    with pytest.raises(DeleteAndTerminate):
        apply_to(2, st, [])
    kind, ra_state, ctx = mac.seen[-1]
    assert (kind, ra_state) == ("enter", "eol")
    assert ctx is not None and ctx.last_applied == 2


def test_a_machine_that_is_not_tracing_is_called_without_a_context() -> None:
    mac = Tracing()
    mac.on = False
    st = server(log=[(1, 1, usr({}, "a"))], machine=mac, term=1)
    apply_to(1, st, [])
    core.handle_state_enter("follower", "candidate", st)
    assert mac.seen == [("apply", "a", None), ("enter", "follower", None)]
