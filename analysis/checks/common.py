"""Building blocks shared by the Spark checks: violation rows, channel epochs, the fate
of every delivery (settled ok, returned, dropped, still open), the replica log gathered
per index, and holes in a replica's record.

Cost matters as much as the rules here (a 10M-event history on two cores): shared
frames are built with as few shuffles and sorts as possible (a delivery's fate from
one window over the deliveries and settles, the rare opens, closes and cancels looked
up from broadcast arrays; one aggregation per log index) and cached once, run
metadata is looked up through literal maps rather than joins with small frames made
from Python lists (those start a Python worker), and the raw tables are read from
Parquet per use rather than cached whole."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_type

from analysis import model
from analysis.load import History
from analysis.model import Params

BIG = 2**63 - 1
ORDER = ("ts_ns", "emitter", "seq")


@dataclass
class CheckResult:
    """`status` None means: pass or fail by whether there are violations (the runner
    counts them once, so the check need not run an extra Spark action).

    `violation_count` is how many rows `violations` holds, when the check could count
    them inside an aggregation it runs anyway. The runner then takes that number
    instead of counting the rows itself, and leaves a frame with none unevaluated: on a
    clean history every check's violations are empty, and each count is one more query
    to plan, compile and schedule (see `count_parts`)."""

    check: str
    status: str | None
    examined: int
    violations: DataFrame
    counts: dict[str, int] = field(default_factory=dict)
    note: str = ""
    violation_count: int | None = None


def no_violations(h: History) -> DataFrame:
    """An empty frame of the violation schema, made in the JVM: `createDataFrame` from
    a Python list goes through an RDD that starts a Python worker."""
    return h.spark.range(0).select(*[F.lit(None).cast(from_arrow_type(t)).alias(n)
                                     for n, t in model.VIOLATION_FIELDS])


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
            found = cols.get(name)
            col = F.lit(None) if found is None else found
        out.append(col.cast(spark_type).alias(name))
    return df.select(*out)


def union_all(h: History, parts: list[DataFrame]) -> DataFrame:
    result = no_violations(h)
    for part in parts:
        result = result.unionByName(part)
    return result


def count_rows(df: DataFrame, **exprs: Column) -> dict[str, int]:
    """One aggregation of named integer expressions, collected to the driver."""
    return count_parts((df, exprs))


def count_parts(*parts: tuple[DataFrame, dict[str, Column]]) -> dict[str, int]:
    """Aggregations of several frames (named integer expressions each, null counted as
    0), collected by one Spark action: the union of one row per part.

    On a small history a check's time goes to the driver, per query: analysing,
    optimising and code-generating its plan, compiling the classes and scheduling its
    stages. Counts gathered in one query pay that once. Names must be distinct; the
    checks name with a leading `_` the numbers of violation rows, which
    `take_violations` takes out before the counts are reported."""
    names = [k for _, exprs in parts for k in exprs]
    if len(set(names)) != len(names):
        raise ValueError(f"count_parts: a name is given twice in {names}")
    rows = None
    for i, (df, exprs) in enumerate(parts):
        values = F.array(*[F.coalesce(e, F.lit(0)).cast("long") for e in exprs.values()])
        row = df.agg(values.alias("v")).select(F.lit(i).alias("part"), "v")
        rows = row if rows is None else rows.unionByName(row)
    if rows is None:
        return {}
    got = {r["part"]: r["v"] for r in rows.collect()}
    return {k: int(v) for i, (_, exprs) in enumerate(parts)
            for k, v in zip(exprs, got[i], strict=True)}


def take_violations(counts: dict[str, int]) -> int:
    """Remove the `_`-named numbers of violation rows from `counts` (see `count_parts`)
    and return their sum: the check's `CheckResult.violation_count`."""
    return sum(counts.pop(k) for k in [k for k in counts if k.startswith("_")])


def lit_map(items: Mapping[Any, object], key_type: str, value_type: str) -> Column:
    """A literal map column (run metadata looked up per row without a join)."""
    pairs = [F.lit(x) for kv in sorted(items.items()) for x in kv]
    return F.create_map(*pairs).cast(f"map<{key_type},{value_type}>")


def total(cond: Column) -> Column:
    return F.sum(F.when(cond, 1).otherwise(0))


#: the client columns a delivery keeps (run_id, node, wall_ns, settle and close fields,
#: extra: no check reads them from a delivery, and every column kept is sorted along)
DELIVERY_COLUMNS = ("emitter", "seq", "ts_ns", "kind", "queue", "conn_id", "channel_id",
                    "msg_id", "pub_chan", "pub_seq", "body_digest", "consumer_tag",
                    "delivery_tag", "redelivered", "delivery_count")
SETTLE_KINDS = ("ack", "nack", "reject")


def _at_or_after(*keys: str | Column) -> WindowSpec:
    """Rows of the same `keys` whose `ts_ns` is at or after this row's (ties included),
    as a frame that only grows: Spark recomputes a frame that shrinks at its start
    for every row."""
    return (Window.partitionBy(*keys).orderBy(F.col("ts_ns").desc())
            .rangeBetween(Window.unboundedPreceding, Window.currentRow))


def _has_chan() -> Column:
    return F.col("conn_id").isNotNull() & F.col("channel_id").isNotNull()


def _with_epoch(rows: DataFrame, opens: DataFrame) -> DataFrame:
    """`rows` with `epoch`: how many `channel_open`s of the row's channel are at or before
    it in `(ts_ns, emitter, seq)` order (null without a connection and channel)."""
    me = F.struct(*ORDER)
    n = F.coalesce(F.size(F.filter("_opens", lambda o: o <= me)), F.lit(0))
    return (rows.join(F.broadcast(opens), ["conn_id", "channel_id"], "left")
            .withColumn("epoch", F.when(_has_chan(), n)).drop("_opens"))


def _first_at_or_after(times: str, pick: Callable[[Column], Column] | None = None) -> Column:
    """The smallest `ts` of the structs in array column `times` (optionally only those
    `pick` accepts) at or after this row's `ts_ns`; null when there is none."""
    ts = F.col("ts_ns")
    return F.array_min(F.transform(
        F.filter(times, lambda c: (c["ts"] >= ts) & (pick(c) if pick else F.lit(True))),
        lambda c: c["ts"]))


#: the client_ops kinds that open or end a channel, a connection or a consumer
LIFECYCLE_KINDS = ("channel_open", "channel_close", "conn_close", "cancel")


def lifecycle_ops(h: History) -> DataFrame:
    """The few `LIFECYCLE_KINDS` rows of `client_ops`, with the columns read from them,
    cached: the deliveries' fates look them up three times and `local_delivery` twice,
    and each lookup on `client_ops` itself would read all of it again."""
    return h.cached("client_lifecycle", lambda: h["client_ops"]
                    .where(F.col("kind").isin(*LIFECYCLE_KINDS))
                    .select("conn_id", "channel_id", *ORDER, "kind", "error", "consumer_tag"))


def _abnormal(end: Column) -> Column:
    return end["err"]


def _deliveries(h: History, p: Params) -> DataFrame:
    """A delivery's settle is the first ack/nack/reject of its channel epoch and tag at
    or after it; it ends unsettled at the first close of its connection, channel epoch
    or consumer at or after it; an ack is ambiguous when an abnormal close of the
    connection or channel epoch, or the broker's cancel of its consumer (its queue went
    down), follows within `ack_grace` (a cancel between the delivery and its ack counts
    too: the ack went to a queue process that was gone).

    Opens, closes and cancels are few, so they are gathered per channel (per connection,
    per consumer) and looked up from broadcast arrays; only the settle needs a window
    over the bulk rows (deliveries and settles), one shuffle and one sort. Windows for
    the epochs and the closes would cost a sort of every row each."""
    ops = h["client_ops"]
    life = lifecycle_ops(h)
    kind, ts = F.col("kind"), F.col("ts_ns")
    opens = (life.where((kind == "channel_open") & _has_chan())
             .groupBy("conn_id", "channel_id")
             .agg(F.collect_list(F.struct(*ORDER)).alias("_opens")))
    err = F.col("error").isNotNull()
    end = F.struct(ts.alias("ts"), err.alias("err"))
    conn_ends = (life.where((kind == "conn_close") & F.col("conn_id").isNotNull())
                 .groupBy("conn_id").agg(F.collect_list(end).alias("_conn_ends")))
    chan = ["conn_id", "channel_id", "epoch"]
    tag = F.coalesce(F.col("consumer_tag"), F.lit("")).alias("_tag")
    rare = _with_epoch(life.where(kind.isin("channel_close", "cancel") & _has_chan()), opens)
    chan_ends = (rare.where(kind == "channel_close").groupBy(*chan)
                 .agg(F.collect_list(end).alias("_chan_ends")))
    cancels = (rare.where(kind == "cancel").groupBy(*chan, tag)
               .agg(F.collect_list(F.struct(ts.alias("ts"))).alias("_cancels")))
    bulk = ops.where(kind.isin("deliver", "get_ok", *SETTLE_KINDS)).select(
        *DELIVERY_COLUMNS, "requeue", tag)
    rows = (_with_epoch(bulk, opens)
            .join(F.broadcast(conn_ends), "conn_id", "left")
            .join(F.broadcast(chan_ends), chan, "left")
            .join(F.broadcast(cancels), [*chan, "_tag"], "left"))
    conn_end = _first_at_or_after("_conn_ends")
    chan_end = _first_at_or_after("_chan_ends")
    err_end = F.least(_first_at_or_after("_conn_ends", _abnormal),
                      _first_at_or_after("_chan_ends", _abnormal))
    has_chan = F.col("conn_id").isNotNull() & F.col("epoch").isNotNull()
    settle = F.when(kind.isin(*SETTLE_KINDS), F.struct(
        ts.alias("s_ts_ns"), F.col("emitter").alias("s_emitter"), F.col("seq").alias("s_seq"),
        kind.alias("s_kind"), F.col("requeue").alias("s_requeue"), err_end.alias("s_err_end")))
    d = (rows.select(*DELIVERY_COLUMNS, "epoch",
                     F.min(settle).over(_at_or_after(*chan, "delivery_tag")).alias("_settle"),
                     F.when(F.col("conn_id").isNotNull(), conn_end).alias("_conn_end"),
                     F.when(has_chan, F.least(chan_end, _first_at_or_after("_cancels")))
                     .alias("_chan_end"),
                     F.when(has_chan, _first_at_or_after("_cancels")).alias("_cancel"))
         .where(kind.isin("deliver", "get_ok")))
    s = F.when(has_chan & F.col("delivery_tag").isNotNull(), F.col("_settle"))
    end_ts = F.least("_conn_end", "_chan_end")
    settle_kind = s["s_kind"]
    is_ack = F.coalesce(settle_kind == "ack", F.lit(False))
    outcome = (F.when(settle_kind == "ack", "ok")
               .when(settle_kind.isNotNull() & (s["s_requeue"] == F.lit(False)), "dropped")
               .when(settle_kind.isNotNull(), "returned")
               .when(end_ts.isNotNull(), "returned")
               .otherwise("open"))
    grace_end = s["s_ts_ns"] + F.lit(p.ack_grace_ns)
    ambiguous = is_ack & (F.coalesce(s["s_err_end"] <= grace_end, F.lit(False))
                          | F.coalesce(F.col("_cancel") <= grace_end, F.lit(False)))
    return d.select(
        *DELIVERY_COLUMNS, "epoch",
        outcome.alias("outcome_d"),
        ambiguous.alias("ambiguous"),
        F.coalesce(s["s_ts_ns"], end_ts).alias("release_ts"),
        F.when(is_ack, s["s_ts_ns"]).alias("ok_ts"),
        (settle_kind.isNull() & end_ts.isNotNull()).alias("by_end"),
    )


def consumer_key(prefix: str = "") -> Column:
    return F.concat_ws("/", F.col(prefix + "conn_id"), F.col(prefix + "channel_id").cast("string"),
                       F.coalesce(F.col(prefix + "consumer_tag"), F.lit("")))


def chan_key() -> Column:
    return F.concat_ws("/", F.col("conn_id"), F.col("channel_id").cast("string"))


def first_attempt() -> Column:
    return (~F.coalesce(F.col("redelivered"), F.lit(False))
            & (F.coalesce(F.col("delivery_count"), F.lit(0)) == 0))


def deliveries(h: History, p: Params) -> DataFrame:
    """Every `deliver`/`get_ok` with outcome, ambiguity, release and ok times, and
    `by_end`: returned unsettled by its consumer's end (channel or connection closed,
    consumer cancelled), not by a settle."""
    return h.cached(f"deliveries/{p.ack_grace_ns}", lambda: _deliveries(h, p))


#: the replica rows of a log index: what was applied, decided and sent there
INDEX_KINDS = ("applied", "service_queue", "local_delivery")
#: the replica rows a run records by the million (several per message); every other
#: kind is rare
BULK_REPLICA_KINDS = (*INDEX_KINDS, "settled")


#: the columns of `rare_replica_rows`: every one a check or the metrics read from them
RARE_REPLICA_COLUMNS = ("emitter", "seq", "ts_ns", "kind", "queue", "server", "raft_term",
                        "raft_index", "msg_id", "leader", "members", "extra", "node")


def rare_replica_rows(h: History) -> DataFrame:
    """The replica rows of every kind but `BULK_REPLICA_KINDS`, cached: leader elections,
    recoveries, DLX worker and discard rows. Several checks look these up; each lookup
    on `replica_events` itself would read all of it again.

    Only `RARE_REPLICA_COLUMNS` are kept. Finding the rare rows reads every replica
    row, and Parquet decodes each column it is asked for in every row, before the
    filter: at 10M events building them took 6.1-6.9 s against 11.2 s with all 24."""
    return h.cached("replica_rare", lambda: h["replica_events"]
                    .where(~F.col("kind").isin(*BULK_REPLICA_KINDS))
                    .select(*RARE_REPLICA_COLUMNS))


def message_positions(h: History) -> DataFrame:
    """(queue, msg_id, pos, pos_last, settled_at, decided_last): where in its queue's log
    each message was enqueued, settled and handed out, from one scan and one shuffle of
    the replica rows, cached. `enqueue_pos` and `settles` are its two halves.

    Why one aggregation: both halves key by `(queue, msg_id)`, and a message's enqueue,
    hand-outs and settle sit in the same member's file, so the partial aggregation folds
    them into one row before the shuffle. Two aggregations read every replica row twice
    and shuffle each message twice (at 10M events, warm: 2.7 s against 1.8 + 1.7 s)."""
    def build() -> DataFrame:
        kind = F.col("kind")
        idx = F.col("raft_index")
        enqueued = (kind == "applied") & (F.col("cmd_type") == "enqueue")
        settled = kind == "settled"
        decided = kind.isin("service_queue", "local_delivery")
        return (h["replica_events"]
                .where((enqueued | settled | decided) & F.col("msg_id").isNotNull())
                .groupBy("queue", "msg_id")
                .agg(F.min(F.when(enqueued, idx)).alias("pos"),
                     F.max(F.when(enqueued, idx)).alias("pos_last"),
                     F.min(F.when(settled, idx)).alias("settled_at"),
                     F.max(F.when(decided, idx)).alias("decided_last")))
    return h.cached("message_positions", build)


def enqueue_pos(h: History) -> DataFrame:
    """(queue, msg_id, pos, pos_last): the lowest and the highest raft index at which
    an enqueue of the message was applied; they differ when the queue took it twice."""
    return (message_positions(h).where(F.col("pos").isNotNull())
            .select("queue", "msg_id", "pos", "pos_last"))


def settles(h: History) -> DataFrame:
    """(queue, msg_id, settled_at, decided_last): for each message a consumer's settle
    removed from a queue, the index of its first applied settle and the highest index at
    which the queue handed it out (`service_queue` or `local_delivery`, on any member).
    A message decided after its settle was delivered beyond redelivery (the replica
    form of total-queue's check); every member records both, so one member's lost rows
    hide nothing."""
    return (message_positions(h).where(F.col("settled_at").isNotNull())
            .select("queue", "msg_id", "settled_at", "decided_last"))


def dark_intervals(h: History) -> DataFrame:
    """Where a replica's history is missing (docs/analysis.md, "Missing node data").

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
    # The few points that open a hole (kills, recoveries) cut each server's rows into
    # segments; one aggregation per segment (its last row, its highest send) replaces
    # windows over every replica row, and only servers with such points are read.
    rep = h["replica_events"].where(F.col("server").isNotNull())
    key = ("ts_ns", "is_kill", "seq")
    points = rare_replica_rows(h).where(
        (F.col("kind") == "recovered") & F.col("server").isNotNull()).select(
        "queue", "server", "ts_ns", F.lit(False).alias("is_kill"), "seq")
    kills = (h["nemesis_events"].where((F.col("kind") == "start") & (F.col("fault") == "kill"))
             .select(F.explode("targets").alias("node"), "ts_ns"))
    killed = sorted({r["node"] for r in kills.select("node").distinct().collect()
                     if r["node"] is not None})
    if killed:  # the servers of killed nodes (nemesis events are few: read them first)
        servers = rep.where(F.col("node").isin(killed)).select("queue", "server", "node") \
            .distinct()
        points = points.unionByName(kills.join(servers, "node").select(
            "queue", "server", "ts_ns", F.lit(True).alias("is_kill"),
            F.lit(-1).cast("long").alias("seq")))
    pk = F.struct(*key)
    per_server = points.groupBy("queue", "server").agg(
        F.array_sort(F.collect_list(pk)).alias("pks"))
    if per_server.isEmpty():  # no kill, no recovery: no hole, and no replica row to read
        rep = rep.limit(0)
    # segment of a recorded row: how many points are at or before it
    row_key = F.struct("ts_ns", F.lit(False).alias("is_kill"), "seq")
    segs = (rep.join(F.broadcast(per_server), ["queue", "server"])
            .select("queue", "server", "kind", "ts_ns", "seq", "raft_index",
                    F.size(F.filter("pks", lambda k: k <= row_key)).alias("seg"))
            .groupBy("queue", "server", "seg")
            .agg(F.max(F.struct("ts_ns", "seq", "kind", "raft_index")).alias("last"),
                 F.max(F.when(F.col("kind") == "local_delivery", F.col("raft_index")))
                 .alias("sent")))
    # rows strictly before the point sit in the segments up to its position
    pos = F.size(F.filter("pks", lambda k: k < pk))
    after = F.filter("pks", lambda k: (k > pk) & ~k["is_kill"])
    marked = (points.join(per_server, ["queue", "server"])
              .select("queue", "server", "ts_ns", "is_kill", pos.alias("pos"),
                      F.array_min(after)["ts_ns"].alias("next_recovered")))
    holes = (marked.join(segs.withColumnRenamed("queue", "s_queue")
                         .withColumnRenamed("server", "s_server"),
                         (F.col("s_queue") == F.col("queue"))
                         & (F.col("s_server") == F.col("server"))
                         & (F.col("seg") <= F.col("pos")))
             .groupBy("queue", "server", "ts_ns", "is_kill", "pos", "next_recovered")
             .agg(F.max("last").alias("prev"), F.max("sent").alias("sent_upto")))
    return holes.select(
        "queue", "server", F.col("prev.ts_ns").alias("dark_from"),
        F.when(F.col("is_kill"), F.coalesce("next_recovered", F.lit(BIG)))
        .otherwise(F.col("ts_ns")).alias("dark_to"),
        "sent_upto",
        F.when(F.col("prev.kind").isin("applied", "service_queue"), F.col("prev.raft_index"))
        .alias("cut_index")).distinct()


#: suspect blocks up to this many are broadcast to pick their rows out of the bulk
SUSPECT_BROADCAST = 50_000


def queue_servers(h: History) -> DataFrame:
    """(queue, server): every server that recorded a replica row for the queue, cached
    (`members` and `post_drain_emptiness` start from it)."""
    return h.cached("queue_servers", lambda: h["replica_events"]
                    .where(F.col("server").isNotNull()).select("queue", "server").distinct())


def members(h: History) -> DataFrame:
    """(queue, consumer_node, member): the server of each queue on each node (the
    smallest name when several), the sender a consumer on that node should get.

    The distinct `(queue, server)` pairs are found first (`queue_servers`, a hash
    aggregation), and the smallest name is taken over those few rows: a `min` of
    strings cannot be kept in a hash aggregation's fixed-width buffer, so Spark would
    sort every replica row for it (10 s against 3 s at 10M events). It is written
    `min_by(server, server)` because Spark's optimiser drops a `distinct` below a plain
    `min` as redundant."""
    return h.cached("members", lambda: queue_servers(h)
                    .groupBy("queue", F.substring_index("server", "@", -1)
                             .alias("consumer_node"))
                    .agg(F.min_by("server", "server").alias("member")))


def membership(h: History) -> DataFrame:
    """(queue, consumer_node, member, m_from, m_to): the server of each queue on each node
    for the log indexes `m_from` <= i < `m_to` (`m_to` null: to the end), the sender a
    consumer on that node should get for a decision at index i (the `local_delivery` check).

    A queue's membership changes at the index of each cluster change (`applied` rows
    of `cmd_type` cluster_change, and `snapshot_installed`, with their `members`); before
    the first, it is the membership its first recorded leader was elected with. A queue
    whose record names no members at all (histories recorded without them) keeps the
    servers seen for it (`members`), at every index."""
    return h.cached("membership", lambda: _membership(h))


def _membership(h: History) -> DataFrame:
    kind = F.col("kind")
    rare = rare_replica_rows(h).where(F.col("members").isNotNull())
    first_leader = (rare.where(kind == "leader_elected").groupBy("queue")
                    .agg(F.min_by("members", F.struct("ts_ns", "seq")).alias("members"))
                    .select("queue", F.lit(0).cast("long").alias("m_from"), "members"))
    changes = (h["replica_events"].where((kind == "applied") & (F.col("cmd_type")
                                                               == "cluster_change"))
               .select("queue", "raft_index", "members")
               .unionByName(rare.where(kind == "snapshot_installed")
                            .select("queue", "raft_index", "members"))
               .where(F.col("members").isNotNull())
               .groupBy("queue", F.col("raft_index").alias("m_from"))
               .agg(F.min("members").alias("members")))
    # a change at index 0 or below cannot come after the first election: it wins
    points = (first_leader.join(changes.where(F.col("m_from") <= 0), ["queue", "m_from"],
                                "left_anti").unionByName(changes))
    w = Window.partitionBy("queue").orderBy("m_from")
    recorded = (points.withColumn("m_to", F.lead("m_from").over(w))
                .select("queue", "m_from", "m_to", F.explode("members").alias("member"))
                .groupBy("queue", F.substring_index("member", "@", -1).alias("consumer_node"),
                         "m_from", "m_to")
                .agg(F.min("member").alias("member")))
    static = (members(h).join(points.select("queue").distinct(), "queue", "left_anti")
              .select("queue", "consumer_node", "member",
                      F.lit(None).cast("long").alias("m_from"),
                      F.lit(None).cast("long").alias("m_to")))
    return recorded.select("queue", "consumer_node", "member", "m_from", "m_to") \
        .unionByName(static)


def member_at(rows: DataFrame, h: History) -> DataFrame:
    """`rows` (with queue, consumer_node, raft_index) with the column `member`: the
    queue's server on the consumer's node at that index, null when there is none."""
    m = membership(h)
    return rows.join(F.broadcast(m.withColumnRenamed("queue", "_mq")
                                 .withColumnRenamed("consumer_node", "_mn")),
                     (F.col("queue") == F.col("_mq")) & (F.col("consumer_node") == F.col("_mn"))
                     & (F.col("m_from").isNull() | (F.col("raft_index") >= F.col("m_from")))
                     & (F.col("m_to").isNull() | (F.col("raft_index") < F.col("m_to"))),
                     "left").drop("_mq", "_mn", "m_from", "m_to")


def term_leaders(h: History) -> DataFrame:
    """(l_queue, l_term, term_leader): the leader elected for each term (the smallest
    name when several were)."""
    return (rare_replica_rows(h).where(F.col("kind") == "leader_elected")
            .groupBy(F.col("queue").alias("l_queue"), F.col("raft_term").alias("l_term"))
            .agg(F.min("leader").alias("term_leader")))


def block_summary(h: History) -> DataFrame:
    """One row per `(queue, block)` of the replica log, a block being `LOG_BLOCK`
    consecutive indexes (`log_block`): `applied` (how many `applied` rows), `decisions`
    (distinct service-queue decisions `(msg_id, attempt, consumer_key, consumer_node)`,
    null in a suspect block) and `suspect`: the block may hold a violation of replica
    determinism or local delivery, or a send counted as resent.

    Why blocks: the rows of one log index come from every member's file, so a summary
    per index shuffles nearly every replica row (6.1M of 7.75M at 10M events). Each
    member's rows of a block fold into one row before the shuffle instead, and the
    members' rows are compared after it: warm, at 10M events, 4.2-4.4 s against
    5.4-5.6 s.

    A block is clean when every server with an `applied` or `service_queue` row in it
    applied each index of one unbroken range exactly once (count, first and last
    index, and the sums of the offsets and of their squares match the range), all of
    them applied the same `(raft_index, raft_term, cmd_type, cmd_digest, state_digest)`
    and made the same decisions, and the sends in the block are exactly one per
    decision, each from its expected sender: the member on the consumer's node, else
    the leader of the decision's term. Multisets are compared by the count and the sum
    of a 64-bit hash of each element (`xxhash64`, summed as two 32-bit halves so that no
    sum overflows): a collision could only make a disagreeing block look clean, with a
    probability of about 2^-64. Sums cannot see an element twice on both sides, so a
    server's repeated send of a decision marks its block suspect by itself; a decision
    recorded twice then has one send too few. A decision for the leader names the
    leader of its own row's term, so a block is suspect too where that term may not be
    the one the exact rules take (the applied rows' at its index). Only suspect blocks
    go through `per_index`, whose array rules decide exactly what is reported."""
    return h.cached("block_summary", lambda: _block_summary(h))


#: consecutive log indexes summarised together by `block_summary`: at 10M events, warm,
#: 64, 128 and 512 cost about the same (2.6-3.0 s, before the leader-term check), and a
#: small block leaves few indexes to the exact rules where one is suspect
LOG_BLOCK = 64
_LOW32 = 0xFFFFFFFF
#: a term from this one on (or none) makes a block with decisions for the leader
#: suspect (`block_summary` keeps sums of squared terms, which must not overflow)
_TERM_CAP = 1 << 20


def log_block(idx: Column) -> Column:
    """The `block_summary` block of log index `idx`."""
    return F.floor(idx / F.lit(LOG_BLOCK)).cast("long")


def _hash_present(*cols: str | Column) -> Column:
    """A 64-bit hash of `cols` that tells a null from a value in every position."""
    cs = [F.col(c) if isinstance(c, str) else c for c in cols]
    return F.xxhash64(*cs, *[c.isNull() for c in cs])


def _hash_sum(name: str, hashed: Column) -> list[Column]:
    """The sum of a group's 64-bit hashes as two sums of 32-bit halves, `name_l` and
    `name_h` (no overflow below 2^31 rows)."""
    return [F.sum(hashed.bitwiseAND(F.lit(_LOW32))).alias(f"{name}_l"),
            F.sum(F.shiftrightunsigned(hashed, 32)).alias(f"{name}_h")]


def _block_summary(h: History) -> DataFrame:
    # One scan and one shuffle of the bulk replica rows. (1) per (queue, block,
    # server): the server's applied rows and decisions, with the sends it was expected
    # to make for them; a send is grouped by its key too, which shows a repeated send;
    # (2) per (queue, block): the servers compared, the sends against the decisions.
    kind = F.col("kind")
    applied, decided, sent = kind == "applied", kind == "service_queue", kind == "local_delivery"
    idx = F.col("raft_index")
    block = log_block(idx)
    leaders = term_leaders(h)
    expected = F.coalesce("member", "term_leader")
    rows = (h["replica_events"].where(kind.isin(*INDEX_KINDS))
            .transform(lambda rows: member_at(rows, h))
            .join(F.broadcast(leaders), decided & (F.col("queue") == F.col("l_queue"))
                  & (F.col("raft_term") == F.col("l_term")), "left")
            .select("queue", "server", block.alias("block"),
                    F.when(sent, idx).alias("s_idx"), F.when(sent, F.col("msg_id")).alias("s_msg"),
                    F.when(sent, F.col("attempt")).alias("s_attempt"),
                    applied.alias("a"), decided.alias("d"), sent.alias("s"),
                    F.when(applied, idx - block * LOG_BLOCK).alias("off"),
                    F.when(decided, idx - block * LOG_BLOCK).alias("d_off"),
                    F.when(applied | decided, F.col("raft_term")).alias("term"),
                    F.when(applied, _hash_present("raft_index", "raft_term", "cmd_type",
                                                  "cmd_digest", "state_digest")).alias("log_x"),
                    F.when(decided, _hash_present("raft_index", "msg_id", "attempt",
                                                  "consumer_key", "consumer_node")).alias("dec_x"),
                    F.when(decided, _hash_present("raft_index", "msg_id", "attempt", expected))
                    .alias("exp_x"),
                    F.when(sent, _hash_present("raft_index", "msg_id", "attempt", "server"))
                    .alias("snd_x"),
                    ((decided | sent) & (F.col("msg_id").isNull() | F.col("attempt").isNull()
                                         | (decided & expected.isNull()))).alias("odd_row"),
                    ((applied | decided) & ~F.coalesce(F.col("raft_term").between(
                        0, _TERM_CAP - 1), F.lit(False))).alias("bad_term"),
                    (decided & F.col("member").isNull()).alias("by_leader")))
    a, d, off, term = F.col("a"), F.col("d"), F.col("off"), F.col("term")
    per_server = rows.groupBy("queue", "block", "server", "s_idx", "s_msg", "s_attempt").agg(
        F.count(F.when(a, 1)).alias("n_log"), F.min("off").alias("lo"), F.max("off").alias("hi"),
        F.sum("off").alias("sum1"), F.sum(off * off).alias("sum2"),
        # terms: see `terms_known` below
        F.min(F.when(a, term * 256 + off)).alias("a_lo_code"),
        F.max(F.when(a, term * 256 + 255 - off)).alias("a_hi_code"),
        F.sum(F.when(a, term)).alias("a_t1"), F.sum(F.when(a, term * term)).alias("a_t2"),
        F.max(F.when(d, (_TERM_CAP - term) * 256 + F.col("d_off"))).alias("d_lo_code"),
        F.min(F.when(d, (_TERM_CAP - term) * 256 + F.col("d_off"))).alias("d_hi_code"),
        F.min("d_off").alias("d_first"), F.max("d_off").alias("d_last"),
        F.sum(F.when(d, term)).alias("d_t1"), F.sum(F.when(d, term * term)).alias("d_t2"),
        F.count(F.when(d, 1)).alias("n_dec"), F.count(F.when(F.col("s"), 1)).alias("n_snd"),
        F.count(F.when(F.col("odd_row"), 1)).alias("n_odd"),
        F.count(F.when(F.col("by_leader"), 1)).alias("n_by_leader"),
        F.count(F.when(F.col("bad_term"), 1)).alias("n_bad_term"),
        *_hash_sum("log", F.col("log_x")), *_hash_sum("dec", F.col("dec_x")),
        *_hash_sum("exp", F.col("exp_x")), *_hash_sum("snd", F.col("snd_x")))
    n, lo, hi = F.col("n_log"), F.col("lo"), F.col("hi")
    # offsets lo..hi each once: their count, sum and sum of squares are the range's
    unbroken = F.coalesce((n == 0) | (
        (hi - lo + 1 == n) & (F.col("sum1") * 2 == n * (lo + hi))
        & (F.col("sum2") * 6 == hi * (hi + 1) * (2 * hi + 1) - (lo - 1) * lo * (2 * lo - 1))),
        F.lit(False))
    # A decision for the leader names the leader of its own row's term; the exact rules
    # take the term of the index's applied rows. They are the same when the server's
    # applied terms are one step (`at_lo` below offset `a2`, `at_hi` from it on: a
    # `(term, offset)` minimum and maximum give the three, and the sums of the terms and
    # of their squares confirm that no term lies between or out of place) and each
    # decision's term is the step's at its offset (the lowest and the highest decision
    # terms, with their last and first offsets, and again the sums). `(t - lo)(hi - t)`
    # is never negative for a term between the two, so its sum is 0 only when every
    # term is one of them.
    at_lo = F.floor(F.col("a_lo_code") / 256)
    at_hi = F.floor(F.col("a_hi_code") / 256)
    a2 = 255 - F.col("a_hi_code") % 256
    dt_lo = _TERM_CAP - F.floor(F.col("d_lo_code") / 256)
    dt_hi = _TERM_CAP - F.floor(F.col("d_hi_code") / 256)
    last_lo, first_hi = F.col("d_lo_code") % 256, F.col("d_hi_code") % 256
    nd = F.col("n_dec")
    applied_step = ((F.col("a_t2") == (at_lo + at_hi) * F.col("a_t1") - n * at_lo * at_hi)
                    & (F.col("a_t1") == at_lo * n + (at_hi - at_lo) * (hi - a2 + 1)))
    decided_step = (
        (F.col("d_first") >= lo) & (F.col("d_last") <= hi)
        & (F.col("d_t2") == (dt_lo + dt_hi) * F.col("d_t1") - nd * dt_lo * dt_hi)
        & (((dt_lo == dt_hi) & (((dt_lo == at_hi) & (first_hi >= a2))
                                | ((dt_lo == at_lo) & (last_lo < a2))))
           | ((dt_lo < dt_hi) & (dt_lo == at_lo) & (dt_hi == at_hi) & (last_lo < a2)
              & (first_hi >= a2))))
    terms_known = (F.col("n_by_leader") == 0) | F.coalesce(
        (F.col("n_bad_term") == 0) & applied_step & decided_step, F.lit(False))
    present = (n + F.col("n_dec")) > 0
    compared = ["n_log", "log_l", "log_h", "n_dec", "dec_l", "dec_h", "exp_l", "exp_h"]

    def across(c: str) -> list[Column]:
        v = F.when(present, F.coalesce(F.col(c), F.lit(0)))
        return [F.min(v).alias(f"{c}_lo"), F.max(v).alias(f"{c}_hi")]

    blocks = per_server.groupBy("queue", "block").agg(
        F.sum("n_log").alias("applied"),
        *[x for c in compared for x in across(c)],
        F.sum("n_snd").alias("n_snd"), F.sum("snd_l").alias("snd_l"),
        F.sum("snd_h").alias("snd_h"),
        F.max(F.col("s_idx").isNotNull() & (F.col("n_snd") > 1)).alias("resent"),
        F.max(F.when(present, ~unbroken | ~terms_known)).alias("uneven"),
        F.sum("n_odd").alias("n_odd"))
    agree = [F.col(f"{c}_lo") == F.col(f"{c}_hi") for c in compared]

    def zero(c: str) -> Column:
        return F.coalesce(F.col(c), F.lit(0))

    sends_match = [zero("n_snd") == zero("n_dec_lo"), zero("snd_l") == zero("exp_l_lo"),
                   zero("snd_h") == zero("exp_h_lo")]
    clean = F.lit(True)
    for cond in [*agree, *sends_match, ~F.col("resent"), ~F.coalesce("uneven", F.lit(False)),
                 F.col("n_odd") == 0]:
        clean = clean & cond
    clean = F.coalesce(clean, F.lit(False))
    return blocks.select("queue", "block", F.col("applied"),
                         F.when(clean, zero("n_dec_lo")).alias("decisions"),
                         (~clean).alias("suspect"))


def per_index(h: History) -> DataFrame:
    """One row per `(queue, raft_index)` of the suspect blocks of `block_summary`, shared
    by replica determinism and local delivery: what every server applied there and the
    decisions and sends made for it, gathered by one aggregation of those indexes'
    replica rows.

    Columns: `applied` (how many `applied` rows), `applied_ts` / `term` (smallest over
    the servers), `logs` (distinct `(raft_term, cmd_type, cmd_digest)`), `states`
    (distinct `state_digest`), `servers` (structs `s`: every server with an `applied`
    or `service_queue` row), `decisions` (`service_queue` rows: server, msg_id,
    attempt, consumer_key, consumer_node) and `sends` (`local_delivery` rows: msg_id,
    attempt, server, ts_ns, sent_key, and `incarnation`, how many times the sender had
    recovered before the send).
    """
    return h.cached("per_index", lambda: _per_index(h))


def _per_index(h: History) -> DataFrame:
    rep = h["replica_events"]
    kind = F.col("kind")
    rows = rep.where(kind.isin(*INDEX_KINDS))
    suspects = block_summary(h).where(F.col("suspect")).select(
        F.col("queue").alias("_sq"), "block")
    n = suspects.count()
    if n == 0:  # a clean log: nothing to gather (the empty plan reads no file)
        rows = rows.limit(0)
    else:
        rows = rows.join(F.broadcast(suspects) if n <= SUSPECT_BROADCAST else suspects,
                         (F.col("queue") == F.col("_sq"))
                         & (log_block(F.col("raft_index")) == F.col("block")),
                         "left_semi")
    recoveries = (rare_replica_rows(h).where(kind == "recovered").groupBy("queue", "server")
                  .agg(F.collect_list("ts_ns").alias("_recovered")))
    rows = rows.join(F.broadcast(recoveries), ["queue", "server"], "left")
    applied = kind == "applied"
    decided = kind == "service_queue"
    sent = kind == "local_delivery"
    ts = F.col("ts_ns")
    incarnation = F.coalesce(F.size(F.filter("_recovered", lambda t: t <= ts)), F.lit(0))
    return rows.groupBy("queue", "raft_index").agg(
        F.count(F.when(applied, 1)).alias("applied"),
        F.min(F.when(applied, ts)).alias("applied_ts"),
        F.min(F.when(applied, F.col("raft_term"))).alias("term"),
        F.collect_set(F.when(applied, F.struct("raft_term", "cmd_type", "cmd_digest")))
        .alias("logs"),
        F.collect_set(F.when(applied, F.col("state_digest"))).alias("states"),
        F.collect_set(F.when(applied | decided, F.struct(F.col("server").alias("s"))))
        .alias("servers"),
        F.collect_list(F.when(decided, F.struct("server", "msg_id", "attempt", "consumer_key",
                                                "consumer_node"))).alias("decisions"),
        F.collect_list(F.when(sent, F.struct("msg_id", "attempt", "server", "ts_ns",
                                             F.col("consumer_key").alias("sent_key"),
                                             incarnation.alias("incarnation"))))
        .alias("sends"))
