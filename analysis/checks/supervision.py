"""Supervision liveness (spec 4.7): at the end of the run no supervised actor is left
crashed without a restart, and no supervisor gave up (intensity exceeded)."""

from __future__ import annotations

from pyspark.sql import Window
from pyspark.sql import functions as F

from analysis import model
from analysis.checks.common import ORDER, CheckResult, no_violations, vrows
from analysis.load import History
from analysis.model import Params

CHECK = "supervision_liveness"
LIFECYCLE = ("started", "restarted", "crashed", "stopped", "intensity_exceeded")


def run(h: History, p: Params) -> CheckResult:
    life = h["supervision_events"].where(F.col("kind").isin(*LIFECYCLE))
    if not h.has("supervision_events") or life.isEmpty():
        status, note = model.simple_status(0, False, "no supervision_events")
        return CheckResult(CHECK, status, 0, no_violations(h), {}, note)
    w = Window.partitionBy("actor_path").orderBy(*[F.col(c).desc() for c in ORDER])
    last = life.select("*", F.row_number().over(w).alias("rn")).where(F.col("rn") == 1)
    violations = vrows(last.where(F.col("kind").isin("crashed", "intensity_exceeded")),
                       CHECK, "not_running", key=F.col("actor_path"), ts_ns=F.col("ts_ns"),
                       detail=F.col("reason"))
    examined = last.count()
    return CheckResult(CHECK, None, examined, violations, {"actors": examined})
