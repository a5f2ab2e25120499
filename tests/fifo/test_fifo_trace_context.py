"""The replica history reads the Ra server only through the context Ra hands over.

The queue machine's tracer is given a `TraceContext` (term, leader, membership, last
applied index, a log reader) as an argument; what the rows say about the server comes
from it alone, whoever calls the machine and whatever the caller's variables are
named. A member driven by Ra's own apply loop and state entries records the same.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from actors import Node, trace
from fifo import replica_trace
from fifo.commands import make_enqueue
from fifo.mc import BasicMessage
from fifo.ra_glue import QueueMachine, machine_config
from ra import machine as ra_machine
from ra import server as core
from ra.apply import apply_to
from ra.trace_context import TraceContext
from ra.types import NOOP, RA_CLUSTER_CHANGE, USR, Entry
from tests.fifo.helpers import QNAME
from tests.ra.ra_testlib import server

Row = tuple[str, dict[str, Any]]
Q1, Q2, Q3 = ("q1", "n1@host"), ("q1", "n2@host"), ("q1", "n3@host")


@pytest.fixture
def rows() -> Iterator[list[Row]]:
    seen: list[Row] = []
    previous = trace.set_sink(lambda kind, fields: seen.append((kind, fields)))
    node = Node("n2@host").start()
    try:
        with node.attached():
            yield seen
    finally:
        node.stop()
        trace.set_sink(previous)
        replica_trace.forget()


class Log:
    """A log reader over a dict of entries."""

    def __init__(self, entries: dict[int, Entry]) -> None:
        self.entries = entries

    def fetch(self, idx: int) -> Entry | None:
        return self.entries.get(idx)


def enqueue(msg_id: int) -> Any:
    return make_enqueue(None, None, BasicMessage(
        b"body", annotations={"x-warren-id": str(msg_id).encode()}))


def context(log: dict[int, Entry] | None = None, *, term: int = 5, leader: Any = Q3,
            last_applied: int = 0, index: int | None = None) -> TraceContext:
    return TraceContext(term=term, leader=leader, cluster=(Q1, Q2, Q3),
                        last_applied=last_applied, index=index, log=Log(log or {}))


def by_kind(rows: list[Row], kind: str) -> list[dict[str, Any]]:
    return [f for k, f in rows if k == kind]


def test_state_entries_record_term_leader_and_members_from_the_context(
        rows: list[Row]) -> None:
    m = QueueMachine(machine_config("q1", QNAME))
    state = m.init({})
    ra_machine.call_state_enter(m, "recover", state, context(last_applied=9))
    ra_machine.call_state_enter(m, "follower", state, context(last_applied=9))
    ra_machine.call_state_enter(m, "leader", state, context(term=6, leader=Q2))

    assert [(f["raft_term"], f["raft_index"]) for f in by_kind(rows, "recovered")] == [(5, 9)]
    assert [(f["role"], f["raft_term"], f["leader"], f["previous"])
            for f in by_kind(rows, "role_change")] == [
        ("recover", 5, "q1@n3", None), ("follower", 5, "q1@n3", "recover"),
        ("leader", 6, "q1@n2", "follower")]
    assert [(f["raft_term"], f["leader"], f["members"])
            for f in by_kind(rows, "leader_elected")] == [
        (6, "q1@n2", ["q1@n1", "q1@n2", "q1@n3"])]


def test_entries_the_machine_is_not_called_for_are_read_from_the_context_log(
        rows: list[Row]) -> None:
    m = QueueMachine(machine_config("q1", QNAME))
    state = m.init({})
    first, second = enqueue(1), enqueue(2)
    log: dict[int, Entry] = {
        1: (1, 5, (USR, {"ts": 1}, first, "none")),
        2: (2, 5, (NOOP, {"ts": 2}, 7)),
        3: (3, 5, (RA_CLUSTER_CHANGE, {"ts": 3}, {Q1: {}, Q2: {}}, "none")),
        4: (4, 5, (USR, {"ts": 4}, second, "none")),
    }
    for idx, cmd in ((1, first), (4, second)):
        meta = {"index": idx, "term": 5, "system_time": idx, "machine_version": 7}
        state, _reply, _effects = ra_machine.call_apply(
            m, meta, cmd, state, context(log, last_applied=idx - 1, index=idx))

    assert [(f["raft_index"], f["cmd_type"], f.get("members"))
            for f in by_kind(rows, "applied")] == [
        (1, "enqueue", None), (2, "noop", None),
        (3, "cluster_change", ["q1@n1", "q1@n2"]), (4, "enqueue", None)]


def test_a_member_driven_by_the_ra_core_records_its_server_context(rows: list[Row]) -> None:
    m = QueueMachine(machine_config("q1", QNAME))
    entries = [(1, 2, (NOOP, {"ts": 1}, 7)),
               (2, 2, (USR, {"ts": 2}, enqueue(1), "none"))]
    member = server(sid=Q2, members=[Q1, Q2, Q3], log=entries, machine=m, term=2,
                    initial_machine_version=7)
    member.leader_id = Q1
    core.handle_state_enter("recover", "recover", member)
    core.handle_state_enter("follower", "recover", member)
    apply_to(2, member, [])

    assert by_kind(rows, "role_change")[1] == {
        "queue": "q1", "server": "q1@n2", "node": "n2@host", "emitter": "n2@host/ra/q1",
        "role": "follower", "raft_term": 2, "leader": "q1@n1", "previous": "recover"}
    assert [(f["raft_term"], f["raft_index"], f["cmd_type"], f.get("msg_id"))
            for f in by_kind(rows, "applied")] == [(2, 1, "noop", None),
                                                   (2, 2, "enqueue", 1)]


def test_the_machine_asks_for_a_context_only_while_the_history_is_recorded(
        rows: list[Row]) -> None:
    m = QueueMachine(machine_config("q1", QNAME))
    assert m.tracing()
    trace.set_sink(None)
    assert not m.tracing()
