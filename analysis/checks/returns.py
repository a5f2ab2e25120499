"""`ordering_returns`: messages a consumer's end gives back come back in the order that
consumer got them.

When a consumer goes away (its channel or connection closes) holding unsettled
deliveries, the queue returns all of them at once, in the order it handed them to that
consumer (`rabbit_fifo:return_all` walks the consumer's checked-out messages by their
consumer message id), to the front of the queue, first in first out. So two of them,
A delivered before B, are handed out again A first; when both go to one consumer, it
gets A first (a lower delivery tag).

What the history can tell, and so what is judged:

* *returned together*: deliveries of one consumer (connection, channel epoch, consumer
  tag; a channel's `basic.get`s count as one consumer) that no ack, nack or reject
  settled before the same end (`by_end` of `common.deliveries`, one release time). A
  delivery requeued by a nack or reject is left out: it went back when the queue got
  that settle, and requeues of several messages are not ordered the same way in every
  RabbitMQ version.
* a delivery's *next delivery*: the first redelivery of the message from the same
  queue after it; *traced* when its `x-delivery-count` is one more than the returned
  delivery's (null counting 0): it is the message's very next hand-out, so no hand-out
  the clients never saw (to a consumer that died before the delivery reached it) came
  between. Only traced deliveries are judged.
* a pair is judged when both were returned together and both next deliveries went to
  the same consumer; adjacent pairs in the returning consumer's delivery-tag order
  must have increasing delivery tags at the next consumer (`return_order`: `msg_id` the
  message that came back too early, `other_id` the one returned before it, `key` the
  next consumer, time of the early redelivery).

Competing consumers (the two next deliveries at different consumers), a message
dead-lettered at its delivery limit (no next delivery from the queue), a message
settled or requeued in between, or a hand-out nobody saw are therefore never judged.
"""

from __future__ import annotations

from pyspark.sql import Window
from pyspark.sql import functions as F

from analysis import model
from analysis.checks.common import (
    ORDER,
    CheckResult,
    consumer_key,
    count_parts,
    deliveries,
    first_attempt,
    take_violations,
    total,
    vrows,
)
from analysis.load import History
from analysis.model import Params

CHECK = "ordering_returns"
#: the next delivery's fields, flattened as `y_<field>`
_NEXT = ("ts_ns", "emitter", "seq", "conn_id", "channel_id", "epoch", "consumer_tag",
         "delivery_tag", "delivery_count")


def run(h: History, p: Params) -> CheckResult:
    again = ~first_attempt()
    d = deliveries(h, p).where(F.col("msg_id").isNotNull() & F.col("delivery_tag").isNotNull()
                               & (F.col("by_end") | again))
    later = (Window.partitionBy("queue", "msg_id")
             .orderBy(*[F.col(c).desc() for c in ORDER])
             .rowsBetween(Window.unboundedPreceding, -1))  # grows: rows after this one
    tag = F.coalesce(F.col("consumer_tag"), F.lit(""))
    nxt = F.when(again, F.struct(*[(tag if c == "consumer_tag" else F.col(c)).alias(c)
                                   for c in _NEXT]))
    ended = (d.select("*", F.min(nxt).over(later).alias("nxt")).where(F.col("by_end"))
             .select("queue", "msg_id", *ORDER, "conn_id", "channel_id", "epoch",
                     tag.alias("consumer_tag"), "delivery_tag", "delivery_count",
                     "release_ts", *[F.col("nxt")[c].alias("y_" + c) for c in _NEXT]))
    traced = (F.col("y_ts_ns").isNotNull()
              & (F.coalesce(F.col("y_delivery_count"), F.lit(0))
                 == F.coalesce(F.col("delivery_count"), F.lit(0)) + 1))
    group = ["queue", "conn_id", "channel_id", "epoch", "consumer_tag", "release_ts",
             "y_conn_id", "y_channel_id", "y_epoch", "y_consumer_tag"]
    w = Window.partitionBy(*group).orderBy("delivery_tag", *ORDER)
    prev = ended.where(traced).select(
        "*", F.lag("y_delivery_tag").over(w).alias("prev_tag"),
        F.lag("msg_id").over(w).alias("prev_id"))
    bad = F.col("prev_tag") >= F.col("y_delivery_tag")
    violations = vrows(
        prev.where(bad), CHECK, "return_order", queue=F.col("queue"), msg_id=F.col("msg_id"),
        other_id=F.col("prev_id"), key=consumer_key("y_"), ts_ns=F.col("y_ts_ns"),
        detail=F.concat(F.lit("returned by "), consumer_key(),
                        F.lit(", redelivered as delivery tags "),
                        F.col("prev_tag").cast("string"), F.lit(">"),
                        F.col("y_delivery_tag").cast("string")))
    counts = count_parts(
        (ended, {"returned": F.count("*"), "traced": total(traced)}),
        (prev, {"pairs": total(F.col("prev_tag").isNotNull()), "_order": total(bad)}))
    n = take_violations(counts)
    return CheckResult(CHECK, None, counts["returned"], violations, counts,
                       model.returns_note(counts, n), violation_count=n)
