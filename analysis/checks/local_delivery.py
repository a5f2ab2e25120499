"""Local-delivery correctness (spec 4.4): each service-queue decision is sent exactly
once, by the queue member on the consumer's node (or by the leader when that node has
no member), and every client delivery is backed by such a send.

Two corners are not violations (spec 4.0 and Ra's effect semantics):

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

from pyspark.sql import functions as F

from analysis import model
from analysis.checks.common import (
    BIG,
    CheckResult,
    consumer_key,
    count_rows,
    dark_intervals,
    no_violations,
    total,
    vrows,
)
from analysis.load import History
from analysis.model import Params

CHECK = "local_delivery"
MSG = ["queue", "msg_id", "attempt"]
#: a send belongs to the decision it executes: `attempt` (the `x-delivery-count` the
#: consumer sees) alone may repeat, e.g. a dead-lettered message carries its source's
#: delivery count into its first delivery from the target
SEND = [*MSG, "raft_index"]


def run(h: History, p: Params) -> CheckResult:
    if not h.has("replica_events"):
        status, note = model.simple_status(0, False, "no replica_events")
        return CheckResult(CHECK, status, 0, no_violations(h), {}, note)
    rep = h["replica_events"]
    decisions = (rep.where(F.col("kind") == "service_queue")
                 .select(*MSG, "raft_index", "consumer_key", "consumer_node").distinct())
    recoveries = rep.where(F.col("kind") == "recovered").select(
        F.col("queue").alias("r_queue"), F.col("server").alias("r_server"),
        F.col("ts_ns").alias("r_ts"))
    raw_sends = rep.where(F.col("kind") == "local_delivery").select(
        *SEND, F.col("server").alias("sender"), F.col("ts_ns").alias("sent_ts"),
        F.col("emitter").alias("sent_by"), F.col("seq").alias("sent_seq"),
        F.col("consumer_key").alias("sent_key"))
    # incarnation of the sender = how many times it had recovered before the send
    sends = (raw_sends.join(recoveries, (F.col("r_queue") == F.col("queue"))
                            & (F.col("r_server") == F.col("sender"))
                            & (F.col("r_ts") <= F.col("sent_ts")), "left")
             .groupBy(*raw_sends.columns).agg(F.count("r_ts").alias("incarnation")))
    # a member's sends of one decision count once per life: the most it sent in any life
    per_life = sends.groupBy(*SEND, "sender", "incarnation").agg(F.count("*").alias("k"))
    n_sends = (per_life.groupBy(*SEND, "sender")
               .agg(F.max("k").alias("k"), F.sum("k").alias("n"))
               .groupBy(*SEND).agg(F.sum("n").alias("n"), F.sum("k").alias("n_first")))
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
    dec = (decisions.join(n_sends, SEND, "left").join(applied, ["queue", "raft_index"], "left")
           .withColumn("parts", F.split("consumer_key", "/"))
           .withColumn("conn", F.get("parts", 0))
           .withColumn("chan", F.concat_ws("/", F.get("parts", 0),
                                           F.coalesce(F.get("parts", 1), F.lit(""))))
           .join(chan_closes, "chan", "left").join(conn_closes, "conn", "left")
           .join(members, ["queue", "consumer_node"], "left")
           .join(leaders, (F.col("queue") == F.col("l_queue"))
                 & (F.col("term") == F.col("l_term")), "left")
           .withColumn("expected", F.coalesce("member", "term_leader")))
    holes = dark_intervals(h).select(F.col("queue").alias("d_queue"),
                                     F.col("server").alias("d_server"), "dark_to", "sent_upto")
    dec_key = [*MSG, "raft_index", "consumer_key", "consumer_node"]
    unsent = dec.where(F.col("n").isNull())
    unrecorded = (unsent.join(holes, (F.col("d_queue") == F.col("queue"))
                              & (F.col("d_server") == F.col("expected"))
                              & (F.col("applied_ts") <= F.col("dark_to"))
                              & (F.coalesce("sent_upto", F.lit(-1)) <= F.col("raft_index")))
                  .select(*dec_key).distinct().withColumn("unrecorded", F.lit(True)))
    dec = dec.join(unrecorded, dec_key, "left").withColumn(
        "unrecorded", F.coalesce("unrecorded", F.lit(False)))
    closed = F.least(F.coalesce("chan_closed", F.lit(BIG)), F.coalesce("conn_closed", F.lit(BIG)))
    missing = (F.col("n").isNull() & (F.col("applied_ts").isNull()
                                      | (closed > F.col("applied_ts"))))
    missing_v = vrows(dec.where(missing & ~F.col("unrecorded")), CHECK, "missing_send",
                      queue=F.col("queue"), msg_id=F.col("msg_id"), key=F.col("consumer_key"),
                      raft_index=F.col("raft_index"), detail=F.col("attempt"))
    double_v = vrows(dec.where(F.col("n_first") > 1), CHECK, "double_send", queue=F.col("queue"),
                     msg_id=F.col("msg_id"), key=F.col("consumer_key"),
                     raft_index=F.col("raft_index"), detail=F.col("n_first"))
    expected = dec.where(F.col("n").isNotNull()).join(sends, SEND)
    wrong_v = vrows(expected.where(F.col("expected").isNotNull()
                                   & (F.col("sender") != F.col("expected"))),
                    CHECK, "wrong_sender", queue=F.col("queue"), msg_id=F.col("msg_id"),
                    key=F.col("sender"), raft_index=F.col("raft_index"),
                    ts_ns=F.col("sent_ts"), detail=F.col("expected"))
    keyed = sends.select(*MSG, F.col("sent_key").alias("ck")).distinct()
    excused = (dec.where(F.col("unrecorded"))
               .select(*MSG, F.col("consumer_key").alias("ck")).distinct())
    client = (ops.where(F.col("kind") == "deliver")
              .withColumn("attempt", F.coalesce("delivery_count", F.lit(0)))
              .withColumn("ck", consumer_key()))
    orphan = client.join(keyed, [*MSG, "ck"], "left_anti")
    orphan_v = vrows(orphan.join(excused, [*MSG, "ck"], "left_anti"), CHECK, "orphan_delivery",
                     queue=F.col("queue"), msg_id=F.col("msg_id"), key=F.col("ck"),
                     ts_ns=F.col("ts_ns"), detail=F.col("attempt"))
    violations = (missing_v.unionByName(double_v).unionByName(wrong_v)
                  .unionByName(orphan_v))
    # one Spark job for every count
    excused_n = orphan.join(excused, [*MSG, "ck"], "left_semi").agg(
        F.count(F.lit(1)).alias("unrecorded_deliveries"))
    resent = n_sends.agg(F.sum(F.col("n") - F.col("n_first")).alias("resent_after_restart"))
    counts = count_rows(dec.agg(F.count(F.lit(1)).alias("decisions"),
                                total(missing & F.col("unrecorded")).alias("unrecorded_decisions"))
                        .crossJoin(excused_n).crossJoin(resent),
                        **{k: F.first(k) for k in ("decisions", "unrecorded_decisions",
                                                   "unrecorded_deliveries",
                                                   "resent_after_restart")})
    return CheckResult(CHECK, None, counts["decisions"], violations, counts,
                       model.unrecorded_note(counts))
