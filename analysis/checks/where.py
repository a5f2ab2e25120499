"""Where a lost message went missing: client -> channel -> Ra -> consumer.

For each lost message of `total_queue`, `last_seen` names the furthest stage of
`final_state.STAGES` its history shows: the channel took the publish
(`channel_events` `publish_in`), a queue applied its enqueue, a queue decided or sent
a delivery (`service_queue` / `local_delivery`), the channel sent it to a consumer
(`deliver_out`), a client received it. Stages a run did not record are simply never
reached (channel rows name the message from schema 1.1 on). The column is added to the
violation file only; other checks' rows are written unchanged.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from analysis import final_state
from analysis.load import History

LOST = ("lost_never_delivered", "lost_delivered_never_acked")


def _rank(stage: str) -> Column:
    return F.lit(final_state.STAGES.index(stage))


def stages(h: History) -> DataFrame:
    """(msg_id, rank): the furthest stage each message reached."""
    ch, rep, ops = h["channel_events"], h["replica_events"], h["client_ops"]
    parts = [
        ch.where(F.col("kind") == "publish_in").select("msg_id", _rank("channel_publish_in")),
        ch.where(F.col("kind") == "deliver_out").select("msg_id", _rank("channel_deliver_out")),
        rep.where((F.col("kind") == "applied") & (F.col("cmd_type") == "enqueue"))
        .select("msg_id", _rank("ra_enqueued")),
        rep.where(F.col("kind").isin("service_queue", "local_delivery"))
        .select("msg_id", _rank("ra_delivered")),
        ops.where(F.col("kind").isin("deliver", "get_ok")).select("msg_id",
                                                                 _rank("client_deliver")),
    ]
    union = parts[0].toDF("msg_id", "rank")
    for part in parts[1:]:
        union = union.unionByName(part.toDF("msg_id", "rank"))
    return union.where(F.col("msg_id").isNotNull()).groupBy("msg_id") \
        .agg(F.max("rank").alias("rank"))


def annotate(h: History, check: str, violations: DataFrame) -> DataFrame:
    """`violations` of `check`, with `last_seen` on the lost rows of `total_queue`."""
    if check != "total_queue":
        return violations
    names = F.array(*[F.lit(s) for s in final_state.STAGES])
    lost = violations.where(F.col("violation").isin(*LOST)).select("msg_id").distinct()
    reached = stages(h).join(lost, "msg_id", "left_semi")
    seen = F.element_at(names, (F.coalesce(F.col("rank"), F.lit(0)) + 1).cast("int"))
    return (violations.join(reached, "msg_id", "left")
            .select(*violations.columns,
                    F.when(F.col("violation").isin(*LOST), seen).alias("last_seen")))
