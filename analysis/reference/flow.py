"""The `flow_not_stuck` check in plain Python (the Spark one is `analysis.checks.flow`):
no entity stays credit-blocked long after the last fault stopped.
"""

from __future__ import annotations

from collections import defaultdict

from analysis import model
from analysis.model import Params
from analysis.reference.history import RefHistory, RefResult, Row, check_result, okey, vrow


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
        return check_result(check, 0, [], {}, model.simple_status(0, False, "no flow_events"))
    windows = model.fault_windows(h.rows("nemesis_events"), h.run_end_ns)
    last = model.last_fault_stop(windows)
    intervals = blocked_intervals(h)
    violations = []
    for entity, start, stop, _open in intervals:
        after = stop - (start if last is None else max(start, last))
        if after > p.flow_grace_ns:
            violations.append(vrow(check, "flow_stuck", key=entity, ts_ns=start, detail=str(after)))
    return check_result(check, len(intervals), violations, {"blocked_intervals": len(intervals)},
                   model.simple_status(len(violations), True))
