"""Plain-Python implementation of every check: the oracle for the Spark checks.

It reads whole tables into lists of dicts, so it is for tests and small runs only.
Each function mirrors one module of `analysis.checks` and returns the same counts and
violation rows (in `model.VIOLATION_COLUMNS` order); tests assert they agree exactly.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds

from analysis import final_state, model, schema
from analysis.model import Params, RunConfig, Violation

Row = dict[str, Any]
BIG = 2**63 - 1


@dataclass
class RefHistory:
    """Rows of every table plus the parsed run metadata."""

    tables: dict[str, list[Row]]
    meta: RunConfig = field(default_factory=RunConfig)

    def rows(self, table: str, *kinds: str) -> list[Row]:
        rows = self.tables.get(table, [])
        return [r for r in rows if r["kind"] in kinds] if kinds else rows

    @property
    def run_end_ns(self) -> int:
        return max((r["ts_ns"] for rows in self.tables.values() for r in rows), default=0)

    @property
    def drained(self) -> bool:
        return any(r["outcome"] == "ok" for r in self.rows("client_ops", "drain_end"))

    @classmethod
    def from_rows(cls, tables: dict[str, list[Row]]) -> RefHistory:
        full = {t: [_complete(t, r) for r in tables.get(t, [])] for t in schema.TABLES}
        meta_rows = full["run_meta"]
        return cls(full, RunConfig.from_row(meta_rows[0] if meta_rows else None))

    @classmethod
    def from_dataset(cls, history_dir: str | Path) -> RefHistory:
        tables: dict[str, list[Row]] = {}
        for table in schema.TABLES:
            path = Path(history_dir) / table
            if path.is_dir():
                tables[table] = ds.dataset(path, partitioning="hive").to_table().to_pylist()
        return cls.from_rows(tables)


def _complete(table: str, row: Row) -> Row:
    names = schema.schema_of(table).names
    return {n: row.get(n) for n in names}


def okey(r: Row) -> tuple[int, str, int]:
    return (r["ts_ns"], r["emitter"] or "", r["seq"] or 0)


@dataclass
class RefResult:
    check: str
    status: str
    examined: int
    violations: list[Violation]
    counts: dict[str, int]
    note: str = ""


def _v(check: str, violation: str, queue: str | None = None, msg_id: int | None = None,
       other_id: int | None = None, key: str | None = None, raft_index: int | None = None,
       ts_ns: int | None = None, detail: str | None = None) -> Violation:
    return (check, violation, queue, msg_id, other_id, key, raft_index, ts_ns, detail)


def _result(check: str, examined: int, violations: list[Violation], counts: dict[str, int],
            status_note: tuple[str, str]) -> RefResult:
    return RefResult(check, status_note[0], examined, sorted(violations, key=repr), counts,
                     status_note[1])


# -- client-side derivations ---------------------------------------------------------

def with_epochs(rows: Iterable[Row]) -> list[Row]:
    """Client rows with `epoch`: how many `channel_open`s of their channel came before."""
    seen: dict[tuple[str, int], int] = defaultdict(int)
    out = []
    for r in sorted(rows, key=okey):
        r = dict(r)
        if r["conn_id"] is not None and r["channel_id"] is not None:
            ch = (r["conn_id"], r["channel_id"])
            if r["kind"] == "channel_open":
                seen[ch] += 1
            r["epoch"] = seen[ch]
        else:
            r["epoch"] = None
        out.append(r)
    return out


@dataclass
class Delivery:
    row: Row
    outcome: str  # ok / returned / dropped / open
    ambiguous: bool
    release_ts: int | None  # settle or close time
    ok_ts: int | None
    by_end: bool = False  # returned unsettled by its consumer's end, not by a settle


def deliveries(h: RefHistory, p: Params) -> list[Delivery]:
    """Every delivery with how it ended (section 4.0 of the spec)."""
    rows = with_epochs(h.rows("client_ops"))
    settles: dict[tuple[Any, ...], list[Row]] = defaultdict(list)
    ends_ch: dict[tuple[Any, ...], list[Row]] = defaultdict(list)
    ends_conn: dict[str, list[Row]] = defaultdict(list)
    cancels: dict[tuple[Any, ...], list[Row]] = defaultdict(list)
    for r in rows:
        ch = (r["conn_id"], r["channel_id"], r["epoch"])
        if r["kind"] in ("ack", "nack", "reject"):
            settles[(*ch, r["delivery_tag"])].append(r)
        elif r["kind"] == "channel_close":
            ends_ch[ch].append(r)
        elif r["kind"] == "conn_close":
            ends_conn[r["conn_id"]].append(r)
        elif r["kind"] == "cancel":
            cancels[(*ch, r["consumer_tag"])].append(r)
    out = []
    for d in rows:
        if d["kind"] not in ("deliver", "get_ok"):
            continue
        ch = (d["conn_id"], d["channel_id"], d["epoch"])
        ts = d["ts_ns"]
        later = [s for s in settles[(*ch, d["delivery_tag"])] if s["ts_ns"] >= ts]
        closes = [c for c in ends_ch[ch] + ends_conn[d["conn_id"]] if c["ts_ns"] >= ts]
        cancel = [c for c in cancels[(*ch, d["consumer_tag"])] if c["ts_ns"] >= ts]
        end_ts = min((c["ts_ns"] for c in closes + cancel), default=None)
        if later:
            s = min(later, key=okey)
            if s["kind"] == "ack":
                amb = any(c["error"] is not None
                          and s["ts_ns"] <= c["ts_ns"] <= s["ts_ns"] + p.ack_grace_ns
                          for c in closes)
                out.append(Delivery(d, "ok", amb, s["ts_ns"], s["ts_ns"]))
            elif s["requeue"] is False:
                out.append(Delivery(d, "dropped", False, s["ts_ns"], None))
            else:
                out.append(Delivery(d, "returned", False, s["ts_ns"], None))
        elif end_ts is not None:
            out.append(Delivery(d, "returned", False, end_ts, None, by_end=True))
        else:
            out.append(Delivery(d, "open", False, None, None))
    return out


# -- 4.1 total queue -----------------------------------------------------------------

def first_publishes(h: RefHistory) -> dict[int, Row]:
    """msg_id -> its first `publish` row."""
    pubs: dict[int, Row] = {}
    for r in sorted(h.rows("client_ops", "publish"), key=okey):
        pubs.setdefault(r["msg_id"], r)
    return pubs


def _fate(h: RefHistory, m: int, queue: str, ds_: list[Delivery],
          discarded: set[tuple[int, str]]) -> tuple[str, bool]:
    """The last queue of `queue`'s dead-letter chain the message reached (a discard into
    it, or a delivery from it), and whether that queue dropped it: rejected without
    requeue or returned past its delivery limit, with no dead-letter target."""
    end = queue
    seen = {d.row["queue"] for d in ds_}
    for target in h.meta.dlx_chain(queue):
        if target in seen or (m, target) in discarded:
            end = target
    if h.meta.queues.get(end, {}).get("dlx_target"):
        return end, False
    there = [d for d in ds_ if d.row["queue"] == end]
    returned = [d for d in there if d.outcome == "returned"]
    counted = max(((d.row["delivery_count"] or 0) + 1 for d in returned), default=0)
    limit = h.meta.delivery_limit(end)
    past_limit = limit is not None and max(len(returned), counted) > limit
    return end, past_limit or any(d.outcome == "dropped" for d in there)


def settles(h: RefHistory) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    """(queue, msg_id) -> index of its first applied settle, and -> the highest index at
    which the queue handed it out; only messages with a settle are in the first."""
    settled_at: dict[tuple[str, int], int] = {}
    decided_last: dict[tuple[str, int], int] = {}
    for r in h.rows("replica_events"):
        if r["msg_id"] is None or r["raft_index"] is None:
            continue
        k = (r["queue"], r["msg_id"])
        if r["kind"] == "settled":
            settled_at[k] = min(settled_at.get(k, BIG), r["raft_index"])
        elif r["kind"] in ("service_queue", "local_delivery"):
            decided_last[k] = max(decided_last.get(k, -BIG), r["raft_index"])
    return settled_at, decided_last


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
            violations.append(_v(check, "unexpected", r["queue"], r["msg_id"], key=key,
                                 ts_ns=r["ts_ns"]))
            continue
        if (pub["body_digest"] is not None and r["body_digest"] is not None
                and pub["body_digest"] != r["body_digest"]):
            violations.append(_v(check, "unexpected_body", r["queue"], r["msg_id"], key=key,
                                 ts_ns=r["ts_ns"]))
        per_msg[r["msg_id"]].append(d)
    unexpected = len(violations)
    drained = h.drained
    counts = dict.fromkeys(("lost", "lost_never_delivered", "lost_delivered_never_acked",
                            "duplicated", "duplicated_beyond_redelivery", "recovered_nacked",
                            "recovered_indeterminate", "settled_ok", "dead_lettered",
                            "dropped"), 0)
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
            violations.append(_v(check, "duplicated_beyond_redelivery", q, m, raft_index=last,
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
                violations.append(_v(check, "duplicated_beyond_redelivery", pub["queue"], m,
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
        if dropped:
            counts["dropped"] += 1
        elif drained and m in confirmed:
            there = [d for d in ds_ if d.row["queue"] == end]
            kind = "lost_delivered_never_acked" if there else "lost_never_delivered"
            counts["lost"] += 1
            counts[kind] += 1
            violations.append(_v(check, kind, end, m, detail=None if end == pub["queue"]
                                 else f"dead-lettered from {pub['queue']}"))
    counts.update(attempted=len(pubs), confirmed=len(confirmed & pubs.keys()),
                  nacked=len(nacked & pubs.keys()), unexpected=unexpected,
                  deliveries=len(dls))
    counts["indeterminate"] = counts["attempted"] - counts["confirmed"] - counts["nacked"]
    return _result(check, len(pubs), violations, counts,
                   model.total_queue_status(counts, drained, h.meta.drain_expected))


# -- 4.2 ordering --------------------------------------------------------------------

def _first_attempt(d: Row) -> bool:
    return not d["redelivered"] and not d["delivery_count"]


def enqueue_pos(h: RefHistory) -> dict[tuple[str, int], int]:
    pos: dict[tuple[str, int], int] = {}
    for r in h.rows("replica_events", "applied"):
        if r["cmd_type"] == "enqueue" and r["msg_id"] is not None:
            k = (r["queue"], r["msg_id"])
            pos[k] = min(pos.get(k, BIG), r["raft_index"])
    return pos


def _consumer(r: Row) -> tuple[Any, ...]:
    return (r["conn_id"], r["channel_id"], r["epoch"], r["consumer_tag"] or "")


def _ckey(r: Row) -> str:
    return f"{r['conn_id']}/{r['channel_id']}/{r['consumer_tag'] or ''}"


def _descents(groups: dict[Any, list[Row]], value: str) -> list[tuple[Row, Row]]:
    out = []
    for rows in groups.values():
        rows.sort(key=lambda r: r["delivery_tag"])
        out.extend((a, b) for a, b in pairwise(rows) if a[value] >= b[value])
    return out


def ordering_channel_fifo(h: RefHistory, p: Params) -> RefResult:
    check = "ordering_channel_fifo"
    rows = [r for r in with_epochs(h.rows("client_ops")) if r["kind"] in ("deliver", "get_ok")]
    pub_queue = {m: r["queue"] for m, r in first_publishes(h).items()}
    candidates = [r for r in rows if _first_attempt(r) and r["pub_chan"] is not None
                  and r["pub_seq"] is not None]
    # a dead-lettered message was not published to the queue it arrived in
    firsts = [r for r in candidates
              if pub_queue.get(r["msg_id"], r["queue"]) in (None, r["queue"])]
    groups: dict[Any, list[Row]] = defaultdict(list)
    for r in firsts:
        groups[(r["queue"], r["pub_chan"], *_consumer(r))].append(r)
    violations = [
        _v(check, "pub_seq_descent", b["queue"], b["msg_id"], a["msg_id"],
           f"{b['pub_chan']}>{_ckey(b)}", ts_ns=b["ts_ns"], detail=f"{a['pub_seq']}>{b['pub_seq']}")
        for a, b in _descents(groups, "pub_seq")
    ]
    chans: dict[Any, list[Row]] = defaultdict(list)
    for r in rows:
        chans[(r["conn_id"], r["channel_id"], r["epoch"])].append(r)
    for chan in chans.values():
        chan.sort(key=okey)
        for a, b in pairwise(chan):
            if a["delivery_tag"] >= b["delivery_tag"]:
                violations.append(_v(check, "delivery_tag_order", b["queue"], b["msg_id"],
                                     a["msg_id"], f"{b['conn_id']}/{b['channel_id']}",
                                     ts_ns=b["ts_ns"],
                                     detail=f"{a['delivery_tag']}>={b['delivery_tag']}"))
    counts = {"first_attempt": len(firsts), "dead_lettered": len(candidates) - len(firsts)}
    return _result(check, len(firsts), violations, counts,
                   (model.simple_status(len(violations), True)[0],
                    model.channel_fifo_note(counts)))


def ordering_consumer_monotonic(h: RefHistory, p: Params) -> RefResult:
    check = "ordering_consumer_monotonic"
    if not h.rows("replica_events"):
        return _result(check, 0, [], {}, model.simple_status(0, False, "no replica_events"))
    pos = enqueue_pos(h)
    rows = [dict(r, pos=pos[(r["queue"], r["msg_id"])])
            for r in with_epochs(h.rows("client_ops"))
            if r["kind"] in ("deliver", "get_ok") and _first_attempt(r)
            and (r["queue"], r["msg_id"]) in pos]
    groups: dict[Any, list[Row]] = defaultdict(list)
    for r in rows:
        groups[(r["queue"], *_consumer(r))].append(r)
    violations = [
        _v(check, "pos_descent", b["queue"], b["msg_id"], a["msg_id"], _ckey(b), b["pos"],
           b["ts_ns"], f"{a['pos']}>{b['pos']}")
        for a, b in _descents(groups, "pos")
    ]
    return _result(check, len(rows), violations, {"first_attempt_with_pos": len(rows)},
                   model.simple_status(len(violations), True))


def ordering_returns(h: RefHistory, p: Params) -> RefResult:
    """Messages one consumer's end returned together, redelivered to one consumer as
    their very next hand-out, come back in the order the first consumer got them (see
    `analysis.checks.returns`)."""
    check = "ordering_returns"
    per_msg: dict[tuple[Any, ...], list[Delivery]] = defaultdict(list)
    for d in deliveries(h, p):
        r = d.row
        if (r["msg_id"] is not None and r["delivery_tag"] is not None
                and (d.by_end or not _first_attempt(r))):
            per_msg[(r["queue"], r["msg_id"])].append(d)
    groups: dict[tuple[Any, ...], list[tuple[Row, Row]]] = defaultdict(list)
    counts = {"returned": 0, "traced": 0, "pairs": 0}
    for ds_ in per_msg.values():
        ds_.sort(key=lambda d: okey(d.row))
        for i, d in enumerate(ds_):
            if not d.by_end:
                continue
            counts["returned"] += 1
            nxt = next((e.row for e in ds_[i + 1:] if not _first_attempt(e.row)), None)
            if nxt is None or (nxt["delivery_count"] or 0) != (d.row["delivery_count"] or 0) + 1:
                continue
            counts["traced"] += 1
            groups[(d.row["queue"], *_consumer(d.row), d.release_ts, *_consumer(nxt))].append(
                (d.row, nxt))
    violations = []
    for pairs in groups.values():
        pairs.sort(key=lambda x: (x[0]["delivery_tag"], okey(x[0])))
        for (a, a_next), (b, b_next) in pairwise(pairs):
            counts["pairs"] += 1
            if a_next["delivery_tag"] >= b_next["delivery_tag"]:
                violations.append(_v(
                    check, "return_order", b["queue"], b["msg_id"], a["msg_id"],
                    _ckey(b_next), None, b_next["ts_ns"],
                    f"returned by {_ckey(b)}, redelivered as delivery tags "
                    f"{a_next['delivery_tag']}>{b_next['delivery_tag']}"))
    status, _ = model.simple_status(len(violations), True)
    return _result(check, counts["returned"], violations, counts,
                   (status, model.returns_note(counts, len(violations))))


def ordering_sac_fifo(h: RefHistory, p: Params) -> RefResult:
    check = "ordering_sac_fifo"
    queues = set(h.meta.sac_fifo_queues())
    if not queues:
        return _result(check, 0, [], {}, model.simple_status(
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
                violations.append(_v(check, "sac_overlap", q, d.row["msg_id"], best[1],
                                     _ckey(d.row), ts_ns=d.row["ts_ns"]))
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
                violations.append(_v(check, "sac_order", q, b, a, raft_index=pos[(q, b)],
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
                violations.append(_v(check, "sac_overtake", q, m, before[1], _ckey(d.row),
                                     pos[(q, m)], d.row["ts_ns"]))
    return _result(check, len(dls), violations, {"deliveries": len(dls)},
                   model.simple_status(len(violations), True))


# -- 4.3 replica determinism ---------------------------------------------------------

def replica_determinism(h: RefHistory, p: Params) -> RefResult:
    check = "replica_determinism"
    rep = h.rows("replica_events")
    if not rep:
        return _result(check, 0, [], {}, model.simple_status(0, False, "no replica_events"))
    applied = [r for r in rep if r["kind"] == "applied"]
    log: dict[tuple[str, int], set[Any]] = defaultdict(set)
    state: dict[tuple[str, int], set[int]] = defaultdict(set)
    decisions: dict[tuple[str, int], dict[str, set[Any]]] = defaultdict(lambda: defaultdict(set))
    for r in applied:
        k = (r["queue"], r["raft_index"])
        log[k].add((r["raft_term"], r["cmd_type"], r["cmd_digest"]))
        if r["state_digest"] is not None:
            state[k].add(r["state_digest"])
        decisions[k].setdefault(r["server"], set())  # applied i, may decide nothing
    for r in rep:
        if r["kind"] == "service_queue":
            decisions[(r["queue"], r["raft_index"])][r["server"]].add(
                (r["msg_id"], r["consumer_key"], r["attempt"]))
    cut = {(hole.queue, hole.cut_index, hole.server) for hole in dark_intervals(h)
           if hole.cut_index is not None}
    for q, i, server in cut:
        decisions.get((q, i), {}).pop(server, None)
    violations = [_v(check, "log_disagreement", q, raft_index=i, detail=str(len(s)))
                  for (q, i), s in log.items() if len(s) > 1]
    violations += [_v(check, "state_disagreement", q, raft_index=i, detail=str(len(s)))
                   for (q, i), s in state.items() if len(s) > 1]
    for (q, i), per_server in decisions.items():
        n = len({frozenset(s) for s in per_server.values()})
        if n > 1:
            violations.append(_v(check, "decision_disagreement", q, raft_index=i, detail=str(n)))
    seqs: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for r in rep:
        if r["kind"] in ("applied", "snapshot_installed", "recovered"):
            seqs[(r["queue"], r["server"])].append(r)
    for (q, server), rows in seqs.items():
        rows.sort(key=okey)
        for a, b in pairwise(rows):
            if b["kind"] != "applied" or b["raft_index"] == a["raft_index"] + 1:
                continue
            kind = ("apply_gap" if b["raft_index"] > a["raft_index"] + 1 else
                    "apply_repeat" if b["raft_index"] == a["raft_index"] else "apply_back")
            violations.append(_v(check, kind, q, key=server, raft_index=b["raft_index"],
                                 ts_ns=b["ts_ns"], detail=f"after {a['raft_index']}"))
    leaders: dict[tuple[str, int], set[str]] = defaultdict(set)
    for r in rep:
        if r["kind"] == "leader_elected" and r["leader"] is not None:
            leaders[(r["queue"], r["raft_term"])].add(r["leader"])
    violations += [_v(check, "election_safety", q, key=f"term={t}", detail=str(len(s)))
                   for (q, t), s in leaders.items() if len(s) > 1]
    counts = {"applied": len(applied), "unrecorded_indexes": len(cut)}
    return _result(check, len(applied), violations, counts,
                   (model.simple_status(len(violations), True)[0],
                    model.unrecorded_note(counts)))


# -- 4.4 local delivery --------------------------------------------------------------

def server_node(server: str) -> str:
    return server.rsplit("@", 1)[-1]


@dataclass(frozen=True)
class Hole:
    """Where a server's recorded history is missing (see `analysis.checks.common`)."""

    queue: str
    server: str
    dark_from: int
    dark_to: int
    sent_upto: int | None
    cut_index: int | None


def dark_intervals(h: RefHistory) -> set[Hole]:
    rep = [r for r in h.rows("replica_events") if r["server"] is not None]
    node_servers: dict[str, set[tuple[str, str]]] = defaultdict(set)
    per_server: dict[tuple[str, str], list[tuple[tuple[int, bool, int], Row | None]]] = \
        defaultdict(list)
    for r in rep:
        node_servers[r["node"]].add((r["queue"], r["server"]))
        per_server[(r["queue"], r["server"])].append(((r["ts_ns"], False, r["seq"]), r))
    for k in h.rows("nemesis_events", "start"):
        if k["fault"] == "kill":
            for node in k["targets"] or []:
                for qs in node_servers.get(node, ()):
                    per_server[qs].append(((k["ts_ns"], True, -1), None))
    holes: set[Hole] = set()
    for (q, server), rows in per_server.items():
        rows.sort(key=lambda x: x[0])
        prev: Row | None = None
        sent_upto: int | None = None
        for i, ((ts, is_kill, _), r) in enumerate(rows):
            if prev is not None and (is_kill or (r is not None and r["kind"] == "recovered")):
                if is_kill:
                    dark_to = next((x[0][0] for x in rows[i + 1:]
                                    if x[1] is not None and x[1]["kind"] == "recovered"), BIG)
                else:
                    dark_to = ts
                cut = (prev["raft_index"] if prev["kind"] in ("applied", "service_queue")
                       else None)
                holes.add(Hole(q, server, prev["ts_ns"], dark_to, sent_upto, cut))
            if r is not None:
                prev = r
                if r["kind"] == "local_delivery" and r["raft_index"] is not None:
                    sent_upto = max(sent_upto if sent_upto is not None else r["raft_index"],
                                    r["raft_index"])
    return holes


def local_delivery(h: RefHistory, p: Params) -> RefResult:
    check = "local_delivery"
    rep = h.rows("replica_events")
    if not rep:
        return _result(check, 0, [], {}, model.simple_status(0, False, "no replica_events"))
    decisions = {(r["queue"], r["msg_id"], r["attempt"], r["raft_index"], r["consumer_key"],
                  r["consumer_node"]) for r in rep if r["kind"] == "service_queue"}
    recoveries: dict[tuple[str, str], list[int]] = defaultdict(list)
    for r in rep:
        if r["kind"] == "recovered":
            recoveries[(r["queue"], r["server"])].append(r["ts_ns"])
    sends: dict[tuple[Any, ...], list[Row]] = defaultdict(list)
    for r in rep:
        if r["kind"] == "local_delivery":
            inc = sum(t <= r["ts_ns"] for t in recoveries[(r["queue"], r["server"])])
            sends[(r["queue"], r["msg_id"], r["attempt"], r["raft_index"])].append(
                dict(r, incarnation=inc))
    resent = 0
    first_sends: dict[tuple[Any, ...], int] = {}
    for k, got in sends.items():
        lives: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
        for s in got:
            lives[s["server"]][s["incarnation"]] += 1
        first_sends[k] = sum(max(per_life.values()) for per_life in lives.values())
        resent += len(got) - first_sends[k]
    first_applied: dict[tuple[str, int], int] = {}
    term_of: dict[tuple[str, int], int] = {}
    for r in rep:
        if r["kind"] == "applied":
            k = (r["queue"], r["raft_index"])
            first_applied[k] = min(first_applied.get(k, BIG), r["ts_ns"])
            term_of[k] = min(term_of.get(k, BIG), r["raft_term"])
    leader: dict[tuple[str, int], str] = {}
    for r in rep:
        if r["kind"] == "leader_elected":
            k = (r["queue"], r["raft_term"])
            leader[k] = min(leader.get(k, r["leader"]), r["leader"])
    member_at = _membership(rep)
    holes: dict[tuple[str, str], list[Hole]] = defaultdict(list)
    for hole in dark_intervals(h):
        holes[(hole.queue, hole.server)].append(hole)
    closes: dict[tuple[str, str | None], int] = {}
    for r in h.rows("client_ops", "channel_close", "conn_close"):
        k = (r["conn_id"], str(r["channel_id"]) if r["kind"] == "channel_close" else None)
        closes[k] = min(closes.get(k, BIG), r["ts_ns"])
    violations: list[Violation] = []
    excused: set[tuple[Any, ...]] = set()
    unrecorded = 0
    for q, m, att, idx, ck, cnode in decisions:
        got = sends.get((q, m, att, idx), [])
        expected = member_at(q, cnode, idx)
        if expected is None:
            expected = leader.get((q, term_of.get((q, idx), -1)))
        applied_at = first_applied.get((q, idx))
        if not got:
            # the expected sender's record has a hole after the decision was applied and
            # shows no later send before it: the send may have been lost with the hole
            hidden = applied_at is not None and any(
                applied_at <= hole.dark_to
                and (hole.sent_upto if hole.sent_upto is not None else -1) <= idx
                for hole in holes.get((q, expected or ""), ()))
            if hidden:
                excused.add((q, m, att, ck))
            conn, _, rest = (ck or "").partition("/")
            chan = rest.partition("/")[0]
            closed = min(closes.get((conn, chan), BIG), closes.get((conn, None), BIG))
            if applied_at is None or closed > applied_at:
                if hidden:
                    unrecorded += 1
                else:
                    violations.append(_v(check, "missing_send", q, m, key=ck, raft_index=idx,
                                         detail=str(att)))
            continue
        if first_sends[(q, m, att, idx)] > 1:
            violations.append(_v(check, "double_send", q, m, key=ck, raft_index=idx,
                                 detail=str(first_sends[(q, m, att, idx)])))
        for s in got:
            if expected is not None and s["server"] != expected:
                violations.append(_v(check, "wrong_sender", q, m, key=s["server"],
                                     raft_index=idx, ts_ns=s["ts_ns"], detail=expected))
    keyed = {(r["queue"], r["msg_id"], r["attempt"], r["consumer_key"])
             for r in rep if r["kind"] == "local_delivery"}
    excused_deliveries = 0
    for r in h.rows("client_ops", "deliver"):
        ck = _ckey(r)
        k = (r["queue"], r["msg_id"], r["delivery_count"] or 0, ck)
        if k in keyed:
            continue
        if k in excused:
            excused_deliveries += 1
            continue
        violations.append(_v(check, "orphan_delivery", r["queue"], r["msg_id"], key=ck,
                             ts_ns=r["ts_ns"], detail=str(r["delivery_count"] or 0)))
    counts = {"decisions": len(decisions), "unrecorded_decisions": unrecorded,
              "unrecorded_deliveries": excused_deliveries, "resent_after_restart": resent}
    status = model.simple_status(len(violations), True)
    return _result(check, len(decisions), violations, counts,
                   (status[0], model.unrecorded_note(counts)))


# -- 4.6 dead lettering --------------------------------------------------------------

def dlx_at_least_once(h: RefHistory, p: Params) -> RefResult:
    check = "dlx_at_least_once"
    sources = {q: h.meta.queues[q].get("dlx_target") for q in h.meta.dlx_sources()}
    rep = h.rows("replica_events")
    if not sources or not rep:
        return _result(check, 0, [], {}, model.dlx_status({}, False, h.drained))
    discards: dict[tuple[str, int], int] = {}
    for r in rep:
        if r["kind"] == "dlx_discard" and r["queue"] in sources:
            k = (r["queue"], r["msg_id"])
            discards[k] = min(discards.get(k, BIG), r["ts_ns"])
    enq: dict[tuple[str, int], set[int]] = defaultdict(set)
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
        violations.append(_v(check, kind, q, m, key=target, ts_ns=ts))
    return _result(check, len(discards), violations, counts,
                   model.dlx_status(counts, True, h.drained))


# -- 4.5 flow and 4.7 supervision ----------------------------------------------------

def blocked_intervals(h: RefHistory) -> list[tuple[str, int, int, bool]]:
    """(entity, start, end, open at end) for every credit_blocked interval."""
    rows = h.rows("flow_events", "credit_blocked", "credit_unblocked")
    by: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        by[f"{r['entity_type']}/{r['entity_id']}"].append(r)
    end = h.run_end_ns
    out = []
    for entity, rs in by.items():
        rs.sort(key=okey)
        prev = None
        for i, r in enumerate(rs):
            if r["kind"] == "credit_blocked" and prev != "credit_blocked":
                stop = next((x["ts_ns"] for x in rs[i + 1:] if x["kind"] == "credit_unblocked"),
                            None)
                out.append((entity, r["ts_ns"], end if stop is None else stop, stop is None))
            prev = r["kind"]
    return out


def flow_not_stuck(h: RefHistory, p: Params) -> RefResult:
    check = "flow_not_stuck"
    if not h.rows("flow_events"):
        return _result(check, 0, [], {}, model.simple_status(0, False, "no flow_events"))
    windows = model.fault_windows(h.rows("nemesis_events"), h.run_end_ns)
    last = model.last_fault_stop(windows)
    intervals = blocked_intervals(h)
    violations = []
    for entity, start, stop, _open in intervals:
        after = stop - (start if last is None else max(start, last))
        if after > p.flow_grace_ns:
            violations.append(_v(check, "flow_stuck", key=entity, ts_ns=start, detail=str(after)))
    return _result(check, len(intervals), violations, {"blocked_intervals": len(intervals)},
                   model.simple_status(len(violations), True))


def _sup_fields(r: Row) -> Row:
    extra = json.loads(r["extra"]) if r["extra"] else {}
    sup_pid = extra.get("sup_pid")
    label = re.search(r"<([0-9]+[.][0-9]+)>$", r["supervisor"] or "")
    if sup_pid is None and label:
        sup_pid = f"<{r['node']}.{label.group(1)}>"
    return dict(r, is_self=r["actor_class"] is None, pid=extra.get("pid"), sup_pid=sup_pid,
                restart_type=extra.get("restart_type", extra.get("restart")),
                context=extra.get("context"))


def supervision_liveness(h: RefHistory, p: Params) -> RefResult:
    check = "supervision_liveness"
    life = [_sup_fields(r) for r in h.rows("supervision_events", "started", "restarted",
                                           "crashed", "stopped", "intensity_exceeded")]
    if not life:
        return _result(check, 0, [], {}, model.simple_status(0, False, "no supervision_events"))
    children = [r for r in life if not r["is_self"]]
    ended = {r["sup_pid"] for r in life if r["is_self"]} | {
        r["pid"] for r in children if r["kind"] in ("crashed", "stopped")}
    last: dict[str, Row] = {}
    types: dict[str, str] = {}
    for r in sorted(children, key=okey):
        last[r["actor_path"]] = r
        if r["restart_type"] is not None:
            types[r["actor_path"]] = max(types.get(r["actor_path"], ""), r["restart_type"])
    violations: list[Violation] = []
    counts = {"children": len(last), "permanent": 0, "excused": 0, "excused_give_ups": 0}
    for a, r in last.items():
        permanent = types.get(a) == "permanent"
        counts["permanent"] += permanent
        if not (r["kind"] == "crashed" or (r["kind"] == "stopped" and r["context"] == "exit")):
            continue
        if permanent and (r["sup_pid"] is None or r["sup_pid"] not in ended):
            violations.append(_v(check, "not_running", key=a, ts_ns=r["ts_ns"],
                                 detail=r["reason"]))
        else:
            counts["excused"] += 1
    child_pids = {r["pid"] for r in children if r["pid"] is not None}
    for r in life:
        if r["is_self"] and r["kind"] == "intensity_exceeded":
            if r["sup_pid"] is not None and r["sup_pid"] in child_pids:
                counts["excused_give_ups"] += 1
            else:
                violations.append(_v(check, "not_running", key=r["actor_path"],
                                     ts_ns=r["ts_ns"], detail=r["reason"]))
    counts["actors"] = len({r["actor_path"] for r in life})
    status = model.simple_status(len(violations), True)
    return _result(check, counts["actors"], violations, counts,
                   (status[0], model.supervision_note(counts)))


def _membership(rep: list[Row]) -> Any:
    """``member_at(queue, node, index)``: the queue's server on `node` at log index
    `index`, as `analysis.checks.common.membership` finds it: the members of the
    latest cluster change (or installed snapshot) at or below the index, before any the
    members its first recorded leader was elected with, and for a queue whose record
    names no members the servers seen for it."""
    points: dict[str, dict[int, list[str]]] = defaultdict(dict)
    first: dict[str, tuple[tuple[int, int], list[str]]] = {}
    for r in rep:
        members = r.get("members")
        if members is None:
            continue
        q = r["queue"]
        if r["kind"] == "leader_elected":
            key = (r["ts_ns"], r["seq"])
            if q not in first or key < first[q][0]:
                first[q] = (key, list(members))
        elif (r["kind"] == "snapshot_installed"
              or (r["kind"] == "applied" and r["cmd_type"] == "cluster_change")):
            at = points[q]
            idx = r["raft_index"]
            at[idx] = min(at.get(idx, list(members)), list(members))
    for q, (_, members) in first.items():
        if not any(idx <= 0 for idx in points[q]):
            points[q][0] = members
    seen: dict[tuple[str, str], str] = {}
    for r in rep:
        if r["server"] is not None:
            k = (r["queue"], server_node(r["server"]))
            seen[k] = min(seen.get(k, r["server"]), r["server"])

    def member_at(queue: str, node: str, index: int | None) -> str | None:
        at = points.get(queue)
        if not at:
            return seen.get((queue, node))
        if index is None:
            return None
        starts = [i for i in at if i <= index]
        if not starts:
            return None
        on_node = [m for m in at[max(starts)] if server_node(m) == node]
        return min(on_node) if on_node else None

    return member_at


# -- 4.8 latency histograms ---------------------------------------------------------

def latency_histograms(h: RefHistory, p: Params) -> dict[tuple[str, str], dict[int, int]]:
    """(series, fault label) -> {log bucket: count}, as `analysis.metrics` computes it."""
    windows = model.fault_windows(h.rows("nemesis_events"), h.run_end_ns)

    def label(ts: int) -> str:
        return next((w.fault for w in windows if w.start_ns <= ts <= w.stop_ns), "outside")

    ops = h.rows("client_ops")
    pub: dict[int, int] = {}
    conf: dict[int, int] = {}
    for r in ops:
        if r["kind"] == "publish":
            pub[r["msg_id"]] = min(pub.get(r["msg_id"], BIG), r["ts_ns"])
        elif r["kind"] == "confirm":
            conf[r["msg_id"]] = min(conf.get(r["msg_id"], BIG), r["ts_ns"])
    first_del: dict[int, int] = {}
    first_ok: dict[int, int] = {}
    samples: list[tuple[str, int, int]] = []
    for d in deliveries(h, p):
        m = d.row["msg_id"]
        first_del[m] = min(first_del.get(m, BIG), d.row["ts_ns"])
        if d.ok_ts is not None:
            first_ok[m] = min(first_ok.get(m, BIG), d.ok_ts)
            samples.append(("deliver_ack", d.row["ts_ns"], d.ok_ts - d.row["ts_ns"]))
    for m, t in pub.items():
        for series, end in (("publish_confirm", conf), ("publish_deliver", first_del),
                            ("end_to_end", first_ok)):
            if m in end:
                samples.append((series, t, end[m] - t))
    out: dict[tuple[str, str], dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for series, start, lat in samples:
        if lat >= 0:
            out[(series, label(start))][model.log_bucket(lat)] += 1
    return {k: dict(v) for k, v in out.items()}


def throughput(h: RefHistory, p: Params) -> tuple[dict[tuple[str, str | None], dict[int, int]],
                                                  dict[tuple[str, str], dict[int, int]]]:
    """Counts per bucket by (op, queue) from `client_ops` and by (channel event kind,
    node) from `channel_events`, as `analysis.metrics` computes them (buckets counted
    from the first client operation)."""
    ops = h.rows("client_ops")
    t0 = min((r["ts_ns"] for r in ops), default=0)
    by_queue: dict[tuple[str, str | None], dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for r in ops:
        if r["kind"] in model.OPS:
            by_queue[(r["kind"], r["queue"])][(r["ts_ns"] - t0) // p.bucket_ns] += 1
    by_node: dict[tuple[str, str], dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for r in h.rows("channel_events"):
        if r["kind"] in model.BROKER_OPS:
            by_node[(r["kind"], r["node"])][(r["ts_ns"] - t0) // p.bucket_ns] += 1
    return ({k: dict(v) for k, v in by_queue.items()}, {k: dict(v) for k, v in by_node.items()})


def replication_histograms(h: RefHistory) -> dict[str, dict[int, int]]:
    """Commit latency and local-delivery lag histograms, as `analysis.metrics` computes
    them (`replication_samples`)."""
    lead: dict[tuple[str, int], int] = {}
    enq: dict[tuple[str, int], int] = {}
    for r in h.rows("replica_events", "applied"):
        if r["role"] != "leader":
            continue
        key = (r["queue"], r["raft_index"])
        lead[key] = min(lead.get(key, BIG), r["ts_ns"])
        if r["cmd_type"] == "enqueue" and r["msg_id"] is not None:
            enq[key] = min(enq.get(key, BIG), r["msg_id"])
    samples: list[tuple[str, int]] = []
    for r in h.rows("replica_events", "local_delivery"):
        key = (r["queue"], r["raft_index"])
        if r["raft_index"] is not None and key in lead:
            samples.append((f"local_delivery_lag:{r['role'] or 'unknown'}",
                            r["ts_ns"] - lead[key]))
    applied: dict[tuple[str, int], int] = {}
    for (queue, idx), m in enq.items():
        applied[(queue, m)] = min(applied.get((queue, m), BIG), lead[(queue, idx)])
    sent: dict[tuple[str, int], int] = {}
    for r in h.rows("channel_events", "enqueue_sent"):
        key = (r["queue"], r["msg_id"])
        sent[key] = min(sent.get(key, BIG), r["ts_ns"])
    samples += [("commit", applied[k] - t) for k, t in sent.items() if k in applied]
    out: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for series, lat in samples:
        if lat >= 0:
            out[series][model.log_bucket(lat)] += 1
    return {k: dict(v) for k, v in out.items()}


def wal_batches(h: RefHistory) -> dict[str, dict[tuple[int, int], int]]:
    """node -> (entries, log bucket of write+sync ns) -> batches, as `analysis.metrics`
    counts the WAL's `ra_wal_batch` rows."""
    out: dict[str, dict[tuple[int, int], int]] = defaultdict(lambda: defaultdict(int))
    for r in h.rows("other_events", "ra_wal_batch"):
        extra = json.loads(r["extra"] or "{}")
        entries, sync_ms = extra.get("entries"), extra.get("fsync_ms")
        if entries is None or sync_ms is None:
            continue
        out[r["node"]][(int(entries), model.log_bucket(int(float(sync_ms) * 1e6)))] += 1
    return {k: dict(v) for k, v in out.items()}


ALL = {
    "total_queue": total_queue,
    "ordering_channel_fifo": ordering_channel_fifo,
    "ordering_consumer_monotonic": ordering_consumer_monotonic,
    "ordering_sac_fifo": ordering_sac_fifo,
    "ordering_returns": ordering_returns,
    "replica_determinism": replica_determinism,
    "local_delivery": local_delivery,
    "dlx_at_least_once": dlx_at_least_once,
    "flow_not_stuck": flow_not_stuck,
    "supervision_liveness": supervision_liveness,
}
# the final-state checks live with their pure-Python rules (analysis.final_state)
ALL.update(post_drain_emptiness=final_state.post_drain_emptiness,
           dlx_worker_liveness=final_state.dlx_worker_liveness)


def run_all(h: RefHistory, p: Params | None = None) -> dict[str, RefResult]:
    p = p or Params()
    return {name: fn(h, p) for name, fn in ALL.items()}
