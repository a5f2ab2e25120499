"""Local-delivery correctness: each service-queue decision is sent exactly
once, by the queue member on the consumer's node (or by the leader when that node has
no member), and every client delivery is backed by such a send.

Two corners are not violations (docs/analysis.md, "Missing node data", and Ra's effect semantics):

* a decision whose expected sender's history has a hole (the process was killed before
  its recorder flushed, see `dark_intervals`) when the decision was applied, and that
  sender recorded no later send before the hole, is *unrecorded*: neither its missing
  send nor the client deliveries it explains are reported; both are counted;
* a member that restarts re-applies the entries above its persisted `last_applied`
  with their effects, so it may send a delivery again: a member's sends of a decision
  count once per life (lives are separated by its `recovered` rows), and the surplus
  of its other lives is counted as resent, not reported as `double_send`.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from analysis import model
from analysis.checks.common import (
    BIG,
    CheckResult,
    block_summary,
    consumer_key,
    count_parts,
    dark_intervals,
    deliveries,
    lifecycle_ops,
    member_at,
    no_violations,
    per_index,
    take_violations,
    term_leaders,
    total,
    vrows,
)
from analysis.load import History
from analysis.model import Params

CHECK = "local_delivery"
MSG = ["queue", "msg_id", "attempt"]


def run(h: History, p: Params) -> CheckResult:
    if not h.has("replica_events"):
        status, note = model.simple_status(0, False, "no replica_events")
        return CheckResult(CHECK, status, 0, no_violations(h), {}, note)
    rep = h["replica_events"]
    dec = h.cached("local_delivery/decisions", lambda: _decisions(h))
    missing = (F.col("n") == 0) & (F.col("applied_ts").isNull() | (F.col("closed")
                                                                  > F.col("applied_ts")))
    missing_v = vrows(dec.where(missing & ~F.col("unrecorded")), CHECK, "missing_send",
                      queue=F.col("queue"), msg_id=F.col("msg_id"), key=F.col("consumer_key"),
                      raft_index=F.col("raft_index"), detail=F.col("attempt"))
    double_v = vrows(dec.where(F.col("n_first") > 1), CHECK, "double_send", queue=F.col("queue"),
                     msg_id=F.col("msg_id"), key=F.col("consumer_key"),
                     raft_index=F.col("raft_index"), detail=F.col("n_first"))
    has_wrong = F.col("expected").isNotNull() & (F.size("wrong") > 0)
    wrong = (dec.where(has_wrong)
             .select("*", F.explode("wrong").alias("w")))
    wrong_v = vrows(wrong, CHECK, "wrong_sender", queue=F.col("queue"), msg_id=F.col("msg_id"),
                    key=F.col("w.server"), raft_index=F.col("raft_index"),
                    ts_ns=F.col("w.ts_ns"), detail=F.col("expected"))
    keyed = (rep.where(F.col("kind") == "local_delivery")
             .select(*MSG, F.col("consumer_key").alias("ck")).distinct())
    excused = (dec.where(F.col("unrecorded"))
               .select(*MSG, F.col("consumer_key").alias("ck")).distinct())
    # the client's deliveries from the cached deliveries (one row per `deliver` row of
    # `client_ops`), not from another scan of every client row
    client = (deliveries(h, p).where(F.col("kind") == "deliver")
              .withColumn("attempt", F.coalesce("delivery_count", F.lit(0)))
              .withColumn("ck", consumer_key()))
    orphan = client.join(keyed, [*MSG, "ck"], "left_anti")
    orphan_v = vrows(orphan.join(excused, [*MSG, "ck"], "left_anti"), CHECK, "orphan_delivery",
                     queue=F.col("queue"), msg_id=F.col("msg_id"), key=F.col("ck"),
                     ts_ns=F.col("ts_ns"), detail=F.col("attempt"))
    violations = (missing_v.unionByName(double_v).unionByName(wrong_v)
                  .unionByName(orphan_v))
    # `excused` is distinct, so the left join keeps each orphan once
    orphans = orphan.join(excused.withColumn("excused", F.lit(True)), [*MSG, "ck"], "left")
    # decisions of clean blocks are only counted (`block_summary`); `dec` holds the
    # decisions of suspect ones
    counts = count_parts(
        (block_summary(h), {"clean_decisions": F.sum("decisions")}),
        (dec, {"suspect_decisions": F.count(F.lit(1)),
               "unrecorded_decisions": total(missing & F.col("unrecorded")),
               "_missing": total(missing & ~F.col("unrecorded")),
               "_double": total(F.col("n_first") > 1),
               "_wrong": F.sum(F.when(has_wrong, F.size("wrong")))}),
        (orphans, {"unrecorded_deliveries": total(F.col("excused").isNotNull()),
                   "_orphan": total(F.col("excused").isNull())}),
        (per_index(h), {"resent_after_restart": F.sum(_resent())}))
    n = take_violations(counts)
    counts = {"decisions": counts.pop("clean_decisions") + counts.pop("suspect_decisions"),
              **counts}
    return CheckResult(CHECK, None, counts["decisions"], violations, counts,
                       model.unrecorded_note(counts), violation_count=n)


def _first_sends(sends: Column) -> Column:
    """Sends of one decision that count: a member's sends count once per life, so each
    sender contributes the most it sent in any one incarnation."""
    senders = F.array_distinct(F.transform(sends, lambda x: x["server"]))

    def most_in_a_life(server: Column) -> Column:
        lives = F.transform(F.filter(sends, lambda x: x["server"].eqNullSafe(server)),
                            lambda x: x["incarnation"])
        return F.array_max(F.transform(F.array_distinct(lives),
                                       lambda i: F.size(F.filter(lives, lambda j: j == i))))

    return F.aggregate(senders, F.lit(0), lambda acc, server: acc + most_in_a_life(server))


def _resent() -> Column:
    """Surplus sends of an index beyond those that count (restarted members re-sending)."""
    sends = F.col("sends")
    keys = F.array_distinct(F.transform(sends, lambda x: F.struct(x["msg_id"], x["attempt"])))
    counted = F.aggregate(keys, F.lit(0), lambda acc, k: acc + _first_sends(F.filter(
        sends, lambda x: x["msg_id"].eqNullSafe(k["msg_id"])
        & x["attempt"].eqNullSafe(k["attempt"]))))
    return F.size(sends) - counted


def _decisions(h: History) -> DataFrame:
    """One row per distinct service-queue decision with its sends, expected sender,
    whether its consumer had gone and whether a hole in the record may hide its send."""
    idx = per_index(h)
    fields = ("msg_id", "attempt", "consumer_key", "consumer_node")
    distinct = F.array_distinct(F.transform(
        "decisions", lambda d: F.struct(*[d[c].alias(c) for c in fields])))
    dec = idx.select("queue", "raft_index", "applied_ts", "term", "sends",
                     F.explode(distinct).alias("d"))
    # a send belongs to the decision it executes, (msg_id, attempt) at the same index:
    # `attempt` (the `x-delivery-count` the consumer sees) alone may repeat, e.g. a
    # dead-lettered message carries its source's delivery count into its first
    # delivery from the target
    dec = dec.select("queue", "raft_index", "applied_ts", "term", "d.*", F.filter(
        "sends", lambda x: (x["msg_id"] == F.col("d.msg_id"))
        & (x["attempt"] == F.col("d.attempt"))).alias("own"))
    leaders = term_leaders(h)
    ops = lifecycle_ops(h)
    chan_closes = (ops.where(F.col("kind") == "channel_close")
                   .groupBy(F.concat_ws("/", "conn_id", F.col("channel_id").cast("string"))
                            .alias("chan")).agg(F.min("ts_ns").alias("chan_closed")))
    conn_closes = (ops.where(F.col("kind") == "conn_close").groupBy(F.col("conn_id").alias("conn"))
                   .agg(F.min("ts_ns").alias("conn_closed")))
    parts = F.split("consumer_key", "/")
    dec = (dec.withColumn("conn", F.get(parts, 0))
           .withColumn("chan", F.concat_ws("/", F.get(parts, 0), F.coalesce(F.get(parts, 1),
                                                                            F.lit(""))))
           .join(F.broadcast(chan_closes), "chan", "left")
           .join(F.broadcast(conn_closes), "conn", "left")
           .transform(lambda d: member_at(d, h))
           .join(F.broadcast(leaders), (F.col("queue") == F.col("l_queue"))
                 & (F.col("term") == F.col("l_term")), "left")
           .withColumn("expected", F.coalesce("member", "term_leader")))
    holes = dark_intervals(h).select(F.col("queue").alias("d_queue"),
                                     F.col("server").alias("d_server"), "dark_to", "sent_upto")
    dec_key = [*MSG, "raft_index", "consumer_key", "consumer_node"]
    unsent = dec.where(F.size("own") == 0)
    unrecorded = (unsent.join(F.broadcast(holes), (F.col("d_queue") == F.col("queue"))
                              & (F.col("d_server") == F.col("expected"))
                              & (F.col("applied_ts") <= F.col("dark_to"))
                              & (F.coalesce("sent_upto", F.lit(-1)) <= F.col("raft_index")))
                  .select(*dec_key).distinct().withColumn("unrecorded", F.lit(True)))
    closed = F.least(F.coalesce("chan_closed", F.lit(BIG)), F.coalesce("conn_closed", F.lit(BIG)))
    return (dec.join(unrecorded, dec_key, "left").select(
        *dec_key, "applied_ts", "expected", closed.alias("closed"),
        F.coalesce("unrecorded", F.lit(False)).alias("unrecorded"),
        F.size("own").alias("n"), _first_sends(F.col("own")).alias("n_first"),
        F.filter("own", lambda x: x["server"] != F.col("expected")).alias("wrong")))
