"""The `local_delivery` check in plain Python (the Spark one is
`analysis.checks.local_delivery`): every delivery a queue decides is sent once, by the
member on the consumer's node, and every client delivery matches such a send.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from analysis import model
from analysis.model import Params, Violation
from analysis.reference.common import (
    Hole,
    consumer_key,
    dark_intervals,
    membership,
)
from analysis.reference.history import BIG, RefHistory, RefResult, Row, check_result, vrow


def local_delivery(h: RefHistory, p: Params) -> RefResult:
    check = "local_delivery"
    rep = h.rows("replica_events")
    if not rep:
        return check_result(check, 0, [], {}, model.simple_status(0, False, "no replica_events"))
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
    member_at = membership(rep)
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
                    violations.append(vrow(check, "missing_send", q, m, key=ck, raft_index=idx,
                                           detail=str(att)))
            continue
        if first_sends[(q, m, att, idx)] > 1:
            violations.append(vrow(check, "double_send", q, m, key=ck, raft_index=idx,
                                   detail=str(first_sends[(q, m, att, idx)])))
        for s in got:
            if expected is not None and s["server"] != expected:
                violations.append(vrow(check, "wrong_sender", q, m, key=s["server"],
                                       raft_index=idx, ts_ns=s["ts_ns"], detail=expected))
    keyed = {(r["queue"], r["msg_id"], r["attempt"], r["consumer_key"])
             for r in rep if r["kind"] == "local_delivery"}
    excused_deliveries = 0
    for r in h.rows("client_ops", "deliver"):
        ck = consumer_key(r)
        k = (r["queue"], r["msg_id"], r["delivery_count"] or 0, ck)
        if k in keyed:
            continue
        if k in excused:
            excused_deliveries += 1
            continue
        violations.append(vrow(check, "orphan_delivery", r["queue"], r["msg_id"], key=ck,
                               ts_ns=r["ts_ns"], detail=str(r["delivery_count"] or 0)))
    counts = {"decisions": len(decisions), "unrecorded_decisions": unrecorded,
              "unrecorded_deliveries": excused_deliveries, "resent_after_restart": resent}
    status = model.simple_status(len(violations), True)
    return check_result(check, len(decisions), violations, counts,
                   (status[0], model.unrecorded_note(counts)))
