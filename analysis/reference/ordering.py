"""The ordering checks in plain Python (the Spark ones are in `analysis.checks.ordering`):
per-publisher FIFO seen by a consumer, a consumer's deliveries in enqueue order, and
strict queue order under a single active consumer with prefetch 1.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise
from typing import Any

from analysis import model
from analysis.model import Params, Violation
from analysis.reference.common import (
    Delivery,
    consumer,
    consumer_key,
    deliveries,
    enqueue_pos,
    first_attempt,
    first_publishes,
    with_epochs,
)
from analysis.reference.history import BIG, RefHistory, RefResult, Row, check_result, okey, vrow


def _descents(groups: dict[Any, list[Row]], value: str) -> list[tuple[Row, Row]]:
    out: list[tuple[Row, Row]] = []
    for rows in groups.values():
        rows.sort(key=lambda r: r["delivery_tag"])
        out.extend((a, b) for a, b in pairwise(rows) if a[value] >= b[value])
    return out


def ordering_channel_fifo(h: RefHistory, p: Params) -> RefResult:
    check = "ordering_channel_fifo"
    rows = [r for r in with_epochs(h.rows("client_ops")) if r["kind"] in ("deliver", "get_ok")]
    pub_queue = {m: r["queue"] for m, r in first_publishes(h).items()}
    candidates = [r for r in rows if first_attempt(r) and r["pub_chan"] is not None
                  and r["pub_seq"] is not None]
    # a dead-lettered message was not published to the queue it arrived in
    firsts = [r for r in candidates
              if pub_queue.get(r["msg_id"], r["queue"]) in (None, r["queue"])]
    groups: dict[Any, list[Row]] = defaultdict(list)
    for r in firsts:
        groups[(r["queue"], r["pub_chan"], *consumer(r))].append(r)
    violations = [
        vrow(check, "pub_seq_descent", b["queue"], b["msg_id"], a["msg_id"],
             f"{b['pub_chan']}>{consumer_key(b)}", ts_ns=b["ts_ns"],
             detail=f"{a['pub_seq']}>{b['pub_seq']}")
        for a, b in _descents(groups, "pub_seq")
    ]
    chans: dict[Any, list[Row]] = defaultdict(list)
    for r in rows:
        chans[(r["conn_id"], r["channel_id"], r["epoch"])].append(r)
    for chan in chans.values():
        chan.sort(key=okey)
        for a, b in pairwise(chan):
            if a["delivery_tag"] >= b["delivery_tag"]:
                violations.append(vrow(check, "delivery_tag_order", b["queue"], b["msg_id"],
                                       a["msg_id"], f"{b['conn_id']}/{b['channel_id']}",
                                       ts_ns=b["ts_ns"],
                                       detail=f"{a['delivery_tag']}>={b['delivery_tag']}"))
    counts = {"first_attempt": len(firsts), "dead_lettered": len(candidates) - len(firsts)}
    return check_result(check, len(firsts), violations, counts,
                   (model.simple_status(len(violations), True)[0],
                    model.channel_fifo_note(counts)))


def ordering_consumer_monotonic(h: RefHistory, p: Params) -> RefResult:
    check = "ordering_consumer_monotonic"
    if not h.rows("replica_events"):
        return check_result(check, 0, [], {}, model.simple_status(0, False, "no replica_events"))
    pos = enqueue_pos(h)
    rows = [dict(r, pos=pos[(r["queue"], r["msg_id"])])
            for r in with_epochs(h.rows("client_ops"))
            if r["kind"] in ("deliver", "get_ok") and first_attempt(r)
            and (r["queue"], r["msg_id"]) in pos]
    groups: dict[Any, list[Row]] = defaultdict(list)
    for r in rows:
        groups[(r["queue"], *consumer(r))].append(r)
    violations = [
        vrow(check, "pos_descent", b["queue"], b["msg_id"], a["msg_id"], consumer_key(b), b["pos"],
             b["ts_ns"], f"{a['pos']}>{b['pos']}")
        for a, b in _descents(groups, "pos")
    ]
    return check_result(check, len(rows), violations, {"first_attempt_with_pos": len(rows)},
                   model.simple_status(len(violations), True))



def ordering_sac_fifo(h: RefHistory, p: Params) -> RefResult:
    check = "ordering_sac_fifo"
    queues = set(h.meta.sac_fifo_queues())
    if not queues:
        return check_result(check, 0, [], {}, model.simple_status(
            0, False, "no single-active-consumer queue with prefetch 1"))
    pos = enqueue_pos(h)
    dls = [d for d in deliveries(h, p) if d.row["queue"] in queues]
    violations: list[Violation] = []
    by_queue: dict[str, list[Delivery]] = defaultdict(list)
    for d in dls:
        by_queue[d.row["queue"]].append(d)
    for q, qd in by_queue.items():
        qd.sort(key=lambda d: okey(d.row))
        best: tuple[int, int] | None = None
        for d in qd:
            if best is not None and d.row["ts_ns"] < best[0]:
                violations.append(vrow(check, "sac_overlap", q, d.row["msg_id"], best[1],
                                       consumer_key(d.row), ts_ns=d.row["ts_ns"]))
            cand = (BIG if d.release_ts is None else d.release_ts, d.row["msg_id"])
            best = cand if best is None else max(best, cand)
        first_ok: dict[int, int] = {}
        for d in qd:
            if d.ok_ts is not None:
                m = d.row["msg_id"]
                first_ok[m] = min(first_ok.get(m, BIG), d.ok_ts)
        seq = sorted(((t, m) for m, t in first_ok.items() if (q, m) in pos))
        for (_, a), (t, b) in pairwise(seq):
            if pos[(q, a)] >= pos[(q, b)]:
                violations.append(vrow(check, "sac_order", q, b, a, raft_index=pos[(q, b)],
                                       ts_ns=t, detail=f"{pos[(q, a)]}>{pos[(q, b)]}"))
        msgs = sorted({d.row["msg_id"] for d in qd if (q, d.row["msg_id"]) in pos},
                      key=lambda m: pos[(q, m)])
        prefix: dict[int, tuple[int, int] | None] = {}
        run: tuple[int, int] | None = None
        for m in msgs:
            prefix[m] = run
            if m in first_ok:
                run = (first_ok[m], m) if run is None else max(run, (first_ok[m], m))
        for d in qd:
            m = d.row["msg_id"]
            before = prefix.get(m)
            if before is not None and d.row["ts_ns"] < before[0]:
                violations.append(vrow(check, "sac_overtake", q, m, before[1], consumer_key(d.row),
                                       pos[(q, m)], d.row["ts_ns"]))
    return check_result(check, len(dls), violations, {"deliveries": len(dls)},
                   model.simple_status(len(violations), True))
