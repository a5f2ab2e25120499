"""Derivations more than one reference check needs, mirroring `analysis.checks.common`:
channel epochs, the fate of every delivery (settled ok, returned, dropped, still open),
first publishes, enqueue positions and settles per message, consumer keys, the holes in
a server's recorded history and the queue membership at a log index.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from analysis.model import Params
from analysis.reference.history import BIG, RefHistory, Row, okey


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
    """Every delivery with how it ended: settled ok, returned, dropped or still open."""
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
                          for c in closes) \
                    or any(c["ts_ns"] <= s["ts_ns"] + p.ack_grace_ns for c in cancel)
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



def first_publishes(h: RefHistory) -> dict[int, Row]:
    """msg_id -> its first `publish` row."""
    pubs: dict[int, Row] = {}
    for r in sorted(h.rows("client_ops", "publish"), key=okey):
        pubs.setdefault(r["msg_id"], r)
    return pubs



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



def first_attempt(d: Row) -> bool:
    return not d["redelivered"] and not d["delivery_count"]


def enqueue_pos(h: RefHistory) -> dict[tuple[str, int], int]:
    pos: dict[tuple[str, int], int] = {}
    for r in h.rows("replica_events", "applied"):
        if r["cmd_type"] == "enqueue" and r["msg_id"] is not None:
            k = (r["queue"], r["msg_id"])
            pos[k] = min(pos.get(k, BIG), r["raft_index"])
    return pos


def consumer(r: Row) -> tuple[Any, ...]:
    return (r["conn_id"], r["channel_id"], r["epoch"], r["consumer_tag"] or "")


def consumer_key(r: Row) -> str:
    return f"{r['conn_id']}/{r['channel_id']}/{r['consumer_tag'] or ''}"




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
    for ev in rep:
        node_servers[ev["node"]].add((ev["queue"], ev["server"]))
        per_server[(ev["queue"], ev["server"])].append(((ev["ts_ns"], False, ev["seq"]), ev))
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



def membership(rep: list[Row]) -> Any:
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
