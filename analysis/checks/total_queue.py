"""Jepsen's total-queue check adapted to AMQP.

Every confirmed message must be settled-ok somewhere once the queues are drained;
nothing may be delivered that was never published; and no message may be delivered
again beyond redelivery. Where the queue's members recorded their settles, that is
judged by the replicas (the authoritative form): the queue must never hand a message
out at an index above the index of its applied settle. Elsewhere (histories without
`settled` rows) every delivery after a message's first must be explained by a return
or by an ack that may have been lost; for replica-judged queues that client figure is
still counted (`client_unexplained_redeliveries`, info).
Message ids are unique per run, so a DLX source and its target are checked together:
a message is followed along its dead-letter chain (a `dlx_discard` from a queue, or a
delivery from its target, moves it on) and judged in the last queue it reached. There
it may have been *dropped* rather than lost: rejected without requeue, or returned past
the queue's delivery limit, by a queue with no dead-letter target.

Everything about a message is gathered by one aggregation keyed by `msg_id` (its
publishes, completions, deliveries and discards): fixed-width counts for the messages
whose verdict they decide, arrays read with array functions for the others (the
suspects: several publishes, a queue off its dead-letter chain, a changed body), and
a per-message frame from which the counts and the violation rows are both taken.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from analysis import model, queue_fate
from analysis.checks.common import (
    CheckResult,
    count_rows,
    deliveries,
    lit_map,
    no_violations,
    rare_replica_rows,
    settles,
    total,
    vrows,
)
from analysis.load import History
from analysis.model import Params

CHECK = "total_queue"
DELIVERY = ("queue", "outcome_d", "ambiguous", "delivery_count", "body_digest", "ts_ns",
            "conn_id", "channel_id", "by_end")
#: a history of at most this many rows (by its Parquet footers) reads every message
#: with the exact rules: there a check's cost is mostly per query, which the summary
#: adds (50k events, the whole analysis: 16.3-16.5 s with it against 15.3-15.5 s)
SUMMARY_MIN_ROWS = 3_000_000
#: a message's bad deliveries (`_verdict`)
BAD_TYPE = ("array<struct<violation:string,queue:string,ts_ns:bigint,conn_id:string,"
            "channel_id:int>>")


def messages(h: History, p: Params) -> DataFrame:
    """One row per message id seen in a publish, completion, delivery or discard: the
    verdicts of this check, and the queue each message was first published to, which
    channel FIFO reads too (from here instead of aggregating every publish again).

    Most messages are read from fixed-width aggregates (`_summary`, cached with their
    verdicts): one publish, and every delivery and dead letter along its publish
    queue's dead-letter chain. Such a message's verdict needs counts per chain position
    only, and a hash aggregation by `msg_id` keeps those in fixed-width buffers.
    Gathering every message's publishes and deliveries into arrays instead (an object
    aggregation, which Spark sorts by `msg_id` past 128 keys per task) is left to the
    others, the suspects: the exact rules of `_exact`, on their rows only (cached). At
    10M events, warm, building it took 3.0-3.1 s against 3.4 s with arrays for every
    message; more is not saved because the summary is cached too. A history of known
    size up to `SUMMARY_MIN_ROWS` rows takes the exact rules for every message."""
    grace = p.ack_grace_ns
    rows = _message_rows(h, p)
    if h.footer_rows is not None and sum(h.footer_rows.values()) <= SUMMARY_MIN_ROWS:
        return h.cached(f"total_queue/{grace}", lambda: _exact(rows, h.meta))
    chains = _Chains(h.meta)
    summary = h.cached(f"total_queue_summary/{grace}", lambda: _summary(rows, chains).select(
        "msg_id", "clean", *_fast_verdict(chains, h.meta)))
    suspects = summary.where(~F.col("clean")).select(F.col("msg_id").alias("_sid"))
    if suspects.isEmpty():  # nothing for the exact rules: their plan reads no file
        exact = _exact(rows.limit(0), h.meta)
    else:
        exact = h.cached(f"total_queue_exact/{grace}", lambda: _exact(rows.join(
            F.broadcast(suspects), F.col("msg_id").eqNullSafe(F.col("_sid")), "left_semi"),
            h.meta))
    fast = summary.where(F.col("clean")).withColumn("bad", F.array().cast(BAD_TYPE))
    return fast.select(*exact.columns).unionByName(exact)


def run(h: History, p: Params) -> CheckResult:
    msgs = _with_excuse(h, messages(h, p))
    drained = h.drained
    settled = settles(h) if h.has("replica_events") else None
    # queues whose members recorded settles are judged by the replica form; the client
    # form's figure for them stays as an info count
    per_queue = ([] if settled is None else settled.groupBy("queue").agg(
        total(F.col("decided_last") > F.col("settled_at")).alias("late")).collect())
    by_replicas = sorted(r["queue"] for r in per_queue)
    unexplained = F.col("has_pub") & (F.col("k") > 0) & (F.col("extra") > 0)
    replica_judged = F.col("pub_queue").isin(by_replicas) if by_replicas else F.lit(False)
    dup = unexplained & ~replica_judged
    lost = F.col("has_pub") & F.lit(drained) & F.col("conf") & (F.col("oks") == 0) \
        & ~F.col("dropped") & F.col("why").isNull()
    lost_kind = F.when(F.col("k_end") > 0, "lost_delivered_never_acked") \
        .otherwise("lost_never_delivered")
    bad = msgs.where(F.size("bad") > 0).select("msg_id", F.explode("bad").alias("b"))
    violations = (
        vrows(bad, CHECK, F.col("b.violation"), queue=F.col("b.queue"), msg_id=F.col("msg_id"),
              key=F.concat_ws("/", F.col("b.conn_id"), F.col("b.channel_id").cast("string")),
              ts_ns=F.col("b.ts_ns"))
        .unionByName(vrows(msgs.where(dup), CHECK, "duplicated_beyond_redelivery",
                           queue=F.col("pub_queue"), msg_id=F.col("msg_id"),
                           detail=F.col("extra")))
        .unionByName(_decided_after_settle(settled, h))
        .unionByName(vrows(msgs.where(lost), CHECK, lost_kind, queue=F.col("end_queue"),
                           msg_id=F.col("msg_id"),
                           detail=F.when(F.col("end_queue") != F.col("pub_queue"),
                                         F.concat(F.lit("dead-lettered from "),
                                                  F.col("pub_queue")))))
    )
    pub = F.col("has_pub")
    why = F.coalesce(F.col("why"), F.lit(""))
    ok = pub & (F.col("oks") > 0)
    conf = pub & F.col("conf")
    nack = pub & F.col("nack") & ~F.col("conf")
    counts = count_rows(
        msgs,
        attempted=total(pub), confirmed=total(conf), nacked=total(nack),
        settled_ok=total(ok), duplicated=total(pub & (F.col("oks") > 1)),
        duplicated_beyond_redelivery=total(dup),
        client_unexplained_redeliveries=total(unexplained & replica_judged),
        recovered_nacked=total(ok & ~F.col("conf") & F.col("nack")),
        recovered_indeterminate=total(ok & ~F.col("conf") & ~F.col("nack")),
        lost=total(lost),
        lost_never_delivered=total(lost & (F.col("k_end") == 0)),
        lost_delivered_never_acked=total(lost & (F.col("k_end") > 0)),
        dead_lettered=total(pub & (F.col("end_queue") != F.col("pub_queue"))),
        dropped=total(pub & (F.col("oks") == 0) & (F.col("dropped") | (why == "dropped"))),
        **{count: total(pub & (F.col("oks") == 0) & ~F.col("dropped") & (why == name))
           for name, count in queue_fate.WHY.items() if name != "dropped"},
        deliveries=F.sum("n_deliveries"), unexpected=F.sum(F.size("bad")),
    )
    counts["indeterminate"] = counts["attempted"] - counts["confirmed"] - counts["nacked"]
    counts["duplicated_beyond_redelivery"] += sum(r["late"] or 0 for r in per_queue)
    status, note = model.total_queue_status(counts, drained, h.meta.drain_expected)
    # the violation rows: one per bad delivery, per duplicated and per lost message
    n = counts["unexpected"] + counts["duplicated_beyond_redelivery"] + counts["lost"]
    return CheckResult(CHECK, status, counts["attempted"], violations, counts, note,
                       violation_count=n)


def _with_excuse(h: History, msgs: DataFrame) -> DataFrame:
    """`msgs` with `why`: the first of `queue_fate`'s excuses a message meets, null for
    none. The message's own rows (a return, a queue's drop, a transient enqueue before
    its home node's kill) come from one small aggregation by `msg_id`; the rules about
    its queue (deleted, transient and gone with its node) from the few queue rows,
    collected to the driver and looked up by the queue it ended in."""
    facts = _facts(h)
    own = _own_excuses(h, facts)
    end = F.col("end_queue")
    if own is None:
        msgs = msgs.withColumn("_own", F.lit(None).cast("string"))
    else:
        msgs = msgs.join(own, "msg_id", "left")
    o = F.col("_own")
    deleted = end.isin(sorted(facts.deleted)) if facts.deleted else F.lit(False)
    lost_q = (end.isin(sorted(facts.lost_with_node)) if facts.lost_with_node
              else F.lit(False))
    why = (F.when(o.isin("unroutable", "dropped"), o)
           .when(F.coalesce(deleted, F.lit(False)), "queue_deleted")
           .when((o == "node_down") | F.coalesce(lost_q, F.lit(False)), "node_down"))
    return msgs.withColumn("why", F.when(~F.col("dropped"), why)).drop("_own")


def _facts(h: History) -> queue_fate.QueueFacts:
    if not h.has("queue_events"):
        return queue_fate.QueueFacts()
    rows = [r.asDict() for r in h["queue_events"]
            .where(F.col("kind").isin("queue_declared", "queue_deleted"))
            .select("kind", "queue", "node", "ts_ns", "durable", "exclusive").collect()]
    kills: list[tuple[str | None, int]] = []
    if h.has("nemesis_events"):
        kills = [(t, r["ts_ns"]) for r in h["nemesis_events"]
                 .where((F.col("kind") == "start") & (F.col("fault") == "kill"))
                 .select("targets", "ts_ns").collect() for t in r["targets"] or []]
    return queue_fate.queue_facts([r for r in rows if r["kind"] == "queue_declared"],
                                  [r for r in rows if r["kind"] == "queue_deleted"], kills)


def _own_excuses(h: History, facts: queue_fate.QueueFacts) -> DataFrame | None:
    """(msg_id, _own): the excuse a message's own rows give it, the first by
    `queue_fate`'s order (`unroutable`, `dropped`, `node_down`)."""
    parts = []
    if h.has("client_ops"):
        parts.append(h["client_ops"].where(F.col("kind") == "return")
                     .select("msg_id", F.lit(0).alias("_rank")))
    if h.has("queue_events"):
        q = h["queue_events"]
        parts.append(q.where(F.col("kind") == "queue_dropped")
                     .select("msg_id", F.lit(1).alias("_rank")))
        if facts.last_kill:
            kill = lit_map(facts.last_kill, "string", "bigint")[F.col("queue")]
            parts.append(q.where((F.col("kind") == "queue_enqueued")
                                 & (F.col("persistent") == F.lit(False))
                                 & (F.col("ts_ns") <= kill))
                         .select("msg_id", F.lit(2).alias("_rank")))
    if not parts:
        return None
    rows = parts[0]
    for part in parts[1:]:
        rows = rows.unionByName(part)
    names = F.array(*[F.lit(n) for n in ("unroutable", "dropped", "node_down")])
    return (rows.where(F.col("msg_id").isNotNull()).groupBy("msg_id")
            .agg(F.min("_rank").alias("_rank"))
            .select("msg_id", names[F.col("_rank")].alias("_own")))


def _decided_after_settle(settled: DataFrame | None, h: History) -> DataFrame:
    """The replica form's violations: a message the queue handed out again at an index
    above its settle's (detail: both indexes)."""
    if settled is None:
        return no_violations(h)
    late = settled.where(F.col("decided_last") > F.col("settled_at"))
    return vrows(late, CHECK, "duplicated_beyond_redelivery", queue=F.col("queue"),
                 msg_id=F.col("msg_id"), raft_index=F.col("decided_last"),
                 detail=F.concat(F.lit("decided at "), F.col("decided_last").cast("string"),
                                 F.lit(" after its settle at "),
                                 F.col("settled_at").cast("string")))


def _message_rows(h: History, p: Params) -> DataFrame:
    """A message's publishes, completions, deliveries and discards, one row each, with
    the columns of both `_summary` and `_exact`."""
    meta = h.meta
    ops = h["client_ops"]
    none = F.lit(None)
    pub_t = F.struct("ts_ns", "emitter", "seq", "queue", "body_digest")
    d = deliveries(h, p)
    pub_type = ops.select(pub_t.alias("x")).schema["x"].dataType
    del_type = d.select(F.struct(*DELIVERY).alias("x")).schema["x"].dataType

    def part(df: DataFrame, t: Column, pub: Column | None, dlv: Column | None,
             target: Column | None) -> DataFrame:
        # the queue a row puts the message in: a delivery's, a publish's, a discard's
        # target
        queue = F.col("queue") if target is None else target
        return df.select(
            "msg_id", t.alias("t"), (none if pub is None else pub).cast(pub_type).alias("pub"),
            (none if dlv is None else dlv).cast(del_type).alias("del"),
            (none if target is None else target).cast("string").alias("target"),
            queue.cast("string").alias("_q"),
            (F.col("body_digest") if target is None else none).cast("long").alias("_digest"),
            (F.col("outcome_d") if dlv is not None else none).cast("string").alias("_outcome"),
            (F.col("ambiguous") if dlv is not None else none).cast("boolean").alias("_amb"),
            (F.col("delivery_count") if dlv is not None else none).cast("int").alias("_count"),
            # 1 when the delivery's return (if it was returned) counts toward the limit
            (_counts(meta, F.col("by_end")) if dlv is not None else F.lit(0))
            .cast("int").alias("_counts"),
            (_in_dlx_queue(meta, queue) if dlv is not None else F.lit(False)).alias("_in_dlx"))

    rows = (part(ops.where(F.col("kind").isin("publish", "confirm", "pub_nack")), F.col("kind"),
                 F.when(F.col("kind") == "publish", pub_t), None, None)
            .unionByName(part(d, F.lit("deliver"), None, F.struct(*DELIVERY), None)))
    targets = {q: c["dlx_target"] for q, c in meta.queues.items() if c.get("dlx_target")}
    if targets:
        discards = rare_replica_rows(h).where(F.col("kind") == "dlx_discard")
        rows = rows.unionByName(part(discards, F.lit("dlx_discard"), None, None,
                                     lit_map(targets, "string", "string")[F.col("queue")]))
    return rows


class _Chains:
    """Each queue's place on a dead-letter chain: `root`, the chain's first queue (one
    no queue dead-letters into) by its number, and `depth`, its position after the root.
    A queue on no chain, or on several chains or places, has none: the messages that
    reach it are suspects. `MAX_DEPTH` bounds the positions counted."""

    MAX_DEPTH = 8

    def __init__(self, meta: model.RunConfig) -> None:
        targets = {q: c.get("dlx_target") for q, c in meta.queues.items()}
        roots = sorted(q for q in meta.queues if q not in set(targets.values()))
        places: dict[str, list[tuple[int, int]]] = {}
        self.names: dict[int, str] = {}
        for r, root in enumerate(roots):
            for depth, q in enumerate([root, *meta.dlx_chain(root)][:self.MAX_DEPTH + 1]):
                places.setdefault(q, []).append((r, depth))
                self.names[r * (self.MAX_DEPTH + 1) + depth] = q
        self.place = {q: at[0] for q, at in places.items() if len(at) == 1}
        self.depths = 1 + max((d for _, d in self.place.values()), default=0)

    def code(self, q: Column) -> Column:
        """Queue `q`'s place as one number (`root` * (`MAX_DEPTH` + 1) + `depth`), null
        off the chains: one lookup in a literal map, which Spark searches key by key."""
        codes = {k: r * (self.MAX_DEPTH + 1) + d for k, (r, d) in self.place.items()}
        return lit_map(codes, "string", "int")[q] if codes else F.lit(None).cast("int")

    @classmethod
    def root(cls, code: Column) -> Column:
        return F.floor(code / (cls.MAX_DEPTH + 1)).cast("int")

    @classmethod
    def depth(cls, code: Column) -> Column:
        return code % (cls.MAX_DEPTH + 1)

    def name(self, root: Column, depth: Column) -> Column:
        """The queue at `depth` on the chain of `root`."""
        if not self.names:
            return F.lit(None).cast("string")
        key = root.cast("long") * (self.MAX_DEPTH + 1) + depth
        return lit_map(self.names, "bigint", "string")[key]


def _summary(rows: DataFrame, chains: _Chains) -> DataFrame:
    """Per message id, fixed-width: its publish (when there is one), whether it was
    confirmed or nacked, and its deliveries and dead letters counted per position on
    the dead-letter chain of its publish queue. `clean` says these decide its verdict:
    one publish, to a chain's first queue; every queue it reached on that chain; every
    delivered body the published one."""
    t = F.col("t")
    pub, dlv = t == "publish", t == "deliver"
    moved = dlv | (t == "dlx_discard")
    code = F.col("_place")
    root, depth = chains.root(code), chains.depth(code)
    out = F.col("_outcome")
    returned, dropped = out == "returned", out == "dropped"
    explained = _explains(out, F.col("_amb"), F.col("_in_dlx"))
    counts = F.col("_counts")
    per_depth = []
    for i in range(chains.depths):
        here = dlv & (depth == i)
        per_depth += [
            F.count(F.when(here, 1)).alias(f"k_{i}"),
            F.count(F.when(here & returned & (counts == 1), 1)).alias(f"ret_{i}"),
            F.max(F.when(here & returned, F.coalesce(F.col("_count"), F.lit(0)) + counts))
            .alias(f"counted_{i}"),
            F.count(F.when(here & dropped, 1)).alias(f"drops_{i}")]
    agg = rows.withColumn("_place", chains.code(F.col("_q"))).groupBy("msg_id").agg(
        F.count(F.when(pub, 1)).alias("n_pub"),
        F.max(t == "confirm").alias("conf"), F.max(t == "pub_nack").alias("nack"),
        F.min(F.when(pub, root)).alias("p_root"), F.max(F.when(pub, depth)).alias("p_depth"),
        F.min(F.when(pub, F.col("_digest"))).alias("p_digest"),
        F.count(F.when(moved, 1)).alias("n_moved"),
        F.count(F.when(moved & code.isNotNull(), 1)).alias("n_placed"),
        F.min(F.when(moved, root)).alias("m_root_lo"),
        F.max(F.when(moved, root)).alias("m_root_hi"),
        F.max(F.when(moved, depth)).alias("end_depth"),
        F.min(F.when(dlv, F.col("_digest"))).alias("d_digest_lo"),
        F.max(F.when(dlv, F.col("_digest"))).alias("d_digest_hi"),
        F.count(F.when(dlv, 1)).alias("k"),
        F.count(F.when(dlv & (out == "ok"), 1)).alias("oks"),
        F.count(F.when(dlv & explained, 1)).alias("explained"),
        *per_depth)
    p_root, p_digest = F.col("p_root"), F.col("p_digest")
    lo, hi = F.col("d_digest_lo"), F.col("d_digest_hi")
    clean = (F.col("msg_id").isNotNull() & (F.col("n_pub") == 1) & p_root.isNotNull()
             & (F.col("p_depth") == 0)
             & ((F.col("n_moved") == 0)
                | ((F.col("n_placed") == F.col("n_moved")) & (F.col("m_root_lo") == p_root)
                   & (F.col("m_root_hi") == p_root)))
             & (p_digest.isNull() | lo.isNull() | ((lo == p_digest) & (hi == p_digest))))
    return agg.select("*", F.coalesce(clean, F.lit(False)).alias("clean"))


def _fast_verdict(chains: _Chains, meta: model.RunConfig) -> list[Column]:
    """`_exact`'s columns but `bad` (none) for a clean message of `_summary`: its
    verdict is its publish queue's chain at the deepest position it reached
    (`end_queue`)."""
    end = F.coalesce(F.col("end_depth"), F.lit(0))

    def at_end(name: str) -> Column:
        picked = F.lit(None)
        for i in reversed(range(chains.depths)):
            picked = F.when(end == i, F.col(f"{name}_{i}")).otherwise(picked)
        return picked

    end_queue = chains.name(F.col("p_root"), end)
    dropped = _dropped(meta, end_queue, at_end("ret"), at_end("counted"), at_end("drops"))
    k = F.col("k").cast("int")
    return [F.col("msg_id"), F.lit(True).alias("has_pub"),
            chains.name(F.col("p_root"), F.lit(0)).alias("pub_queue"),
            F.coalesce("conf", F.lit(False)).alias("conf"),
            F.coalesce("nack", F.lit(False)).alias("nack"),
            k.alias("k"), (k - 1 - F.col("explained")).cast("int").alias("extra"),
            F.col("oks").cast("int").alias("oks"), end_queue.alias("end_queue"),
            at_end("k").cast("int").alias("k_end"), dropped.alias("dropped"),
            k.alias("n_deliveries")]


def _exact(rows: DataFrame, meta: model.RunConfig) -> DataFrame:
    """The verdict columns of each message of `rows`, from its publishes and deliveries
    gathered into arrays."""
    agg = rows.groupBy("msg_id").agg(
        F.array_min(F.collect_list("pub")).alias("p"),
        F.max(F.col("t") == "confirm").alias("conf"),
        F.max(F.col("t") == "pub_nack").alias("nack"),
        F.collect_list("del").alias("dels"),
        F.collect_set("target").alias("disc"))
    return agg.select(
        "msg_id", F.col("p").isNotNull().alias("has_pub"),
        F.col("p.queue").alias("pub_queue"), F.col("p.body_digest").alias("pub_digest"),
        F.coalesce("conf", F.lit(False)).alias("conf"),
        F.coalesce("nack", F.lit(False)).alias("nack"), "dels", "disc",
    ).select("*", *_verdict(meta)).drop("dels", "disc", "pub_digest")


def _in_dlx_queue(meta: model.RunConfig, q: Column) -> Column:
    """Whether queue `q` has a dead-letter target: a drop there may reappear elsewhere."""
    dlx_queues = meta.dlx_queues()
    return q.isin(dlx_queues) if dlx_queues else F.lit(False)


def _explains(outcome: Column, ambiguous: Column, in_dlx_queue: Column) -> Column:
    """Whether a delivery explains the next one: it was returned, its ack was ambiguous,
    or it was dropped by a queue that dead-letters (the message may come back)."""
    return (outcome == "returned") | ambiguous | ((outcome == "dropped") & in_dlx_queue)


def _counts(meta: model.RunConfig, by_end: Column) -> Column:
    """1 when a return counts toward the delivery limit, else 0: every return where the
    run's release counts requeues, else (4.3) only a return by the consumer's end."""
    if meta.requeue_counts_toward_limit():
        return F.lit(1)
    return F.when(F.coalesce(by_end, F.lit(False)), 1).otherwise(0)


def _dropped(meta: model.RunConfig, end_queue: Column, returns: Column, counted: Column,
             drops: Column) -> Column:
    """A message dropped rather than lost in `end_queue`, the last queue it reached, from
    its deliveries there: `returns` returned (`counted`: the highest delivery count
    they carried, plus one), `drops` rejected without requeue. It is dropped when that
    queue has no dead-letter target and it either rejected the message or returned it
    past its delivery limit."""
    limits = {q: meta.delivery_limit(q) for q in meta.queues}
    limits = {q: lim for q, lim in limits.items() if lim is not None}
    lim = lit_map(limits, "string", "bigint")[end_queue] if limits else F.lit(None)
    past_limit = F.greatest(returns, F.coalesce(counted, F.lit(0))) > lim
    return ~F.coalesce(_in_dlx_queue(meta, end_queue), F.lit(False)) & (
        (drops > 0) | F.coalesce(past_limit, F.lit(False)))


def _verdict(meta: model.RunConfig) -> list[Column]:
    """Per-message columns computed from its deliveries (`dels`) and discards (`disc`)."""
    dels = F.col("dels")
    explained = F.size(F.filter(dels, lambda x: _explains(
        x["outcome_d"], x["ambiguous"], _in_dlx_queue(meta, x["queue"]))))
    k = F.size(dels)
    oks = F.size(F.filter(dels, lambda x: x["outcome_d"] == "ok"))
    # the last queue of the message's dead-letter chain it reached
    chain = {q: [(depth, t) for depth, t in enumerate(meta.dlx_chain(q), start=1)]
             for q in meta.queues}
    chain = {q: c for q, c in chain.items() if c}
    seen = F.array_union(F.transform(dels, lambda x: x["queue"]), F.col("disc"))
    if chain:
        reached = F.filter(_chain_map(chain)[F.col("pub_queue")],
                           lambda c: F.array_contains(seen, c["queue"]))
        end_queue = F.coalesce(F.array_max(reached)["queue"], F.col("pub_queue"))
    else:
        end_queue = F.col("pub_queue")
    there = F.filter(dels, lambda x: x["queue"] == end_queue)
    returned = F.filter(there, lambda x: x["outcome_d"] == "returned")
    counting = F.filter(returned, lambda x: _counts(meta, x["by_end"]) == 1)
    counted = F.array_max(F.transform(returned, lambda x: F.coalesce(
        x["delivery_count"], F.lit(0)) + _counts(meta, x["by_end"])))
    drops = F.size(F.filter(there, lambda x: x["outcome_d"] == "dropped"))
    dropped = _dropped(meta, end_queue, F.size(counting), counted, drops)
    has_pub = F.col("has_pub")
    digest = F.col("pub_digest")
    bad = F.filter(F.transform(dels, lambda x: F.struct(
        F.when(~has_pub, F.lit("unexpected"))
        .when(digest.isNotNull() & x["body_digest"].isNotNull()
              & (digest != x["body_digest"]), F.lit("unexpected_body")).alias("violation"),
        x["queue"].alias("queue"), x["ts_ns"].alias("ts_ns"), x["conn_id"].alias("conn_id"),
        x["channel_id"].alias("channel_id"))), lambda b: b["violation"].isNotNull())
    return [k.alias("k"), (k - 1 - explained).alias("extra"), oks.alias("oks"),
            end_queue.alias("end_queue"), F.size(there).alias("k_end"),
            dropped.alias("dropped"), k.alias("n_deliveries"), bad.alias("bad")]


def _chain_map(chain: dict[str, list[tuple[int, str]]]) -> Column:
    """pub_queue -> [(depth, queue)] of its dead-letter chain, as a literal map."""
    pairs = []
    for q, c in sorted(chain.items()):
        pairs += [F.lit(q), F.array(*[F.struct(F.lit(d).alias("depth"), F.lit(t).alias("queue"))
                                      for d, t in c])]
    return F.create_map(*pairs)
