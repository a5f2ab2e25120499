"""The `total_queue` check in plain Python (the Spark one is `analysis.checks.total_queue`):
every confirmed message is settled ok, dead-lettered or dropped, never lost, never
unexpected and never handed out again after its settle.
"""

from __future__ import annotations

from collections import defaultdict

from analysis import model, queue_fate
from analysis.model import Params, Violation
from analysis.reference.common import (
    Delivery,
    deliveries,
    first_publishes,
    settles,
)
from analysis.reference.history import RefHistory, RefResult, check_result, vrow


def _fate(h: RefHistory, m: int, queue: str, ds_: list[Delivery],
          discarded: set[tuple[int, str]]) -> tuple[str, bool]:
    """The last queue of `queue`'s dead-letter chain the message reached (a discard into
    it, or a delivery from it), and whether that queue dropped it: rejected without
    requeue or returned past its delivery limit, with no dead-letter target. Only the
    returns the run's release counts toward the limit are counted (`_counts`), and the
    highest delivery count one carried tells how many earlier ones did."""
    end = queue
    seen = {d.row["queue"] for d in ds_}
    for target in h.meta.dlx_chain(queue):
        if target in seen or (m, target) in discarded:
            end = target
    if h.meta.queues.get(end, {}).get("dlx_target"):
        return end, False
    there = [d for d in ds_ if d.row["queue"] == end]
    returned = [d for d in there if d.outcome == "returned"]
    requeues_count = h.meta.requeue_counts_toward_limit()
    counting = [d for d in returned if _counts(d, requeues_count)]
    counted = max(((d.row["delivery_count"] or 0) + _counts(d, requeues_count)
                   for d in returned), default=0)
    limit = h.meta.delivery_limit(end)
    past_limit = limit is not None and max(len(counting), counted) > limit
    return end, past_limit or any(d.outcome == "dropped" for d in there)


def _counts(d: Delivery, requeues_count: bool) -> int:
    """1 when the return of `d` counts toward the delivery limit: every return where
    requeues count, else (4.3) only a return by its consumer's end, not a requeue."""
    return int(requeues_count or d.by_end)



def _excuses(h: RefHistory) -> dict[int, str]:
    """Per message id the first of `queue_fate`'s rules its queue rows meet: the
    message's own rows (returned, dropped, a transient enqueue before its home's kill);
    the queue rules are applied by `_why` to the queue it ended in."""
    facts = _facts(h)
    why: dict[int, str] = {}
    for r in h.rows("queue_events", "queue_enqueued"):
        kill = facts.last_kill.get(r["queue"])
        if r["persistent"] is False and kill is not None and r["ts_ns"] <= kill:
            why.setdefault(r["msg_id"], "node_down")
    for r in h.rows("queue_events", "queue_dropped"):
        why[r["msg_id"]] = "dropped"
    for r in h.rows("client_ops", "return"):
        why[r["msg_id"]] = "unroutable"
    return why


def _facts(h: RefHistory) -> queue_fate.QueueFacts:
    kills = [(t, r["ts_ns"]) for r in h.rows("nemesis_events", "start")
             if r["fault"] == "kill" for t in r["targets"] or []]
    return queue_fate.queue_facts(h.rows("queue_events", "queue_declared"),
                                  h.rows("queue_events", "queue_deleted"), kills)


def _why(own: str | None, end: str, facts: queue_fate.QueueFacts) -> str | None:
    """The excuse of a message that ended in queue `end`, by `queue_fate`'s order."""
    if own in ("unroutable", "dropped"):
        return own
    if end in facts.deleted:
        return "queue_deleted"
    if own == "node_down" or end in facts.lost_with_node:
        return "node_down"
    return None


def total_queue(h: RefHistory, p: Params) -> RefResult:
    check = "total_queue"
    ops = h.rows("client_ops")
    pubs = first_publishes(h)
    confirmed = {r["msg_id"] for r in ops if r["kind"] == "confirm"}
    nacked = {r["msg_id"] for r in ops if r["kind"] == "pub_nack"} - confirmed
    dls = deliveries(h, p)
    dlx_queues = set(h.meta.dlx_queues())
    per_msg: dict[int, list[Delivery]] = defaultdict(list)
    violations: list[Violation] = []
    for d in dls:
        r = d.row
        pub = pubs.get(r["msg_id"])
        key = f"{r['conn_id']}/{r['channel_id']}"
        if pub is None:
            violations.append(vrow(check, "unexpected", r["queue"], r["msg_id"], key=key,
                                   ts_ns=r["ts_ns"]))
            continue
        if (pub["body_digest"] is not None and r["body_digest"] is not None
                and pub["body_digest"] != r["body_digest"]):
            violations.append(vrow(check, "unexpected_body", r["queue"], r["msg_id"], key=key,
                                   ts_ns=r["ts_ns"]))
        per_msg[r["msg_id"]].append(d)
    unexpected = len(violations)
    drained = h.drained
    counts = dict.fromkeys(("lost", "lost_never_delivered", "lost_delivered_never_acked",
                            "duplicated", "duplicated_beyond_redelivery", "recovered_nacked",
                            "recovered_indeterminate", "settled_ok", "dead_lettered",
                            "dropped"), 0)
    counts.update(dict.fromkeys(("unroutable", "deleted_with_queue", "lost_with_node"), 0))
    own_why = _excuses(h)
    facts = _facts(h)
    discarded: set[tuple[int, str]] = set()
    for r in h.rows("replica_events", "dlx_discard"):
        target = h.meta.queues.get(r["queue"], {}).get("dlx_target")
        if target:
            discarded.add((r["msg_id"], target))
    settled_at, decided_last = settles(h)
    by_replicas = {q for q, _ in settled_at}
    counts["client_unexplained_redeliveries"] = 0
    for (q, m), at in sorted(settled_at.items()):
        last = decided_last.get((q, m))
        if last is not None and last > at:
            counts["duplicated_beyond_redelivery"] += 1
            violations.append(vrow(check, "duplicated_beyond_redelivery", q, m, raft_index=last,
                                   detail=f"decided at {last} after its settle at {at}"))
    for m, pub in pubs.items():
        ds_ = per_msg.get(m, [])
        oks = sum(d.outcome == "ok" for d in ds_)
        if ds_:
            explained = sum(d.outcome == "returned" or d.ambiguous
                            or (d.outcome == "dropped" and d.row["queue"] in dlx_queues)
                            for d in ds_)
            extra = len(ds_) - 1 - explained
            if extra > 0 and pub["queue"] in by_replicas:
                counts["client_unexplained_redeliveries"] += 1
            elif extra > 0:
                counts["duplicated_beyond_redelivery"] += 1
                violations.append(vrow(check, "duplicated_beyond_redelivery", pub["queue"], m,
                                       detail=str(extra)))
        if oks:
            counts["settled_ok"] += 1
            counts["duplicated"] += oks > 1
            if m not in confirmed:
                counts["recovered_nacked" if m in nacked else "recovered_indeterminate"] += 1
        end, dropped = _fate(h, m, pub["queue"], ds_, discarded)
        counts["dead_lettered"] += end != pub["queue"]
        if oks:
            continue
        why = None if dropped else _why(own_why.get(m), end, facts)
        if dropped or why is not None:
            counts[queue_fate.WHY[why or "dropped"]] += 1
        elif drained and m in confirmed:
            there = [d for d in ds_ if d.row["queue"] == end]
            kind = "lost_delivered_never_acked" if there else "lost_never_delivered"
            counts["lost"] += 1
            counts[kind] += 1
            violations.append(vrow(check, kind, end, m, detail=None if end == pub["queue"]
                                   else f"dead-lettered from {pub['queue']}"))
    counts.update(attempted=len(pubs), confirmed=len(confirmed & pubs.keys()),
                  nacked=len(nacked & pubs.keys()), unexpected=unexpected,
                  deliveries=len(dls))
    counts["indeterminate"] = counts["attempted"] - counts["confirmed"] - counts["nacked"]
    return check_result(check, len(pubs), violations, counts,
                   model.total_queue_status(counts, drained, h.meta.drain_expected))
