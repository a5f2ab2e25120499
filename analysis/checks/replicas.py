"""Replica determinism (spec 4.3): every Ra server of a queue applies the same log,
reaches the same states, makes the same service-queue decisions, applies in index
order, and at most one leader is elected per term.

A server killed while recording an apply may have lost that index's decisions (spec
4.0): such (server, index) pairs are left out of decision agreement and counted.

Log, state and decision agreement are decided by `common.block_summary` (fixed-width
aggregates per block of log indexes, shared with local delivery) and read exactly from
`common.per_index` for the blocks it flags; apply order needs each server's rows in
time order, a window.
"""

from __future__ import annotations

from pyspark.sql import Window
from pyspark.sql import functions as F

from analysis import model
from analysis.checks.common import (
    ORDER,
    CheckResult,
    block_summary,
    count_parts,
    dark_intervals,
    no_violations,
    per_index,
    rare_replica_rows,
    take_violations,
    total,
    vrows,
)
from analysis.load import History
from analysis.model import Params

CHECK = "replica_determinism"


def run(h: History, p: Params) -> CheckResult:
    if not h.has("replica_events"):
        status, note = model.simple_status(0, False, "no replica_events")
        return CheckResult(CHECK, status, 0, no_violations(h), {}, note)
    rep = h["replica_events"]
    idx = ["queue", "raft_index"]
    cut = (dark_intervals(h).where(F.col("cut_index").isNotNull())
           .select("queue", F.col("cut_index").alias("raft_index"), "server").distinct())
    cut_at = cut.groupBy(*idx).agg(F.collect_list("server").alias("cut"))
    # decision agreement: the set of decisions of every server that applied the index
    # (a server cut off while recording that apply is left out)
    decisions = F.col("decisions")
    sets = F.transform(
        F.filter("servers", lambda x: ~F.coalesce(F.array_contains(F.col("cut"), x["s"]),
                                                  F.lit(False))),
        lambda x: F.array_sort(F.array_distinct(F.transform(
            F.filter(decisions, lambda d: d["server"].eqNullSafe(x["s"])),
            lambda d: F.struct(d["msg_id"], d["consumer_key"], d["attempt"])))))
    per = (per_index(h).join(F.broadcast(cut_at), idx, "left")
           .select(*idx, F.size("logs").alias("n_log"), F.size("states").alias("n_state"),
                   F.size(F.array_distinct(sets)).alias("n_dec")))
    log_v = vrows(per.where(F.col("n_log") > 1), CHECK, "log_disagreement",
                  queue=F.col("queue"), raft_index=F.col("raft_index"), detail=F.col("n_log"))
    state_v = vrows(per.where(F.col("n_state") > 1), CHECK, "state_disagreement",
                    queue=F.col("queue"), raft_index=F.col("raft_index"),
                    detail=F.col("n_state"))
    dec_v = vrows(per.where(F.col("n_dec") > 1), CHECK, "decision_disagreement",
                  queue=F.col("queue"), raft_index=F.col("raft_index"), detail=F.col("n_dec"))
    w = Window.partitionBy("queue", "server").orderBy(*ORDER)
    seqs = (rep.where(F.col("kind").isin("applied", "snapshot_installed", "recovered"))
            .select("*", F.lag("raft_index").over(w).alias("prev")))
    bad = seqs.where((F.col("kind") == "applied") & F.col("prev").isNotNull()
                     & (F.col("raft_index") != F.col("prev") + 1))
    kind = (F.when(F.col("raft_index") > F.col("prev") + 1, "apply_gap")
            .when(F.col("raft_index") == F.col("prev"), "apply_repeat").otherwise("apply_back"))
    order_v = vrows(bad, CHECK, kind, queue=F.col("queue"), key=F.col("server"),
                    raft_index=F.col("raft_index"), ts_ns=F.col("ts_ns"),
                    detail=F.concat(F.lit("after "), F.col("prev").cast("string")))
    leaders = (rare_replica_rows(h).where(F.col("kind") == "leader_elected")
               .groupBy("queue", "raft_term")
               .agg(F.count_distinct("leader").alias("n")))
    elect_v = vrows(leaders.where(F.col("n") > 1), CHECK, "election_safety",
                    queue=F.col("queue"),
                    key=F.concat(F.lit("term="), F.col("raft_term").cast("string")),
                    detail=F.col("n"))
    violations = (log_v.unionByName(state_v).unionByName(dec_v).unionByName(order_v)
                  .unionByName(elect_v))
    counts = count_parts(
        (block_summary(h), {"applied": F.sum("applied")}),
        (cut, {"unrecorded_indexes": F.count(F.lit(1))}),
        (per, {"_log": total(F.col("n_log") > 1), "_state": total(F.col("n_state") > 1),
               "_dec": total(F.col("n_dec") > 1)}),
        (bad, {"_order": F.count(F.lit(1))}),
        (leaders, {"_elect": total(F.col("n") > 1)}))
    n = take_violations(counts)
    return CheckResult(CHECK, None, counts["applied"], violations, counts,
                       model.unrecorded_note(counts), violation_count=n)
