"""Ordering checks at three strengths.

(a) per publishing channel and consumer, first deliveries keep publish order (a message
that reached the queue by dead-lettering was not published to it by that channel, so
it is left out: it arrives in the order it hit its source's delivery limit);
(b) each consumer sees first deliveries in queue (enqueue index) order;
(c) a single-active-consumer queue consumed with prefetch 1 is a strict FIFO:
exclusive, acked in queue order, and nothing overtakes an unsettled older message.
"""

from __future__ import annotations

from pyspark.sql import Column, Window
from pyspark.sql import functions as F

from analysis import model
from analysis.checks.common import (
    BIG,
    ORDER,
    CheckResult,
    chan_key,
    consumer_key,
    count_parts,
    count_rows,
    deliveries,
    enqueue_pos,
    first_attempt,
    no_violations,
    take_violations,
    total,
    vrows,
)
from analysis.checks.total_queue import messages
from analysis.load import History
from analysis.model import Params


def _consumer() -> list[str | Column]:
    return ["conn_id", "channel_id", "epoch", F.coalesce(F.col("consumer_tag"), F.lit(""))]


def _skipped(h: History, check: str, why: str) -> CheckResult:
    status, note = model.simple_status(0, False, why)
    return CheckResult(check, status, 0, no_violations(h), {}, note)


def channel_fifo(h: History, p: Params) -> CheckResult:
    check = "ordering_channel_fifo"
    d = deliveries(h, p)
    published = messages(h, p).where(F.col("has_pub")).select("msg_id", "pub_queue")
    candidates = (d.where(first_attempt() & F.col("pub_chan").isNotNull()
                          & F.col("pub_seq").isNotNull())
                  .join(published, "msg_id", "left")
                  .withColumn("dead_lettered", F.coalesce(F.col("pub_queue") != F.col("queue"),
                                                          F.lit(False))))
    firsts = candidates.where(~F.col("dead_lettered"))
    w = Window.partitionBy("queue", "pub_chan", *_consumer()).orderBy("delivery_tag")
    prev = firsts.select("*", F.lag("pub_seq").over(w).alias("prev_seq"),
                         F.lag("msg_id").over(w).alias("prev_id"))
    seq_v = vrows(prev.where(F.col("prev_seq") >= F.col("pub_seq")), check, "pub_seq_descent",
                  queue=F.col("queue"), msg_id=F.col("msg_id"), other_id=F.col("prev_id"),
                  key=F.concat(F.col("pub_chan"), F.lit(">"), consumer_key()),
                  ts_ns=F.col("ts_ns"),
                  detail=F.concat(F.col("prev_seq").cast("string"), F.lit(">"),
                                  F.col("pub_seq").cast("string")))
    wc = Window.partitionBy("conn_id", "channel_id", "epoch").orderBy(*ORDER)
    tags = d.select("*", F.lag("delivery_tag").over(wc).alias("prev_tag"),
                    F.lag("msg_id").over(wc).alias("prev_id"))
    tag_v = vrows(tags.where(F.col("prev_tag") >= F.col("delivery_tag")), check,
                  "delivery_tag_order", queue=F.col("queue"), msg_id=F.col("msg_id"),
                  other_id=F.col("prev_id"), key=chan_key(), ts_ns=F.col("ts_ns"),
                  detail=F.concat(F.col("prev_tag").cast("string"), F.lit(">="),
                                  F.col("delivery_tag").cast("string")))
    violations = seq_v.unionByName(tag_v)
    counts = count_parts(
        (candidates, {"first_attempt": total(~F.col("dead_lettered")),
                      "dead_lettered": total(F.col("dead_lettered"))}),
        (prev, {"_seq": total(F.col("prev_seq") >= F.col("pub_seq"))}),
        (tags, {"_tag": total(F.col("prev_tag") >= F.col("delivery_tag"))}))
    n = take_violations(counts)
    return CheckResult(check, None, counts["first_attempt"], violations, counts,
                       model.channel_fifo_note(counts), violation_count=n)


def consumer_monotonic(h: History, p: Params) -> CheckResult:
    check = "ordering_consumer_monotonic"
    if not h.has("replica_events"):
        return _skipped(h, check, "no replica_events")
    firsts = deliveries(h, p).where(first_attempt()).join(enqueue_pos(h), ["queue", "msg_id"])
    w = Window.partitionBy("queue", *_consumer()).orderBy("delivery_tag")
    prev = firsts.select("*", F.lag("pos").over(w).alias("prev_pos"),
                         F.lag("msg_id").over(w).alias("prev_id"))
    violations = vrows(prev.where(F.col("prev_pos") >= F.col("pos")), check, "pos_descent",
                       queue=F.col("queue"), msg_id=F.col("msg_id"), other_id=F.col("prev_id"),
                       key=consumer_key(), raft_index=F.col("pos"), ts_ns=F.col("ts_ns"),
                       detail=F.concat(F.col("prev_pos").cast("string"), F.lit(">"),
                                       F.col("pos").cast("string")))
    counts = count_rows(prev, first_attempt_with_pos=F.count("*"),
                        _v=total(F.col("prev_pos") >= F.col("pos")))
    n = take_violations(counts)
    return CheckResult(check, None, counts["first_attempt_with_pos"], violations, counts,
                       violation_count=n)


def sac_fifo(h: History, p: Params) -> CheckResult:
    check = "ordering_sac_fifo"
    queues = h.meta.sac_fifo_queues()
    if not queues:
        return _skipped(h, check, "no single-active-consumer queue with prefetch 1")
    # cached with the history, so that it is dropped with it: the violations read it
    # again after this check returns
    d = h.cached("sac_deliveries",
                 lambda: deliveries(h, p).where(F.col("queue").isin(queues)))
    pos = enqueue_pos(h)
    before = Window.partitionBy("queue").orderBy(*ORDER).rowsBetween(
        Window.unboundedPreceding, -1)
    release = F.struct(F.coalesce(F.col("release_ts"), F.lit(BIG)).alias("t"),
                       F.col("msg_id").alias("m"))
    ex = d.select("*", F.max(release).over(before).alias("best"))
    overlap = vrows(ex.where(F.col("ts_ns") < F.col("best.t")), check, "sac_overlap",
                    queue=F.col("queue"), msg_id=F.col("msg_id"), other_id=F.col("best.m"),
                    key=consumer_key(), ts_ns=F.col("ts_ns"))
    first_ok = (d.where(F.col("ok_ts").isNotNull()).groupBy("queue", "msg_id")
                .agg(F.min("ok_ts").alias("first_ok")))
    seq = first_ok.join(pos, ["queue", "msg_id"])
    ws = Window.partitionBy("queue").orderBy("first_ok", "msg_id")
    seq_prev = seq.select("*", F.lag("pos").over(ws).alias("prev_pos"),
                          F.lag("msg_id").over(ws).alias("prev_id"))
    order = vrows(seq_prev.where(F.col("prev_pos") >= F.col("pos")), check, "sac_order",
                  queue=F.col("queue"), msg_id=F.col("msg_id"), other_id=F.col("prev_id"),
                  raft_index=F.col("pos"), ts_ns=F.col("first_ok"),
                  detail=F.concat(F.col("prev_pos").cast("string"), F.lit(">"),
                                  F.col("pos").cast("string")))
    msgs = (d.select("queue", "msg_id").distinct().join(pos, ["queue", "msg_id"])
            .join(first_ok, ["queue", "msg_id"], "left"))
    by_pos = Window.partitionBy("queue").orderBy("pos").rowsBetween(
        Window.unboundedPreceding, -1)
    acked = F.when(F.col("first_ok").isNotNull(),
                   F.struct(F.col("first_ok").alias("t"), F.col("msg_id").alias("m")))
    prefix = msgs.select("queue", "msg_id", "pos", F.max(acked).over(by_pos).alias("before"))
    over = d.join(prefix, ["queue", "msg_id"])
    overtake = vrows(over.where(F.col("ts_ns") < F.col("before.t")), check, "sac_overtake",
                     queue=F.col("queue"), msg_id=F.col("msg_id"), other_id=F.col("before.m"),
                     key=consumer_key(), raft_index=F.col("pos"), ts_ns=F.col("ts_ns"))
    violations = overlap.unionByName(order).unionByName(overtake)
    counts = count_parts(
        (d, {"deliveries": F.count("*")}),
        (ex, {"_overlap": total(F.col("ts_ns") < F.col("best.t"))}),
        (seq_prev, {"_order": total(F.col("prev_pos") >= F.col("pos"))}),
        (over, {"_overtake": total(F.col("ts_ns") < F.col("before.t"))}))
    n = take_violations(counts)
    return CheckResult(check, None, counts["deliveries"], violations, counts,
                       violation_count=n)
