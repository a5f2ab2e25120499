"""The `supervision_liveness` check in plain Python (the Spark one is
`analysis.checks.supervision`): a permanent child that crashed is running again unless
its supervisor itself ended.
"""

from __future__ import annotations

import json
import re

from analysis import model
from analysis.model import Params, Violation
from analysis.reference.history import RefHistory, RefResult, Row, check_result, okey, vrow


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
        return check_result(check, 0, [], {},
                            model.simple_status(0, False, "no supervision_events"))
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
            violations.append(vrow(check, "not_running", key=a, ts_ns=r["ts_ns"],
                                   detail=r["reason"]))
        else:
            counts["excused"] += 1
    child_pids = {r["pid"] for r in children if r["pid"] is not None}
    for r in life:
        if r["is_self"] and r["kind"] == "intensity_exceeded":
            if r["sup_pid"] is not None and r["sup_pid"] in child_pids:
                counts["excused_give_ups"] += 1
            else:
                violations.append(vrow(check, "not_running", key=r["actor_path"],
                                       ts_ns=r["ts_ns"], detail=r["reason"]))
    counts["actors"] = len({r["actor_path"] for r in life})
    status = model.simple_status(len(violations), True)
    return check_result(check, counts["actors"], violations, counts,
                   (status[0], model.supervision_note(counts)))
