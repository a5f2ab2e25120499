"""Building blocks shared by the Spark checks: violation rows, channel epochs, and
the fate of every delivery (settled ok, returned, dropped, still open)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, from_arrow_type

from analysis import model
from analysis.load import History
from analysis.model import Params

BIG = 2**63 - 1
ORDER = ("ts_ns", "emitter", "seq")


@dataclass
class CheckResult:
    """`status` None means: pass or fail by whether there are violations (the runner
    counts them once, so the check need not run an extra Spark action)."""

    check: str
    status: str | None
    examined: int
    violations: DataFrame
    counts: dict[str, int] = field(default_factory=dict)
    note: str = ""


def no_violations(h: History) -> DataFrame:
    return h.spark.createDataFrame([], from_arrow_schema(model.VIOLATION_SCHEMA))


def vrows(df: DataFrame, check: str, violation: str | Column,
          **cols: Column | None) -> DataFrame:
    """Project `df` onto the common violation schema (absent columns are null)."""
    out = []
    for name, typ in model.VIOLATION_FIELDS:
        spark_type = from_arrow_type(typ)
        if name == "check":
            col = F.lit(check)
        elif name == "violation":
            col = violation if isinstance(violation, Column) else F.lit(violation)
        else:
            col = cols.get(name)
            if col is None:
                col = F.lit(None)
        out.append(col.cast(spark_type).alias(name))
    return df.select(*out)


def union_all(h: History, parts: list[DataFrame]) -> DataFrame:
    result = no_violations(h)
    for part in parts:
        result = result.unionByName(part)
    return result


def count_rows(df: DataFrame, **exprs: Column) -> dict[str, int]:
    """One aggregation of named integer expressions, collected to the driver."""
    row = df.agg(*[F.coalesce(e, F.lit(0)).cast("long").alias(k) for k, e in exprs.items()])
    first = row.first()
    return {k: int(first[k]) for k in exprs} if first else dict.fromkeys(exprs, 0)


def total(cond: Column) -> Column:
    return F.sum(F.when(cond, 1).otherwise(0))


def client_with_epochs(h: History) -> DataFrame:
    """client_ops with `epoch`: how many `channel_open`s of the row's channel came before."""
    return h.cached("client_epochs", lambda: _client_with_epochs(h))


def _client_with_epochs(h: History) -> DataFrame:
    w = (Window.partitionBy("conn_id", "channel_id").orderBy(*ORDER)
         .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    opens = F.sum(F.when(F.col("kind") == "channel_open", 1).otherwise(0)).over(w)
    has_chan = F.col("conn_id").isNotNull() & F.col("channel_id").isNotNull()
    return h["client_ops"].withColumn("epoch", F.when(has_chan, opens))


def consumer_key(prefix: str = "") -> Column:
    return F.concat_ws("/", F.col(prefix + "conn_id"), F.col(prefix + "channel_id").cast("string"),
                       F.coalesce(F.col(prefix + "consumer_tag"), F.lit("")))


def chan_key() -> Column:
    return F.concat_ws("/", F.col("conn_id"), F.col("channel_id").cast("string"))


def first_attempt() -> Column:
    return (~F.coalesce(F.col("redelivered"), F.lit(False))
            & (F.coalesce(F.col("delivery_count"), F.lit(0)) == 0))


def deliveries(h: History, p: Params) -> DataFrame:
    """Every `deliver`/`get_ok` with outcome, ambiguity, release and ok times."""
    return h.cached(f"deliveries/{p.ack_grace_ns}", lambda: _deliveries(h, p))


def _deliveries(h: History, p: Params) -> DataFrame:
    ops = client_with_epochs(h)
    d = ops.where(F.col("kind").isin("deliver", "get_ok"))
    chan = ["conn_id", "channel_id", "epoch"]
    s = ops.where(F.col("kind").isin("ack", "nack", "reject")).select(
        *chan, "delivery_tag",
        F.struct(*[F.col(c).alias("s_" + c) for c in (*ORDER, "kind", "requeue")]).alias("s"))
    dkey = ["conn_id", "channel_id", "epoch", "delivery_tag", "emitter", "seq"]
    first = (d.select(*dkey, "ts_ns").alias("d")
             .join(s.alias("s"), [F.col("d." + c) == F.col("s." + c)
                                  for c in ("conn_id", "channel_id", "epoch", "delivery_tag")]
                   + [F.col("s.s.s_ts_ns") >= F.col("d.ts_ns")])
             .groupBy(*[F.col("d." + c) for c in dkey]).agg(F.min("s.s").alias("settle")))
    closers = ops.where(F.col("kind").isin("channel_close", "conn_close", "cancel")).select(
        F.col("conn_id").alias("c_conn"), F.col("channel_id").alias("c_ch"),
        F.col("epoch").alias("c_epoch"), F.col("consumer_tag").alias("c_tag"),
        F.col("kind").alias("c_kind"), F.col("ts_ns").alias("c_ts"), F.col("error").alias("c_err"))
    d1 = d.join(first, dkey, "left")
    ack_ts = F.when(F.col("settle.s_kind") == "ack", F.col("settle.s_ts_ns"))
    same_ch = (F.col("c_ch") == F.col("channel_id")) & (F.col("c_epoch") == F.col("epoch"))
    match = (F.col("c_conn") == F.col("conn_id")) & (F.col("c_ts") >= F.col("ts_ns")) & (
        (F.col("c_kind") == "conn_close")
        | ((F.col("c_kind") == "channel_close") & same_ch)
        | ((F.col("c_kind") == "cancel") & same_ch
           & (F.coalesce(F.col("c_tag"), F.lit("")) == F.coalesce(F.col("consumer_tag"),
                                                                   F.lit("")))))
    amb = ((F.col("c_kind") != "cancel") & F.col("c_err").isNotNull()
           & (F.col("c_ts") >= ack_ts) & (F.col("c_ts") <= ack_ts + F.lit(p.ack_grace_ns)))
    ends = (d1.select(*dkey, "ts_ns", "consumer_tag", "settle").join(closers, match)
            .groupBy(*dkey).agg(F.min("c_ts").alias("end_ts"),
                                F.max(F.when(amb, True).otherwise(False)).alias("ambiguous")))
    d2 = d1.join(ends, dkey, "left")
    settle_kind = F.col("settle.s_kind")
    outcome = (F.when(settle_kind == "ack", "ok")
               .when(settle_kind.isNotNull() & (F.col("settle.s_requeue") == F.lit(False)),
                     "dropped")
               .when(settle_kind.isNotNull(), "returned")
               .when(F.col("end_ts").isNotNull(), "returned")
               .otherwise("open"))
    return d2.select(
        *[c for c in d.columns],
        outcome.alias("outcome_d"),
        (F.coalesce(F.col("ambiguous"), F.lit(False)) & (settle_kind == "ack")).alias("ambiguous"),
        F.coalesce(F.col("settle.s_ts_ns"), F.col("end_ts")).alias("release_ts"),
        F.when(settle_kind == "ack", F.col("settle.s_ts_ns")).alias("ok_ts"),
    )


def enqueue_pos(h: History) -> DataFrame:
    """(queue, msg_id, pos): raft index of the applied enqueue of each message."""
    return h.cached("enqueue_pos", lambda: h["replica_events"]
            .where((F.col("kind") == "applied") & (F.col("cmd_type") == "enqueue")
                   & F.col("msg_id").isNotNull())
            .groupBy("queue", "msg_id").agg(F.min("raft_index").alias("pos")))


def dark_intervals(h: History) -> DataFrame:
    """Where a replica's history is missing (spec 4.0, "Missing node data").

    A killed process loses the events it had not flushed yet, so a server's record has a
    hole from its last row before the kill to its next `recovered` (never closed when
    it did not come back). One row per hole: `(queue, server, dark_from, dark_to,
    sent_upto, cut_index)`. Holes come from nemesis `kill` starts naming the server's
    node and from `recovered` rows that follow earlier rows of the same server (a restart
    the nemesis did not record). `sent_upto` is the highest `local_delivery` index the
    server recorded before the hole (sends are executed in log order); `cut_index` is the
    index whose apply was being recorded when the record stopped (its decisions may be
    partly lost), when the last row is an `applied` or `service_queue` row.
    """
    return h.cached("dark_intervals", lambda: _dark_intervals(h))


def _dark_intervals(h: History) -> DataFrame:
    rep = h["replica_events"].where(F.col("server").isNotNull())
    cols = ["queue", "server", "ts_ns", "seq", "kind", "raft_index"]
    servers = rep.select("queue", "server", "node").distinct()
    kills = (h["nemesis_events"].where((F.col("kind") == "start") & (F.col("fault") == "kill"))
             .select(F.explode("targets").alias("node"), "ts_ns"))
    kill_rows = kills.join(servers, "node").select(
        "queue", "server", "ts_ns", F.lit(-1).cast("long").alias("seq"),
        F.lit("kill").alias("kind"), F.lit(None).cast("long").alias("raft_index"),
        F.lit(True).alias("is_kill"))
    rows = rep.select(*cols, F.lit(False).alias("is_kill")).unionByName(kill_rows)
    order = Window.partitionBy("queue", "server").orderBy("ts_ns", "is_kill", "seq")
    before = order.rowsBetween(Window.unboundedPreceding, -1)
    # "every later row" as a growing frame over the reversed order: Spark recomputes a
    # frame that shrinks at its start for every row (quadratic in a server's rows)
    after = (Window.partitionBy("queue", "server")
             .orderBy(F.col("ts_ns").desc(), F.col("is_kill").desc(), F.col("seq").desc())
             .rowsBetween(Window.unboundedPreceding, -1))
    recorded = ~F.col("is_kill")
    prev = F.last(F.when(recorded, F.struct("ts_ns", "kind", "raft_index")),
                  ignorenulls=True).over(before)
    marked = rows.select(
        "*", prev.alias("prev"),
        F.max(F.when(F.col("kind") == "local_delivery", F.col("raft_index")))
        .over(before).alias("sent_upto"),
        F.min(F.when(F.col("kind") == "recovered", F.col("ts_ns"))).over(after)
        .alias("next_recovered"))
    holes = marked.where((F.col("is_kill") | (F.col("kind") == "recovered"))
                         & F.col("prev").isNotNull())
    return holes.select(
        "queue", "server", F.col("prev.ts_ns").alias("dark_from"),
        F.when(F.col("is_kill"), F.coalesce("next_recovered", F.lit(BIG)))
        .otherwise(F.col("ts_ns")).alias("dark_to"),
        "sent_upto",
        F.when(F.col("prev.kind").isin("applied", "service_queue"), F.col("prev.raft_index"))
        .alias("cut_index")).distinct()
