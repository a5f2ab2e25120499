"""Hand-written histories for the final-state checks: post-drain emptiness and DLX
worker liveness. They join `cases.CASES` (imported at the end of `cases`), so the
reference and the merged Spark pass check them like every other case. Nodes are named
after the case's prefix, so a kill in one case never touches another's workers.
"""

from __future__ import annotations

import json
from typing import Any

from analysis.model import Violation
from tests.analysis.cases import Builder, case, kill

EMPTY = "post_drain_emptiness"
LIVE = "dlx_worker_liveness"


def state(b: Builder, queue: str, idx: int, ready: int, out: int,
          nodes: tuple[str, ...] = ("n1", "n2", "n3"), kind: str = "applied") -> list[Any]:
    """Rows of `nodes` that reached `idx` with `ready` / `out` messages in the state."""
    return [b.rep(kind, queue, n, raft_index=idx, raft_term=1, cmd_type="noop",
                  cmd_digest=idx, ready=ready, checked_out=out) for n in nodes]


@case
def queues_left_with_messages_after_drain(
        b: Builder) -> tuple[list[Violation], dict[str, str]]:
    state(b, "e1", 1, 1, 0)
    final = state(b, "e1", 2, 0, 1)  # a consumer still holds one
    state(b, "e2", 1, 2, 0, nodes=("n2", "n3"))  # two never consumed
    lone = state(b, "e2", 2, 1, 0, nodes=("n3",))
    b.drain()
    return [b.v(EMPTY, "not_empty", "e1", key=b.q("e1") + "@n1", raft_index=2,
                ts_ns=final[0]["ts_ns"], detail="ready=0 checked_out=1"),
            b.v(EMPTY, "not_empty", "e2", key=b.q("e2") + "@n3", raft_index=2,
                ts_ns=lone[0]["ts_ns"], detail="ready=1 checked_out=0")], {EMPTY: "fail"}


@case
def final_state_is_read_at_the_highest_index(
        b: Builder) -> tuple[list[Violation], dict[str, str]]:
    state(b, "e3", 1, 1, 0)
    state(b, "e3", 2, 0, 0, nodes=("n1", "n2"))  # n3 lags behind with a fuller state
    state(b, "e4", 3, 0, 2, nodes=("n1",))
    # n2 installs a snapshot past n1's applies: the snapshot's state is the final one
    state(b, "e4", 7, 0, 0, nodes=("n2",), kind="snapshot_installed")
    b.applied("e4", 8, "noop", nodes=("n2",))  # a Raft entry carries no counts
    b.drain()
    return [], {EMPTY: "pass"}


def pid(b: Builder, node: str, serial: int) -> str:
    return f"<{node}.{serial}.1>"


def leader(b: Builder, queue: str, node: str, term: int) -> dict[str, Any]:
    return b.rep("leader_elected", queue, node, raft_term=term, leader=f"{b.q(queue)}@{node}")


def worker(b: Builder, queue: str, node: str, serial: int) -> dict[str, Any]:
    """A DLX worker on `node` checked out from `queue`'s leader."""
    p = pid(b, node, serial)
    b._emit("supervision_events", f"{node}/sup", "started", node,
            actor_path=f"{node}/rabbit_fifo_dlx_sup/rabbit_fifo_dlx_worker/{serial}.1",
            supervisor="rabbit_fifo_dlx_sup", actor_class="fifo.dlx_worker._start_worker",
            extra=json.dumps({"pid": p, "restart_type": "transient"}))
    return b._emit("replica_events", f"{node}/dlx/{b.q(queue)}", "dlx_worker_checkout", node,
                   queue=b.q(queue), extra=json.dumps({"pid": p}))


def ended(b: Builder, node: str, serial: int, kind: str = "stopped") -> None:
    b._emit("supervision_events", f"{node}/sup", kind, node,
            actor_path=f"{node}/rabbit_fifo_dlx_sup/rabbit_fifo_dlx_worker/{serial}.1",
            supervisor="rabbit_fifo_dlx_sup", actor_class="fifo.dlx_worker._start_worker",
            reason="shutdown" if kind == "stopped" else "boom",
            extra=json.dumps({"pid": pid(b, node, serial), "restart_type": "transient"}))


@case
def dlx_worker_follows_the_leader(b: Builder) -> tuple[list[Violation], dict[str, str]]:
    w1, w2, w3 = b.p + "w1", b.p + "w2", b.p + "w3"
    b.config("src", dlx_strategy="at-least-once", dlx_target="dlq")
    leader(b, "src", w1, 1)
    worker(b, "src", w1, 10)
    leader(b, "src", w2, 2)  # the old leader's worker stops, the new leader starts one
    ended(b, w1, 10)
    worker(b, "src", w2, 11)
    worker(b, "src", w3, 12)  # a worker that crashed, and one whose node was killed
    ended(b, w3, 12, "crashed")
    worker(b, "src", w3, 13)
    kill(b, w3)
    b.drain()
    return [], {LIVE: "pass"}


@case
def dlx_workers_missing_doubled_and_stray(
        b: Builder) -> tuple[list[Violation], dict[str, str]]:
    x1, x2, x3 = b.p + "x1", b.p + "x2", b.p + "x3"
    for q in ("s1", "s2", "s3", "s4"):
        b.config(q, dlx_strategy="at-least-once", dlx_target="dlq")
    l1 = leader(b, "s1", x1, 1)
    worker(b, "s1", x1, 20)
    ended(b, x1, 20, "crashed")  # and never started again
    l2 = leader(b, "s2", x1, 1)
    worker(b, "s2", x1, 21)
    worker(b, "s2", x1, 22)
    leader(b, "s3", x2, 3)
    worker(b, "s3", x2, 23)
    stray = worker(b, "s3", x3, 24)  # a follower's node still runs one
    worker(b, "s4", x2, 25)  # no leader known: counted, not judged
    b.drain()
    return [b.v(LIVE, "dlx_worker_missing", "s1", key=f"{b.q('s1')}@{x1}", ts_ns=l1["ts_ns"],
                detail="running=0"),
            b.v(LIVE, "dlx_worker_duplicate", "s2", key=f"{b.q('s2')}@{x1}",
                ts_ns=l2["ts_ns"], detail="running=2"),
            b.v(LIVE, "dlx_worker_stray", "s3", key=pid(b, x3, 24), ts_ns=stray["ts_ns"],
                detail=x3)], {LIVE: "fail"}


@case
def dlx_worker_on_a_killed_node_is_gone(b: Builder) -> tuple[list[Violation], dict[str, str]]:
    """Recorded as a cluster records them: rows carry the full node name, servers and
    leaders the short one, and the nemesis names the nodes it kills in full."""
    v1, v2 = b.p + "v1", b.p + "v2"
    full = {v1: f"{v1}@127.0.0.1:25671", v2: f"{v2}@127.0.0.1:25672"}
    b.config("src", dlx_strategy="at-least-once", dlx_target="dlq")

    def elected(node: str, term: int) -> None:
        q = b.q("src")
        b._emit("replica_events", f"{full[node]}/ra/{q}", "leader_elected", full[node],
                queue=q, server=f"{q}@{node}", raft_term=term, leader=f"{q}@{node}")

    def checkout(node: str, serial: int) -> None:
        b._emit("replica_events", f"{full[node]}/dlx/{b.q('src')}", "dlx_worker_checkout",
                full[node], queue=b.q("src"), extra=json.dumps({"pid": pid(b, node, serial)}))

    elected(v1, 1)
    checkout(v1, 40)
    kill(b, full[v1])  # its worker dies with it, without a supervision row
    elected(v2, 2)
    checkout(v2, 41)
    b.drain()
    return [], {LIVE: "pass"}
