"""Supervision liveness: at the end of the run every permanent child whose
supervisor is still expected to run is running, and no top supervisor gave up.

A child that ended is only reported when its restart type is `permanent` (a transient
or temporary child may end for good) and its supervisor instance did not end itself:
a supervisor that gave up (intensity exceeded, auto shutdown) or that its own parent
stopped takes its children with it, and is judged as a child of its parent instead.
So a channel crash that takes down its `rabbit_channel_sup` (intensity 0, a transient
child) is by design, while a permanent supervisor its parent never restarted is not.
A supervisor's own events are linked to its record as a child by pid: `sup_pid` on
its events, `pid` on its parent's; runs recorded before `sup_pid` existed fall back to
the pid in the supervisor's label (`module<serial.creation>`) and to `restart` on
`started` rows.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from analysis import model
from analysis.checks.common import (
    ORDER,
    CheckResult,
    count_parts,
    no_violations,
    take_violations,
    total,
    vrows,
)
from analysis.load import History
from analysis.model import Params

CHECK = "supervision_liveness"
LIFECYCLE = ("started", "restarted", "crashed", "stopped", "intensity_exceeded")


def _json(field: str) -> Column:
    return F.get_json_object(F.col("extra"), f"$.{field}")


def _sup_pid() -> Column:
    label_pid = F.regexp_extract(F.col("supervisor"), r"<([0-9]+[.][0-9]+)>$", 1)
    from_label = F.when(label_pid != "", F.concat(F.lit("<"), F.col("node"), F.lit("."),
                                                  label_pid, F.lit(">")))
    return F.coalesce(_json("sup_pid"), from_label)


def lifecycle(h: History) -> DataFrame:
    return h["supervision_events"].where(F.col("kind").isin(*LIFECYCLE)).select(
        "actor_path", "kind", "reason", *ORDER,
        F.col("actor_class").isNull().alias("is_self"),
        F.coalesce(_json("restart_type"), _json("restart")).alias("restart_type"),
        _json("pid").alias("pid"), _sup_pid().alias("sup_pid"),
        _json("context").alias("context"))


def run(h: History, p: Params) -> CheckResult:
    if not h.has("supervision_events"):
        status, note = model.simple_status(0, False, "no supervision_events")
        return CheckResult(CHECK, status, 0, no_violations(h), {}, note)
    life = h.cached("supervision/lifecycle", lambda: lifecycle(h))
    children = life.where(~F.col("is_self"))
    ended = (life.where(F.col("is_self")).select(F.col("sup_pid").alias("ended_pid"))
             .unionByName(children.where(F.col("kind").isin("crashed", "stopped"))
                          .select(F.col("pid").alias("ended_pid")))
             .where(F.col("ended_pid").isNotNull()).distinct()
             .withColumn("sup_ended", F.lit(True)))
    w = Window.partitionBy("actor_path").orderBy(*[F.col(c).desc() for c in ORDER])
    types = children.groupBy("actor_path").agg(F.max("restart_type").alias("rtype"))
    last = (children.select("*", F.row_number().over(w).alias("rn")).where(F.col("rn") == 1)
            .drop("restart_type").join(types, "actor_path")
            .join(ended, F.col("sup_pid") == F.col("ended_pid"), "left"))
    gone = (F.col("kind") == "crashed") | ((F.col("kind") == "stopped")
                                           & (F.col("context") == "exit"))
    down = (gone & (F.col("rtype") == "permanent")
            & ~F.coalesce(F.col("sup_ended"), F.lit(False)))
    parents = (children.where(F.col("pid").isNotNull()).select(F.col("pid").alias("child_pid"))
               .distinct().withColumn("has_parent", F.lit(True)))
    gave_up = (life.where(F.col("is_self") & (F.col("kind") == "intensity_exceeded"))
               .join(parents, F.col("sup_pid") == F.col("child_pid"), "left"))
    root = ~F.coalesce(F.col("has_parent"), F.lit(False))
    violations = (
        vrows(last.where(down), CHECK, "not_running", key=F.col("actor_path"),
              ts_ns=F.col("ts_ns"), detail=F.col("reason"))
        .unionByName(vrows(gave_up.where(root), CHECK, "not_running",
                           key=F.col("actor_path"), ts_ns=F.col("ts_ns"),
                           detail=F.col("reason"))))
    counts = count_parts(
        (life, {"actors": F.count_distinct("actor_path")  # a null path counts as one
                + F.max(F.col("actor_path").isNull().cast("int"))}),
        (last, {"children": F.count("*"), "permanent": total(F.col("rtype") == "permanent"),
                "excused": total(gone & ~down), "_down": total(down)}),
        (gave_up, {"excused_give_ups": total(~root), "_root": total(root)}))
    n = take_violations(counts)
    if counts["actors"] == 0:
        status, note = model.simple_status(0, False, "no supervision_events")
        return CheckResult(CHECK, status, 0, no_violations(h), {}, note)
    return CheckResult(CHECK, None, counts["actors"], violations, counts,
                       model.supervision_note(counts), violation_count=n)
