"""The `dlx_at_least_once` check in plain Python (the Spark one is `analysis.checks.dlx`):
a message an at-least-once source queue dead-letters reaches its target queue.
"""

from __future__ import annotations

from collections import defaultdict

from analysis import model
from analysis.model import Params, Violation
from analysis.reference.history import BIG, RefHistory, RefResult, check_result, vrow


def dlx_at_least_once(h: RefHistory, p: Params) -> RefResult:
    check = "dlx_at_least_once"
    sources = {q: h.meta.queues[q].get("dlx_target") for q in h.meta.dlx_sources()}
    rep = h.rows("replica_events")
    if not sources or not rep:
        return check_result(check, 0, [], {}, model.dlx_status({}, False, h.drained))
    discards: dict[tuple[str, int], int] = {}
    for r in rep:
        if r["kind"] == "dlx_discard" and r["queue"] in sources:
            k = (r["queue"], r["msg_id"])
            discards[k] = min(discards.get(k, BIG), r["ts_ns"])
    enq: dict[tuple[str | None, int], set[int]] = defaultdict(set)
    for r in rep:
        if r["kind"] == "applied" and r["cmd_type"] == "enqueue":
            enq[(r["queue"], r["msg_id"])].add(r["raft_index"])
    delivered = {(r["queue"], r["msg_id"]) for r in h.rows("client_ops", "deliver", "get_ok")}
    settled = {(r["queue"], r["msg_id"]) for r in rep if r["kind"] == "dlx_settled"}
    violations: list[Violation] = []
    counts = {"discards": len(discards), "dlx_lost": 0, "dlx_pending": 0, "dlx_duplicates": 0}
    for (q, m), ts in discards.items():
        target = sources[q]
        arrived = (target, m) in enq or (target, m) in delivered
        counts["dlx_duplicates"] += len(enq.get((target, m), ())) > 1
        if arrived:
            continue
        kind = "dlx_lost" if (q, m) in settled else "dlx_pending"
        counts[kind] += 1
        violations.append(vrow(check, kind, q, m, key=target, ts_ns=ts))
    return check_result(check, len(discards), violations, counts,
                   model.dlx_status(counts, True, h.drained))
