"""At-least-once dead-lettering: every message a source queue discards
reaches its dead-letter target (an applied enqueue there, or a client delivery from
it); a discard settled without arriving is lost, one not yet settled is pending."""

from __future__ import annotations

from pyspark.sql import functions as F

from analysis import model
from analysis.checks.common import (
    CheckResult,
    count_rows,
    enqueue_pos,
    lit_map,
    no_violations,
    rare_replica_rows,
    total,
    vrows,
)
from analysis.load import History
from analysis.model import Params

CHECK = "dlx_at_least_once"


def run(h: History, p: Params) -> CheckResult:
    sources = {q: h.meta.queues[q].get("dlx_target") for q in h.meta.dlx_sources()}
    if not sources or not h.has("replica_events"):
        status, note = model.dlx_status({}, False, h.drained)
        return CheckResult(CHECK, status, 0, no_violations(h), {}, note)
    rare = rare_replica_rows(h)
    discards = (rare.where((F.col("kind") == "dlx_discard") & F.col("queue").isin(list(sources)))
                .withColumn("target", lit_map(sources, "string", "string")[F.col("queue")])
                .groupBy("queue", "target", "msg_id").agg(F.min("ts_ns").alias("ts_ns")))
    # only the dead-letter targets' enqueues and deliveries can answer a discard
    targets = sorted({t for t in sources.values() if t is not None})
    # (the applied enqueues per message are shared with the ordering checks: no scan
    # of the replica rows of its own)
    enq = (enqueue_pos(h).where(F.col("queue").isin(targets))
           .select(F.col("queue").alias("target"), "msg_id", F.lit(True).alias("enqueued"),
                   (F.col("pos_last") > F.col("pos")).alias("enqueued_twice")))
    delivered = (h["client_ops"].where(F.col("kind").isin("deliver", "get_ok")
                                       & F.col("queue").isin(targets))
                 .select(F.col("queue").alias("target"), "msg_id").distinct()
                 .withColumn("delivered", F.lit(True)))
    settled = (rare.where((F.col("kind") == "dlx_settled") & F.col("queue").isin(list(sources)))
               .select("queue", "msg_id").distinct()
               .withColumn("settled", F.lit(True)))
    d = h.cached("dlx/discards", lambda: discards.join(enq, ["target", "msg_id"], "left")
                 .join(delivered, ["target", "msg_id"], "left")
                 .join(settled, ["queue", "msg_id"], "left"))
    arrived = F.col("enqueued").isNotNull() | F.col("delivered").isNotNull()
    kind = F.when(F.col("settled").isNotNull(), "dlx_lost").otherwise("dlx_pending")
    violations = vrows(d.where(~arrived), CHECK, kind, queue=F.col("queue"),
                       msg_id=F.col("msg_id"), key=F.col("target"), ts_ns=F.col("ts_ns"))
    counts = count_rows(d, discards=F.count("*"),
                        dlx_lost=total(~arrived & F.col("settled").isNotNull()),
                        dlx_pending=total(~arrived & F.col("settled").isNull()),
                        dlx_duplicates=total(F.col("enqueued_twice")))
    status, note = model.dlx_status(counts, True, h.drained)
    return CheckResult(CHECK, status, counts["discards"], violations, counts, note,
                       violation_count=counts["dlx_lost"] + counts["dlx_pending"])
