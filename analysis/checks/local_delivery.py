"""Local-delivery correctness (spec 4.4): each service-queue decision is sent exactly
once, by the queue member on the consumer's node (or by the leader when that node has
no member), and every client delivery is backed by such a send."""

from __future__ import annotations

from pyspark.sql import functions as F

from analysis import model
from analysis.checks.common import BIG, CheckResult, consumer_key, no_violations, vrows
from analysis.load import History
from analysis.model import Params

CHECK = "local_delivery"
MSG = ["queue", "msg_id", "attempt"]


def run(h: History, p: Params) -> CheckResult:
    if not h.has("replica_events"):
        status, note = model.simple_status(0, False, "no replica_events")
        return CheckResult(CHECK, status, 0, no_violations(h), {}, note)
    rep = h["replica_events"]
    decisions = (rep.where(F.col("kind") == "service_queue")
                 .select(*MSG, "raft_index", "consumer_key", "consumer_node").distinct())
    sends = rep.where(F.col("kind") == "local_delivery").select(
        *MSG, F.col("server").alias("sender"), F.col("ts_ns").alias("sent_ts"),
        F.col("consumer_key").alias("sent_key"))
    applied = (rep.where(F.col("kind") == "applied").groupBy("queue", "raft_index")
               .agg(F.min("ts_ns").alias("applied_ts"), F.min("raft_term").alias("term")))
    leaders = (rep.where(F.col("kind") == "leader_elected")
               .groupBy(F.col("queue").alias("l_queue"), F.col("raft_term").alias("l_term"))
               .agg(F.min("leader").alias("term_leader")))
    members = (rep.where(F.col("server").isNotNull())
               .groupBy("queue", F.substring_index("server", "@", -1).alias("consumer_node"))
               .agg(F.min("server").alias("member")))
    ops = h["client_ops"]
    chan_closes = (ops.where(F.col("kind") == "channel_close")
                   .groupBy(F.concat_ws("/", "conn_id", F.col("channel_id").cast("string"))
                            .alias("chan")).agg(F.min("ts_ns").alias("chan_closed")))
    conn_closes = (ops.where(F.col("kind") == "conn_close").groupBy(F.col("conn_id").alias("conn"))
                   .agg(F.min("ts_ns").alias("conn_closed")))
    n_sends = sends.groupBy(*MSG).agg(F.count("*").alias("n"))
    dec = (decisions.join(n_sends, MSG, "left").join(applied, ["queue", "raft_index"], "left")
           .withColumn("parts", F.split("consumer_key", "/"))
           .withColumn("conn", F.get("parts", 0))
           .withColumn("chan", F.concat_ws("/", F.get("parts", 0),
                                           F.coalesce(F.get("parts", 1), F.lit(""))))
           .join(chan_closes, "chan", "left").join(conn_closes, "conn", "left"))
    closed = F.least(F.coalesce("chan_closed", F.lit(BIG)), F.coalesce("conn_closed", F.lit(BIG)))
    missing = F.col("n").isNull() & (F.col("applied_ts").isNull() | (closed > F.col("applied_ts")))
    missing_v = vrows(dec.where(missing), CHECK, "missing_send", queue=F.col("queue"),
                      msg_id=F.col("msg_id"), key=F.col("consumer_key"),
                      raft_index=F.col("raft_index"), detail=F.col("attempt"))
    double_v = vrows(dec.where(F.col("n") > 1), CHECK, "double_send", queue=F.col("queue"),
                     msg_id=F.col("msg_id"), key=F.col("consumer_key"),
                     raft_index=F.col("raft_index"), detail=F.col("n"))
    expected = (dec.where(F.col("n").isNotNull())
                .join(members, ["queue", "consumer_node"], "left")
                .join(leaders, (F.col("queue") == F.col("l_queue"))
                      & (F.col("term") == F.col("l_term")), "left")
                .withColumn("expected", F.coalesce("member", "term_leader"))
                .join(sends, MSG))
    wrong_v = vrows(expected.where(F.col("expected").isNotNull()
                                   & (F.col("sender") != F.col("expected"))),
                    CHECK, "wrong_sender", queue=F.col("queue"), msg_id=F.col("msg_id"),
                    key=F.col("sender"), raft_index=F.col("raft_index"),
                    ts_ns=F.col("sent_ts"), detail=F.col("expected"))
    keyed = sends.select(*MSG, F.col("sent_key").alias("ck")).distinct()
    client = (ops.where(F.col("kind") == "deliver")
              .withColumn("attempt", F.coalesce("delivery_count", F.lit(0)))
              .withColumn("ck", consumer_key()))
    orphan = client.join(keyed, [*MSG, "ck"], "left_anti")
    orphan_v = vrows(orphan, CHECK, "orphan_delivery", queue=F.col("queue"),
                     msg_id=F.col("msg_id"), key=F.col("ck"), ts_ns=F.col("ts_ns"),
                     detail=F.col("attempt"))
    violations = (missing_v.unionByName(double_v).unionByName(wrong_v)
                  .unionByName(orphan_v))
    examined = decisions.count()
    return CheckResult(CHECK, None, examined, violations, {"decisions": examined})
