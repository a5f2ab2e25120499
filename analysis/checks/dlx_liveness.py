"""`dlx_worker_liveness`: after heal + grace, the node of each at-least-once
source queue's leader runs exactly one dead-letter worker for it, and no other node
runs one (the regressions of rabbitmq/rabbitmq-server PR #7677 and issue #16652).

A worker is tied to its queue by the `dlx_worker_checkout` row it records once its
checkout on the local leader succeeded (schema 1.1; `pid` in `extra`). It runs until
a `crashed`/`stopped` supervision row names its pid, or a `kill` fault hits its node.
Nodes are compared by their short names: a node's rows and the nemesis's kill targets
name it in full, servers and leaders (`<queue>@<node>`) by its short name.
Missing and duplicate rows carry the time the leader was elected. The moment judged
is the end of the completed drain (which follows the heal and the
settle period), else the run's end if it is `dlx_grace` past the last fault stop;
the leader then is the newest `leader_elected` of the queue up to that moment.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from analysis import final_state, model
from analysis.checks.common import (
    CheckResult,
    count_parts,
    no_violations,
    rare_replica_rows,
    take_violations,
    total,
    vrows,
)
from analysis.load import History
from analysis.model import Params

CHECK = final_state.DLX_LIVENESS


def _pid() -> Column:
    return F.get_json_object(F.col("extra"), "$.pid")


def _short(col: str) -> Column:
    return F.substring_index(F.col(col), "@", 1)


def run(h: History, p: Params) -> CheckResult:
    sources = h.meta.dlx_sources()
    if not sources or not h.has("replica_events"):
        why = ("no at-least-once dead-lettering configured" if not sources
               else "no replica_events")
        status, note = final_state.dlx_liveness_status({}, False, why, 0)
        return CheckResult(CHECK, status, 0, no_violations(h), {}, note)
    at, why = final_state.eval_point(h.drain_end_ns, h.run_end_ns,
                                     model.last_fault_stop(h.windows), p.dlx_grace_ns)
    rep = rare_replica_rows(h)
    checkouts = (rep.where((F.col("kind") == "dlx_worker_checkout")
                           & F.col("queue").isin(sources))
                 .select("queue", _pid().alias("pid"), _short("node").alias("wnode"), "ts_ns"))
    counts = {"sources": len(sources), "workers": 0, "running": 0, "no_leader": 0}
    if at is None:
        status, note = final_state.dlx_liveness_status(counts, True, why, 0)
        return CheckResult(CHECK, status, len(sources), no_violations(h), counts, note)
    ended = (h["supervision_events"]
             .where(F.col("kind").isin("crashed", "stopped") & (F.col("ts_ns") <= at))
             .select(_pid().alias("pid")).where(F.col("pid").isNotNull()).distinct())
    # the nemesis names a killed node in full (`n1@127.0.0.1:25671`), as the node's own
    # rows do; servers, leaders and `wnode` carry the short name
    kills = (h["nemesis_events"].where((F.col("kind") == "start") & (F.col("fault") == "kill"))
             .select(F.explode("targets").alias("target"), F.col("ts_ns").alias("kts"))
             .select(_short("target").alias("knode"), "kts"))
    killed = checkouts.join(kills, (F.col("knode") == F.col("wnode"))
                            & (F.col("kts") >= F.col("ts_ns")) & (F.col("kts") <= at),
                            "left_semi")
    running = (checkouts.where(F.col("ts_ns") <= at).join(ended, "pid", "left_anti")
               .join(killed.select("pid"), "pid", "left_anti"))
    # made in the JVM: a DataFrame from a Python list would start a Python worker
    queues = h.spark.range(1).select(
        F.explode(F.array(*[F.lit(q) for q in sources])).alias("queue"))
    leaders = (rep.where((F.col("kind") == "leader_elected") & (F.col("ts_ns") <= at)
                         & F.col("queue").isin(sources))
               .groupBy("queue")
               .agg(F.max(F.struct(F.coalesce("raft_term", F.lit(0)), "ts_ns", "leader"))
                    .alias("l"))
               .select("queue", F.col("l.leader").alias("leader"),
                       F.col("l.ts_ns").alias("elected_ts"),
                       F.substring_index(F.col("l.leader"), "@", -1).alias("lnode")))
    w = running.join(leaders, "queue")
    here = (w.where(F.col("wnode") == F.col("lnode")).groupBy("queue")
            .agg(F.count("*").alias("here")))
    per_queue = queues.join(leaders, "queue", "left").join(here, "queue", "left") \
        .select("queue", "leader", "elected_ts", F.coalesce("here", F.lit(0)).alias("here"))
    bad = F.col("leader").isNotNull() & (F.col("here") != 1)
    stray = F.col("wnode") != F.col("lnode")
    violations = (
        vrows(per_queue.where(bad), CHECK, F.when(F.col("here") == 0, "dlx_worker_missing")
              .otherwise("dlx_worker_duplicate"), queue=F.col("queue"), key=F.col("leader"),
              ts_ns=F.col("elected_ts"),
              detail=F.concat(F.lit("running="), F.col("here").cast("string")))
        .unionByName(vrows(w.where(stray), CHECK, "dlx_worker_stray", queue=F.col("queue"),
                           key=F.col("pid"), ts_ns=F.col("ts_ns"), detail=F.col("wnode"))))
    counts.update(count_parts(
        (checkouts, {"workers": F.count("*")}), (running, {"running": F.count("*")}),
        (per_queue, {"no_leader": total(F.col("leader").isNull()), "_bad": total(bad)}),
        (w, {"_stray": total(stray)})))
    n = take_violations(counts)
    if not why and counts["workers"] == 0:
        why = "no DLX worker recorded (history older than schema 1.1, or none started)"
    # fail outranks unknown here, so the verdict needs the number of violations
    status, note = final_state.dlx_liveness_status(counts, True, why, n)
    return CheckResult(CHECK, status, len(sources), violations, counts, note,
                       violation_count=n)
