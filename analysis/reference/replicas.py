"""The `replica_determinism` check in plain Python (the Spark one is
`analysis.checks.replicas`): members agree on the log, the state and the decisions at
every index, apply indexes in sequence, and elect one leader per term.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise
from typing import Any

from analysis import model
from analysis.model import Params
from analysis.reference.common import (
    dark_intervals,
)
from analysis.reference.history import RefHistory, RefResult, Row, check_result, okey, vrow


def replica_determinism(h: RefHistory, p: Params) -> RefResult:
    check = "replica_determinism"
    rep = h.rows("replica_events")
    if not rep:
        return check_result(check, 0, [], {}, model.simple_status(0, False, "no replica_events"))
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
    violations = [vrow(check, "log_disagreement", q, raft_index=i, detail=str(len(s)))
                  for (q, i), s in log.items() if len(s) > 1]
    violations += [vrow(check, "state_disagreement", q, raft_index=i, detail=str(len(s)))
                   for (q, i), s in state.items() if len(s) > 1]
    for (q, i), per_server in decisions.items():
        n = len({frozenset(s) for s in per_server.values()})
        if n > 1:
            violations.append(vrow(check, "decision_disagreement", q, raft_index=i, detail=str(n)))
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
            violations.append(vrow(check, kind, q, key=server, raft_index=b["raft_index"],
                                   ts_ns=b["ts_ns"], detail=f"after {a['raft_index']}"))
    leaders: dict[tuple[str, int], set[str]] = defaultdict(set)
    for r in rep:
        if r["kind"] == "leader_elected" and r["leader"] is not None:
            leaders[(r["queue"], r["raft_term"])].add(r["leader"])
    violations += [vrow(check, "election_safety", q, key=f"term={t}", detail=str(len(s)))
                   for (q, t), s in leaders.items() if len(s) > 1]
    counts = {"applied": len(applied), "unrecorded_indexes": len(cut)}
    return check_result(check, len(applied), violations, counts,
                   (model.simple_status(len(violations), True)[0],
                    model.unrecorded_note(counts)))
