"""The reference checker's final-state checks and DOWN latency metric.

Post-drain emptiness, DLX worker liveness, DOWN propagation latency and where a
lost message was last seen, over the reference checker's rows: the oracle of the
Spark checks in `analysis.checks`. The verdict rules and names both sides share
come from `analysis.final_state`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from analysis import model
from analysis.final_state import (
    COUNTED_KINDS,
    DLX_LIVENESS,
    EMPTINESS,
    STAGES,
    dlx_liveness_status,
    emptiness_status,
    eval_point,
    server_node,
    short_node,
)
from analysis.model import Params, Violation
from analysis.reference.history import RefHistory, RefResult, Row

__all__ = ["dlx_worker_liveness", "down_counts", "down_latency_hist", "last_seen",
           "post_drain_emptiness"]


def _v(check: str, violation: str, queue: str | None = None, msg_id: int | None = None,
       other_id: int | None = None, key: str | None = None, raft_index: int | None = None,
       ts_ns: int | None = None, detail: str | None = None) -> Violation:
    return (check, violation, queue, msg_id, other_id, key, raft_index, ts_ns, detail)


def _okey(r: Row) -> tuple[int, str, int]:
    return (r["ts_ns"], r["emitter"] or "", r["seq"] or 0)


def _extra(r: Row, name: str) -> Any:
    return json.loads(r["extra"]).get(name) if r.get("extra") else None


# -- 4.1 post-drain emptiness -----------------------------------------------------------

def post_drain_emptiness(h: RefHistory, p: Params) -> RefResult:
    rep = h.rows("replica_events")
    counts = {"queues": 0, "unrecorded_queues": 0, "not_empty": 0, "ready": 0,
              "checked_out": 0}
    if not rep:
        status = emptiness_status(counts, False, h.drained, h.meta.drain_expected)
        return RefResult(EMPTINESS, status[0], 0, [], {}, status[1])
    queues = {r["queue"] for r in rep if r["queue"] is not None and r["server"] is not None}
    states: dict[str, list[Row]] = defaultdict(list)
    for r in rep:
        if (r["kind"] in COUNTED_KINDS and r["ready"] is not None
                and r["checked_out"] is not None and r["raft_index"] is not None):
            states[r["queue"]].append(r)
    violations: list[Violation] = []
    drained = h.drained
    for q in sorted(queues):
        rows = states.get(q)
        counts["queues"] += 1
        if not rows:
            counts["unrecorded_queues"] += 1
            continue
        last = max(r["raft_index"] for r in rows)
        final = [r for r in rows if r["raft_index"] == last]
        ready = max(r["ready"] for r in final)
        out = max(r["checked_out"] for r in final)
        counts["ready"] += ready
        counts["checked_out"] += out
        if ready or out:
            counts["not_empty"] += 1
            if drained:
                violations.append(_v(EMPTINESS, "not_empty", q,
                                     key=min(r["server"] for r in final), raft_index=last,
                                     ts_ns=min(r["ts_ns"] for r in final),
                                     detail=f"ready={ready} checked_out={out}"))
    status = emptiness_status(counts, True, drained, h.meta.drain_expected)
    return RefResult(EMPTINESS, status[0], counts["queues"], sorted(violations, key=repr),
                     counts, status[1])


# -- 4.6 DLX worker liveness --------------------------------------------------------------

def dlx_worker_liveness(h: RefHistory, p: Params) -> RefResult:
    sources = h.meta.dlx_sources()
    rep = h.rows("replica_events")
    counts = {"sources": len(sources), "workers": 0, "running": 0, "no_leader": 0}
    if not sources or not rep:
        status = dlx_liveness_status({}, False, "no at-least-once dead-lettering configured"
                                     if not sources else "no replica_events", 0)
        return RefResult(DLX_LIVENESS, status[0], 0, [], {}, status[1])
    drain_end = max((r["ts_ns"] for r in h.rows("client_ops", "drain_end")
                     if r["outcome"] == "ok"), default=None)
    windows = model.fault_windows(h.rows("nemesis_events"), h.run_end_ns)
    at, why = eval_point(drain_end, h.run_end_ns, model.last_fault_stop(windows),
                         p.dlx_grace_ns)
    checkouts = [r for r in rep if r["kind"] == "dlx_worker_checkout"
                 and r["queue"] in sources]
    if not why and not checkouts:
        why = "no DLX worker recorded (history older than schema 1.1, or none started)"
    if at is None:
        status = dlx_liveness_status(counts, True, why, 0)
        return RefResult(DLX_LIVENESS, status[0], len(sources), [], counts, status[1])
    ended = {_extra(r, "pid") for r in h.rows("supervision_events", "crashed", "stopped")
             if r["ts_ns"] <= at}
    # kill targets are full node names, as the nodes' own rows; compare short names
    kills = [(short_node(t), r["ts_ns"]) for r in h.rows("nemesis_events", "start")
             if r["fault"] == "kill" for t in r["targets"] or []]
    leaders: dict[str, tuple[int, int, str]] = {}
    for r in rep:
        if r["kind"] == "leader_elected" and r["ts_ns"] <= at and r["queue"] in sources:
            k = (r["raft_term"] or 0, r["ts_ns"], r["leader"])
            leaders[r["queue"]] = max(leaders.get(r["queue"], k), k)
    running: dict[str, list[tuple[Any, str | None, int]]] = defaultdict(list)
    for r in checkouts:
        counts["workers"] += 1
        pid, node = _extra(r, "pid"), short_node(r["node"])
        killed = any(n == node and r["ts_ns"] <= t <= at for n, t in kills)
        if r["ts_ns"] <= at and pid not in ended and not killed:
            running[r["queue"]].append((pid, node, r["ts_ns"]))
    violations: list[Violation] = []
    for q in sources:
        workers = running.get(q, [])
        counts["running"] += len(workers)
        if q not in leaders:
            counts["no_leader"] += 1
            continue
        leader = leaders[q][2]
        lnode = server_node(leader)
        here = [w for w in workers if w[1] == lnode]
        if len(here) != 1:
            kind = "dlx_worker_missing" if not here else "dlx_worker_duplicate"
            violations.append(_v(DLX_LIVENESS, kind, q, key=leader, ts_ns=leaders[q][1],
                                 detail=f"running={len(here)}"))
        for pid, node, ts in workers:
            if node != lnode:
                violations.append(_v(DLX_LIVENESS, "dlx_worker_stray", q, key=pid, ts_ns=ts,
                                     detail=node))
    status = dlx_liveness_status(counts, True, why, len(violations))
    return RefResult(DLX_LIVENESS, status[0], len(sources), sorted(violations, key=repr),
                     counts, status[1])


# -- 4.7 DOWN propagation latency ------------------------------------------------------------

def down_latency_hist(h: RefHistory) -> dict[str, dict[int, int]]:
    """("all" / "local" / "remote") -> {log bucket: count} of `down_sent` -> `down_received`
    per monitor (paired by monitor reference); as `checks.down_latency` computes it."""
    sent: dict[str, Row] = {}
    for r in h.rows("supervision_events", "down_sent"):
        ref = _extra(r, "ref")
        if ref is not None and (ref not in sent or _okey(r) < _okey(sent[ref])):
            sent[ref] = r
    out: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for r in h.rows("supervision_events", "down_received"):
        s = sent.get(_extra(r, "ref"))
        if s is None:
            continue
        b = model.log_bucket(max(r["ts_ns"] - s["ts_ns"], 0))
        where = "local" if short_node(s["node"]) == short_node(r["node"]) else "remote"
        out["all"][b] += 1
        out[where][b] += 1
    return {k: dict(v) for k, v in out.items()}


def down_counts(h: RefHistory) -> dict[str, int]:
    received = h.rows("supervision_events", "down_received")
    sent = {_extra(r, "ref") for r in h.rows("supervision_events", "down_sent")} - {None}
    paired = sum(_extra(r, "ref") in sent for r in received)
    return {"down_sent": len(h.rows("supervision_events", "down_sent")),
            "down_received": len(received), "unpaired": len(received) - paired}


# -- 3.2 where a lost message was last seen ---------------------------------------------------

def last_seen(h: RefHistory, msg_ids: set[int]) -> dict[int, str]:
    """For each of `msg_ids`: the furthest stage of `STAGES` its history shows."""
    reached: dict[int, int] = dict.fromkeys(msg_ids, 0)

    def mark(m: Any, stage: str) -> None:
        if m in reached:
            reached[m] = max(reached[m], STAGES.index(stage))

    for r in h.rows("channel_events", "publish_in"):
        mark(r["msg_id"], "channel_publish_in")
    for r in h.rows("channel_events", "deliver_out"):
        mark(r["msg_id"], "channel_deliver_out")
    for r in h.rows("replica_events"):
        if r["kind"] == "applied" and r["cmd_type"] == "enqueue":
            mark(r["msg_id"], "ra_enqueued")
        elif r["kind"] in ("service_queue", "local_delivery"):
            mark(r["msg_id"], "ra_delivered")
    for r in h.rows("client_ops", "deliver", "get_ok"):
        mark(r["msg_id"], "client_deliver")
    return {m: STAGES[i] for m, i in reached.items()}
