"""Credit flow must not stay stuck: no entity remains blocked for longer
than `flow_grace` after the last fault stopped. Blocked intervals still open at the
end of the run are closed there."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from analysis import model
from analysis.checks.common import (
    ORDER,
    CheckResult,
    count_rows,
    no_violations,
    take_violations,
    total,
    vrows,
)
from analysis.load import History
from analysis.model import Params

CHECK = "flow_not_stuck"


def blocked_intervals(h: History) -> DataFrame:
    """(entity, start_ns, stop_ns, open) for every credit_blocked interval."""
    rows = (h["flow_events"].where(F.col("kind").isin("credit_blocked", "credit_unblocked"))
            .withColumn("entity", F.concat_ws("/", "entity_type", "entity_id")))
    w = Window.partitionBy("entity").orderBy(*ORDER)
    after = w.rowsBetween(1, Window.unboundedFollowing)
    unblock_ts = F.when(F.col("kind") == "credit_unblocked", F.col("ts_ns"))
    marked = rows.select("entity", "kind", "ts_ns",
                         F.lag("kind").over(w).alias("prev_kind"),
                         F.min(unblock_ts).over(after).alias("stop"))
    starts = marked.where((F.col("kind") == "credit_blocked")
                          & (F.col("prev_kind").isNull()
                             | (F.col("prev_kind") != "credit_blocked")))
    return starts.select("entity", F.col("ts_ns").alias("start_ns"),
                         F.coalesce("stop", F.lit(h.run_end_ns)).alias("stop_ns"),
                         F.col("stop").isNull().alias("open"))


def run(h: History, p: Params) -> CheckResult:
    if not h.has("flow_events"):
        status, note = model.simple_status(0, False, "no flow_events")
        return CheckResult(CHECK, status, 0, no_violations(h), {}, note)
    last = model.last_fault_stop(h.windows)
    iv = blocked_intervals(h)
    begin = F.col("start_ns") if last is None else F.greatest("start_ns", F.lit(last))
    after = iv.withColumn("after", F.col("stop_ns") - begin)
    stuck = F.col("after") > p.flow_grace_ns
    violations = vrows(after.where(stuck), CHECK, "flow_stuck",
                       key=F.col("entity"), ts_ns=F.col("start_ns"), detail=F.col("after"))
    counts = count_rows(after, blocked_intervals=F.count("*"), _stuck=total(stuck))
    n = take_violations(counts)
    return CheckResult(CHECK, None, counts["blocked_intervals"], violations, counts,
                       violation_count=n)
