"""Replica determinism: every Ra server of a queue applies the same log,
reaches the same states, makes the same service-queue decisions, applies in index
order, and at most one leader is elected per term.

A server killed while recording an apply may have lost that index's decisions (docs/analysis.md,
"Missing node data"): such (server, index) pairs are left out of decision agreement and counted.

Log, state and decision agreement are decided by `common.block_summary` (fixed-width
aggregates per block of log indexes, shared with local delivery) and read exactly from
`common.per_index` for the blocks it flags; apply order needs each server's rows in
time order, a window.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from analysis import model
from analysis.checks.common import (
    ORDER,
    CheckResult,
    block_summary,
    count_parts,
    count_rows,
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
    steps = _apply_steps(rep, _pair_hash())
    bad = steps.where(_out_of_order())
    leaders = (rare_replica_rows(h).where(F.col("kind") == "leader_elected")
               .groupBy("queue", "raft_term")
               .agg(F.count_distinct("leader").alias("n")))
    elect_v = vrows(leaders.where(F.col("n") > 1), CHECK, "election_safety",
                    queue=F.col("queue"),
                    key=F.concat(F.lit("term="), F.col("raft_term").cast("string")),
                    detail=F.col("n"))
    counts = count_parts(
        (block_summary(h), {"applied": F.sum("applied")}),
        (cut, {"unrecorded_indexes": F.count(F.lit(1))}),
        (per, {"_log": total(F.col("n_log") > 1), "_state": total(F.col("n_state") > 1),
               "_dec": total(F.col("n_dec") > 1)}),
        (steps, {"_order": total(_out_of_order()), "_mixed": total(F.col("mixed"))}),
        (leaders, {"_elect": total(F.col("n") > 1)}))
    if counts.pop("_mixed"):
        # two (queue, server) pairs share a hash: the exact window, by the names
        steps = _apply_steps(rep, None)
        bad = steps.where(_out_of_order())
        counts["_order"] = count_rows(bad, n=F.count(F.lit(1)))["n"]
    kind = (F.when(F.col("raft_index") > F.col("prev") + 1, "apply_gap")
            .when(F.col("raft_index") == F.col("prev"), "apply_repeat").otherwise("apply_back"))
    order_v = vrows(bad, CHECK, kind, queue=F.col("queue"), key=F.col("server"),
                    raft_index=F.col("raft_index"), ts_ns=F.col("ts_ns"),
                    detail=F.concat(F.lit("after "), F.col("prev").cast("string")))
    violations = (log_v.unionByName(state_v).unionByName(dec_v).unionByName(order_v)
                  .unionByName(elect_v))
    n = take_violations(counts)
    return CheckResult(CHECK, None, counts["applied"], violations, counts,
                       model.unrecorded_note(counts), violation_count=n)


def _pair_hash() -> Column:
    """A 64-bit hash of a replica row's `(queue, server)`, telling a null from a value."""
    return F.xxhash64("queue", "server", F.col("queue").isNull(), F.col("server").isNull())


def _apply_steps(rep: DataFrame, pair_hash: Column | None) -> DataFrame:
    """Each server's `applied`, `snapshot_installed` and `recovered` rows in time order,
    with `prev`, the raft index of the row before (null for a server's first) and
    `mixed`: the row before is another `(queue, server)`'s.

    Why a hash: the window partitions by `pair_hash` alone when given, so the sort
    compares one long where it compared the queue's and the server's names in full
    (most comparisons fall between rows of the same server): at 10M events, warm,
    1.8 s against 2.4 s. Two pairs with the same hash share a partition, and `mixed`
    shows it; the caller then runs it again with `pair_hash` None, by the names."""
    keys = [pair_hash] if pair_hash is not None else [F.col("queue"), F.col("server")]
    w = Window.partitionBy(*keys).orderBy(*ORDER)
    before = F.lag(F.lit(True)).over(w)
    same = (F.lag("queue").over(w).eqNullSafe(F.col("queue"))
            & F.lag("server").over(w).eqNullSafe(F.col("server")))
    rows = rep.where(F.col("kind").isin("applied", "snapshot_installed", "recovered"))
    return rows.select("queue", "server", "raft_index", "ts_ns",
                       (F.col("kind") == "applied").alias("applied"),
                       F.lag("raft_index").over(w).alias("prev"),
                       (before.isNotNull() & ~same).alias("mixed"))


def _out_of_order() -> Column:
    """An applied row whose raft index is not the one after its server's row before."""
    return (F.col("applied") & F.col("prev").isNotNull()
            & (F.col("raft_index") != F.col("prev") + 1))
