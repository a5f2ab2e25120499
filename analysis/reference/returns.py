"""The `ordering_returns` check in plain Python (the Spark one is `analysis.checks.returns`):
messages returned together by a consumer's end come back in the order it got them.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise
from typing import Any

from analysis import model
from analysis.model import Params
from analysis.reference.common import (
    Delivery,
    consumer,
    consumer_key,
    deliveries,
    first_attempt,
)
from analysis.reference.history import RefHistory, RefResult, Row, check_result, okey, vrow


def ordering_returns(h: RefHistory, p: Params) -> RefResult:
    """Messages one consumer's end returned together, redelivered to one consumer as
    their very next hand-out, come back in the order the first consumer got them (see
    `analysis.checks.returns`)."""
    check = "ordering_returns"
    per_msg: dict[tuple[Any, ...], list[Delivery]] = defaultdict(list)
    for d in deliveries(h, p):
        r = d.row
        if (r["msg_id"] is not None and r["delivery_tag"] is not None
                and (d.by_end or not first_attempt(r))):
            per_msg[(r["queue"], r["msg_id"])].append(d)
    groups: dict[tuple[Any, ...], list[tuple[Row, Row]]] = defaultdict(list)
    counts = {"returned": 0, "traced": 0, "pairs": 0}
    for ds_ in per_msg.values():
        ds_.sort(key=lambda d: okey(d.row))
        for i, d in enumerate(ds_):
            if not d.by_end:
                continue
            counts["returned"] += 1
            nxt = next((e.row for e in ds_[i + 1:] if not first_attempt(e.row)), None)
            if nxt is None or (nxt["delivery_count"] or 0) != (d.row["delivery_count"] or 0) + 1:
                continue
            counts["traced"] += 1
            groups[(d.row["queue"], *consumer(d.row), d.release_ts, *consumer(nxt))].append(
                (d.row, nxt))
    violations = []
    for pairs in groups.values():
        pairs.sort(key=lambda x: (x[0]["delivery_tag"], okey(x[0])))
        for (a, a_next), (b, b_next) in pairwise(pairs):
            counts["pairs"] += 1
            if a_next["delivery_tag"] >= b_next["delivery_tag"]:
                violations.append(vrow(
                    check, "return_order", b["queue"], b["msg_id"], a["msg_id"],
                    consumer_key(b_next), None, b_next["ts_ns"],
                    f"returned by {consumer_key(b)}, redelivered as delivery tags "
                    f"{a_next['delivery_tag']}>{b_next['delivery_tag']}"))
    status, _ = model.simple_status(len(violations), True)
    return check_result(check, counts["returned"], violations, counts,
                   (status, model.returns_note(counts, len(violations))))
