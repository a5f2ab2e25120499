"""What the history needs from dead-lettering at the end of a run: each worker names
its queue and pid once its checkout succeeded (`dlx_worker_checkout`), the worker a
leader change stops shows up as `stopped` with the same pid, and the members' last
`applied` rows report an empty queue once every dead letter was forwarded.

Uses the three-node at-least-once queue of `test_dlx_worker` (B leads at first).
"""

from __future__ import annotations

from typing import Any

from actors import trace
from ra import api
from ra import system as ra_system
from tests.fifo.test_dlx_worker import (  # noqa: F401  (dlq is a fixture)
    Broker,
    DlQueue,
    all_forwarded,
    confirm,
    dead_letter,
    dlq,
    dlx_children,
)
from tests.ra.ra_proc_support import wait_until


def test_workers_name_queue_and_pid_and_the_drained_queue_reports_empty(
        dlq: DlQueue) -> None:  # noqa: F811  (the imported fixture)
    rows: list[tuple[str, dict[str, Any]]] = []
    inner = trace.set_sink(None)
    assert inner is not None

    def tee(kind: str, fields: dict[str, Any]) -> None:
        rows.append((kind, dict(fields)))
        inner(kind, fields)

    trace.set_sink(tee)
    a, b, _c = dlq.names
    [b_worker] = ra_system.rpc(b, dlx_children)
    assert api.transfer_leadership(dlq.sid(1), dlq.sid(0)) == "ok"
    wait_until(lambda: len(ra_system.rpc(a, dlx_children)) == 1, what="A's worker")
    [a_worker] = ra_system.rpc(a, dlx_children)
    broker = Broker(confirm)
    dead_letter(dlq, b"d1", b"d2")
    broker.pump(lambda: len(broker.published) == 2, "A's worker publishes")
    wait_until(lambda: all_forwarded(dlq), what="source queue emptied on every member")

    checkouts = [f for k, f in rows if k == "dlx_worker_checkout"]
    assert [(f["queue"], f["node"], f["pid"]) for f in checkouts] == [("q1", a, a_worker)]
    stopped = [f for k, f in rows if k == "stopped" and f.get("pid") == b_worker]
    assert len(stopped) == 1
    last: dict[str, dict[str, Any]] = {}
    for k, f in rows:
        if k == "applied" and f.get("ready") is not None:
            last[f["node"]] = f
    assert {n: (f["ready"], f["checked_out"]) for n, f in last.items()} == \
        dict.fromkeys(dlq.names, (0, 0))
