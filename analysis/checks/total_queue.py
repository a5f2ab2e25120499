"""Jepsen's total-queue check adapted to AMQP (spec 4.1).

Every confirmed message must be settled-ok somewhere once the queues are drained;
nothing may be delivered that was never published; and every delivery after a
message's first must be explained by a return or by an ack that may have been lost.
Message ids are unique per run, so a DLX source and its target are checked together:
a message is followed along its dead-letter chain (a `dlx_discard` from a queue, or a
delivery from its target, moves it on) and judged in the last queue it reached. There
it may have been *dropped* rather than lost: rejected without requeue, or returned past
the queue's delivery limit, by a queue with no dead-letter target.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analysis import model
from analysis.checks.common import CheckResult, chan_key, count_rows, deliveries, total, vrows
from analysis.load import History
from analysis.model import Params

CHECK = "total_queue"


def run(h: History, p: Params) -> CheckResult:
    ops = h["client_ops"]
    pubs = (ops.where(F.col("kind") == "publish").groupBy("msg_id")
            .agg(F.min(F.struct("ts_ns", "emitter", "seq", "queue", "body_digest")).alias("p"))
            .select("msg_id", F.col("p.queue").alias("pub_queue"),
                    F.col("p.body_digest").alias("pub_digest")))
    confirmed = ops.where(F.col("kind") == "confirm").select("msg_id").distinct() \
        .withColumn("conf", F.lit(True))
    nacked = ops.where(F.col("kind") == "pub_nack").select("msg_id").distinct() \
        .withColumn("nack", F.lit(True))
    d = deliveries(h, p).join(pubs, "msg_id", "left")
    unexpected = vrows(d.where(F.col("pub_queue").isNull()), CHECK, "unexpected",
                       queue=F.col("queue"), msg_id=F.col("msg_id"), key=chan_key(),
                       ts_ns=F.col("ts_ns"))
    bad_body = vrows(d.where(F.col("pub_queue").isNotNull() & F.col("pub_digest").isNotNull()
                             & F.col("body_digest").isNotNull()
                             & (F.col("pub_digest") != F.col("body_digest"))),
                     CHECK, "unexpected_body", queue=F.col("queue"), msg_id=F.col("msg_id"),
                     key=chan_key(), ts_ns=F.col("ts_ns"))
    dlx_queues = h.meta.dlx_queues()
    explained = ((F.col("outcome_d") == "returned") | F.col("ambiguous")
                 | ((F.col("outcome_d") == "dropped") & F.col("queue").isin(dlx_queues)))
    per_msg = (d.where(F.col("pub_queue").isNotNull()).groupBy("msg_id")
               .agg(F.count("*").alias("k"), total(explained).alias("explained"),
                    total(F.col("outcome_d") == "ok").alias("oks")))
    drained = h.drained
    msgs = (pubs.join(per_msg, "msg_id", "left").join(confirmed, "msg_id", "left")
            .join(nacked, "msg_id", "left")
            .select("msg_id", "pub_queue",
                    F.coalesce("k", F.lit(0)).alias("k"),
                    (F.coalesce("k", F.lit(0)) - 1 - F.coalesce("explained", F.lit(0)))
                    .alias("extra"),
                    F.coalesce("oks", F.lit(0)).alias("oks"),
                    F.coalesce("conf", F.lit(False)).alias("conf"),
                    (F.coalesce("nack", F.lit(False)) & ~F.coalesce("conf", F.lit(False)))
                    .alias("nack")))
    msgs = msgs.join(_fates(h, pubs, d), "msg_id", "left")
    dup = (F.col("k") > 0) & (F.col("extra") > 0)
    dropped = (F.col("oks") == 0) & F.coalesce(F.col("dropped"), F.lit(False))
    lost = F.lit(drained) & F.col("conf") & (F.col("oks") == 0) & ~dropped
    lost_kind = F.when(F.coalesce(F.col("k_end"), F.lit(0)) > 0, "lost_delivered_never_acked") \
        .otherwise("lost_never_delivered")
    end_queue = F.coalesce(F.col("end_queue"), F.col("pub_queue"))
    violations = (
        unexpected.unionByName(bad_body)
        .unionByName(vrows(msgs.where(dup), CHECK, "duplicated_beyond_redelivery",
                           queue=F.col("pub_queue"), msg_id=F.col("msg_id"),
                           detail=F.col("extra")))
        .unionByName(vrows(msgs.where(lost), CHECK, lost_kind, queue=end_queue,
                           msg_id=F.col("msg_id"),
                           detail=F.when(end_queue != F.col("pub_queue"),
                                         F.concat(F.lit("dead-lettered from "),
                                                  F.col("pub_queue")))))
    )
    ok = F.col("oks") > 0
    counts = count_rows(
        msgs,
        attempted=F.count("*"), confirmed=total(F.col("conf")), nacked=total(F.col("nack")),
        settled_ok=total(ok), duplicated=total(F.col("oks") > 1),
        duplicated_beyond_redelivery=total(dup),
        recovered_nacked=total(ok & ~F.col("conf") & F.col("nack")),
        recovered_indeterminate=total(ok & ~F.col("conf") & ~F.col("nack")),
        lost=total(lost),
        lost_never_delivered=total(lost & (F.coalesce(F.col("k_end"), F.lit(0)) == 0)),
        lost_delivered_never_acked=total(lost & (F.coalesce(F.col("k_end"), F.lit(0)) > 0)),
        dead_lettered=total(end_queue != F.col("pub_queue")), dropped=total(dropped),
    )
    counts.update(count_rows(d, deliveries=F.count("*"),
                             unexpected=total(F.col("pub_queue").isNull()
                                              | (F.col("pub_digest") != F.col("body_digest")))))
    counts["indeterminate"] = counts["attempted"] - counts["confirmed"] - counts["nacked"]
    status, note = model.total_queue_status(counts, drained, h.meta.drain_expected)
    return CheckResult(CHECK, status, counts["attempted"], violations, counts, note)


def _fates(h: History, pubs: DataFrame, d: DataFrame) -> DataFrame:
    """Per published message: `end_queue`, the last queue of its dead-letter chain it
    reached; `k_end`, its deliveries there; `dropped`, whether that queue dropped it."""
    meta = h.meta
    chain = [(q, target, depth) for q in meta.queues
             for depth, target in enumerate(meta.dlx_chain(q), start=1)]
    confs = [(q, bool(c.get("dlx_target")), meta.delivery_limit(q))
             for q, c in meta.queues.items()]
    spark = h.spark
    chains = spark.createDataFrame(chain, "pub_queue string, queue string, depth int")
    queues = spark.createDataFrame(confs, "end_queue string, has_dlx boolean, lim long")
    targets = spark.createDataFrame([(q, t) for q, t, depth in chain if depth == 1],
                                    "src string, queue string")
    seen = d.select("msg_id", "queue")
    if h.has("replica_events"):
        discards = (h["replica_events"].where(F.col("kind") == "dlx_discard")
                    .select("msg_id", F.col("queue").alias("src")).join(targets, "src"))
        seen = seen.unionByName(discards.select("msg_id", "queue"))
    ends = (pubs.select("msg_id", "pub_queue").join(chains, "pub_queue")
            .join(seen.distinct(), ["msg_id", "queue"])
            .groupBy("msg_id").agg(F.max(F.struct("depth", "queue")).alias("e"))
            .select("msg_id", F.col("e.queue").alias("end_queue")))
    returned = F.col("outcome_d") == "returned"
    per_queue = d.groupBy("msg_id", F.col("queue").alias("end_queue")).agg(
        F.count("*").alias("k_end"), total(F.col("outcome_d") == "dropped").alias("drops"),
        total(returned).alias("returns"),
        F.max(F.when(returned, F.coalesce(F.col("delivery_count"), F.lit(0)) + 1))
        .alias("counted"))
    past_limit = F.greatest(F.col("returns"), F.coalesce(F.col("counted"), F.lit(0))) \
        > F.col("lim")
    return (pubs.select("msg_id", "pub_queue").join(ends, "msg_id", "left")
            .select("msg_id", F.coalesce("end_queue", "pub_queue").alias("end_queue"))
            .join(per_queue, ["msg_id", "end_queue"], "left")
            .join(queues, "end_queue", "left")
            .select("msg_id", "end_queue", "k_end",
                    (~F.coalesce(F.col("has_dlx"), F.lit(False))
                     & ((F.col("drops") > 0) | F.coalesce(past_limit, F.lit(False))))
                    .alias("dropped")))
