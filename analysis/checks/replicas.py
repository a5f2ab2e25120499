"""Replica determinism (spec 4.3): every Ra server of a queue applies the same log,
reaches the same states, makes the same service-queue decisions, applies in index
order, and at most one leader is elected per term.

A server killed while recording an apply may have lost that index's decisions (spec
4.0): such (server, index) pairs are left out of decision agreement and counted.
"""

from __future__ import annotations

from pyspark.sql import Window
from pyspark.sql import functions as F

from analysis import model
from analysis.checks.common import (
    ORDER,
    CheckResult,
    count_rows,
    dark_intervals,
    no_violations,
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
    applied = rep.where(F.col("kind") == "applied")
    idx = ["queue", "raft_index"]
    # count_distinct ignores rows with a null member: compare whole structs instead
    log = (applied.groupBy(*idx)
           .agg(F.size(F.collect_set(F.struct("raft_term", "cmd_type", "cmd_digest")))
                .alias("n")))
    log_v = vrows(log.where(F.col("n") > 1), CHECK, "log_disagreement", queue=F.col("queue"),
                  raft_index=F.col("raft_index"), detail=F.col("n"))
    state = (applied.where(F.col("state_digest").isNotNull()).groupBy(*idx)
             .agg(F.count_distinct("state_digest").alias("n")))
    state_v = vrows(state.where(F.col("n") > 1), CHECK, "state_disagreement",
                    queue=F.col("queue"), raft_index=F.col("raft_index"), detail=F.col("n"))
    decided = (rep.where(F.col("kind") == "service_queue")
               .groupBy(*idx, "server")
               .agg(F.to_json(F.sort_array(F.collect_set(
                   F.struct("msg_id", "consumer_key", "attempt")))).alias("set")))
    servers = applied.select(*idx, "server").unionByName(decided.select(*idx, "server")) \
        .distinct()
    cut = (dark_intervals(h).where(F.col("cut_index").isNotNull())
           .select("queue", F.col("cut_index").alias("raft_index"), "server").distinct())
    per_server = (servers.join(cut, [*idx, "server"], "left_anti")
                  .join(decided, [*idx, "server"], "left")
                  .select(*idx, F.coalesce("set", F.lit("[]")).alias("set")))
    dec = per_server.groupBy(*idx).agg(F.count_distinct("set").alias("n"))
    dec_v = vrows(dec.where(F.col("n") > 1), CHECK, "decision_disagreement",
                  queue=F.col("queue"), raft_index=F.col("raft_index"), detail=F.col("n"))
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
    leaders = (rep.where(F.col("kind") == "leader_elected").groupBy("queue", "raft_term")
               .agg(F.count_distinct("leader").alias("n")))
    elect_v = vrows(leaders.where(F.col("n") > 1), CHECK, "election_safety",
                    queue=F.col("queue"),
                    key=F.concat(F.lit("term="), F.col("raft_term").cast("string")),
                    detail=F.col("n"))
    violations = (log_v.unionByName(state_v).unionByName(dec_v).unionByName(order_v)
                  .unionByName(elect_v))
    counts = count_rows(applied.agg(F.count(F.lit(1)).alias("applied"))
                        .crossJoin(cut.agg(F.count(F.lit(1)).alias("unrecorded_indexes"))),
                        applied=F.first("applied"),
                        unrecorded_indexes=F.first("unrecorded_indexes"))
    return CheckResult(CHECK, None, counts["applied"], violations, counts,
                       model.unrecorded_note(counts))
