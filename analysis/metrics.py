"""Performance metrics (docs/analysis.md, "Metrics"): throughput, latency percentiles inside and
outside fault windows, flow, supervision and CPU series.

Everything is aggregated in Spark and only bounded results reach the driver: per-second
counts, log-bucketed latency histograms (`model.log_bucket`, so percentiles are exact
per bucket and equal to the reference's), and a sample of at most `RAW_POINTS` raw
latencies for the scatter plot.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from analysis import model
from analysis.checks.common import ORDER, deliveries, rare_replica_rows
from analysis.checks.flow import blocked_intervals
from analysis.load import History
from analysis.model import BROKER_OPS, OPS, Params

RAW_POINTS = 100_000
SERIES = ("publish_confirm", "publish_deliver", "end_to_end", "deliver_ack")


@dataclass
class Metrics:
    t0_ns: int
    rate: dict[str, dict[int, int]] = field(default_factory=dict)  # op -> second -> count
    #: (op, queue) -> second -> count, from `client_ops`
    rate_by_queue: dict[tuple[str, str | None], dict[int, int]] = field(default_factory=dict)
    #: (channel event kind, broker node) -> second -> count, from `channel_events`
    rate_by_node: dict[tuple[str, str], dict[int, int]] = field(default_factory=dict)
    hist: dict[tuple[str, str], dict[int, int]] = field(default_factory=dict)
    hist_by_second: dict[tuple[str, int], dict[int, int]] = field(default_factory=dict)
    max_ns: dict[tuple[str, str], int] = field(default_factory=dict)
    raw: list[tuple[str, float, float]] = field(default_factory=list)  # series, s, ms
    blocked: list[tuple[str, float, float, bool]] = field(default_factory=list)
    cpu: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    rss: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # node -> (s, MiB)
    restarts: list[dict[str, Any]] = field(default_factory=list)
    leader_changes: list[tuple[str, float]] = field(default_factory=list)
    #: `commit` or `local_delivery_lag:<sender role>` -> {log bucket: count}, and maxima
    replication: dict[str, dict[int, int]] = field(default_factory=dict)
    replication_max_ns: dict[str, int] = field(default_factory=dict)
    #: node -> (entries in a WAL batch, log bucket of its write+sync ns) -> batches
    wal: dict[str, dict[tuple[int, int], int]] = field(default_factory=dict)
    windows: list[model.FaultWindow] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)


def fault_label(windows: list[model.FaultWindow], ts: Column) -> Column:
    """`outside`, or the fault type of the first window containing `ts`."""
    label: Column = F.lit("outside")
    for w in reversed(windows):
        label = F.when((ts >= w.start_ns) & (ts <= w.stop_ns), F.lit(w.fault)).otherwise(label)
    return label


def latency_samples(h: History, p: Params) -> DataFrame:
    """(series, start_ns, latency_ns) for every measured latency."""
    ops = h["client_ops"]
    pub = (ops.where(F.col("kind") == "publish").groupBy("msg_id")
           .agg(F.min("ts_ns").alias("pub_ts")))
    conf = (ops.where(F.col("kind") == "confirm").groupBy("msg_id")
            .agg(F.min("ts_ns").alias("conf_ts")))
    d = deliveries(h, p)
    firsts = d.groupBy("msg_id").agg(F.min("ts_ns").alias("del_ts"), F.min("ok_ts").alias("ok_ts"))
    per_msg = pub.join(conf, "msg_id", "left").join(firsts, "msg_id", "left")
    parts = [
        per_msg.select(F.lit("publish_confirm").alias("series"), F.col("pub_ts").alias("start"),
                       (F.col("conf_ts") - F.col("pub_ts")).alias("lat")),
        per_msg.select(F.lit("publish_deliver").alias("series"), F.col("pub_ts").alias("start"),
                       (F.col("del_ts") - F.col("pub_ts")).alias("lat")),
        per_msg.select(F.lit("end_to_end").alias("series"), F.col("pub_ts").alias("start"),
                       (F.col("ok_ts") - F.col("pub_ts")).alias("lat")),
        d.select(F.lit("deliver_ack").alias("series"), F.col("ts_ns").alias("start"),
                 (F.col("ok_ts") - F.col("ts_ns")).alias("lat")),
    ]
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out.where(F.col("lat").isNotNull() & (F.col("lat") >= 0))


def replication_samples(h: History) -> DataFrame:
    """(series, lat) for the replication latencies (docs/analysis.md, "Metrics"), measured from
    the leader's `applied` row of an index (the first, should it have applied twice):

    * ``commit``: a message's first `enqueue_sent` (`channel_events`) to the leader
      applying its enqueue in that queue;
    * ``local_delivery_lag:<role>``: each `local_delivery` to the leader applying the
      index whose decision it carries out, by the role of the sending server.

    Negative differences (a sender's row recorded before the leader's) are left out,
    as for the client latencies."""
    rep = h["replica_events"]
    kind = F.col("kind")
    lead = (rep.where((kind == "applied") & (F.col("role") == "leader"))
            .groupBy("queue", "raft_index")
            .agg(F.min("ts_ns").alias("lead_ts"),
                 F.min(F.when(F.col("cmd_type") == "enqueue", F.col("msg_id"))).alias("enq")))
    lag = (rep.where((kind == "local_delivery") & F.col("raft_index").isNotNull())
           .join(lead, ["queue", "raft_index"])
           .select(F.concat(F.lit("local_delivery_lag:"), F.coalesce("role", F.lit("unknown")))
                   .alias("series"), (F.col("ts_ns") - F.col("lead_ts")).alias("lat")))
    if h.has("channel_events"):
        sent = (h["channel_events"].where(F.col("kind") == "enqueue_sent")
                .groupBy("queue", "msg_id").agg(F.min("ts_ns").alias("sent_ts")))
        applied = (lead.where(F.col("enq").isNotNull())
                   .groupBy("queue", F.col("enq").alias("msg_id"))
                   .agg(F.min("lead_ts").alias("lead_ts")))
        commit = (sent.join(applied, ["queue", "msg_id"])
                  .select(F.lit("commit").alias("series"),
                          (F.col("lead_ts") - F.col("sent_ts")).alias("lat")))
        lag = lag.unionByName(commit)
    return lag.where(F.col("lat") >= 0)


#: the WAL's trace kind (`ra.wal`): one per batch written and synced, with `entries`
#: and `fsync_ms` (write and sync) in the row's `extra`; it lands in `other_events`
WAL_BATCH = "ra_wal_batch"


def wal_batches(h: History) -> DataFrame:
    """(node, entries, b) per recorded WAL batch, b the log bucket of its write+sync."""
    extra = F.col("extra")
    sync_ns = (F.get_json_object(extra, "$.fsync_ms").cast("double") * F.lit(1e6)).cast("long")
    return (h["other_events"].where(F.col("kind") == WAL_BATCH)
            .select("node", F.get_json_object(extra, "$.entries").cast("long").alias("entries"),
                    log_bucket_col(sync_ns).alias("b"))
            .where(F.col("entries").isNotNull() & F.col("b").isNotNull()))


def log_bucket_col(lat: Column) -> Column:
    return F.floor(F.log(F.greatest(lat, F.lit(1)).cast("double")) / F.lit(model.LOG_BASE)) \
        .cast("long")


def merge(hists: list[dict[int, int]]) -> dict[int, int]:
    out: dict[int, int] = defaultdict(int)
    for hist in hists:
        for b, n in hist.items():
            out[b] += n
    return dict(out)


def compute(h: History, p: Params) -> Metrics:
    ops = h["client_ops"]
    t0 = h.first_ts_ns("client_ops")
    m = Metrics(t0_ns=t0, windows=h.windows)
    sec = F.floor((F.col("ts_ns") - F.lit(t0)) / F.lit(p.bucket_ns)).cast("long")
    for r in (ops.where(F.col("kind").isin(*OPS)).groupBy("kind", sec.alias("s"), "queue")
              .count().collect()):
        op, s, n = r["kind"], int(r["s"]), int(r["count"])
        total = m.rate.setdefault(op, {})
        total[s] = total.get(s, 0) + n
        m.rate_by_queue.setdefault((op, r["queue"]), {})[s] = n
    if h.has("channel_events"):
        for r in (h["channel_events"].where(F.col("kind").isin(*BROKER_OPS))
                  .groupBy("kind", sec.alias("s"), "node").count().collect()):
            m.rate_by_node.setdefault((r["kind"], r["node"]), {})[int(r["s"])] = int(r["count"])
    lat = latency_samples(h, p).withColumn("label", fault_label(h.windows, F.col("start"))) \
        .withColumn("b", log_bucket_col(F.col("lat"))).cache()
    n = _histograms(m, lat, p)
    sample = lat if n <= RAW_POINTS else lat.sample(fraction=RAW_POINTS / n, seed=7)
    m.raw = [(r["series"], (r["start"] - t0) / 1e9, r["lat"] / 1e6)
             for r in sample.select("series", "start", "lat").limit(RAW_POINTS).collect()]
    lat.unpersist()
    if h.has("flow_events"):
        m.blocked = [(r["entity"], (r["start_ns"] - t0) / 1e9, (r["stop_ns"] - t0) / 1e9,
                      bool(r["open"])) for r in blocked_intervals(h).collect()]
    if h.has("samples"):
        w = Window.partitionBy("node", "emitter").orderBy(*ORDER)
        cpu = F.col("cpu_user_s") + F.col("cpu_sys_s")
        dt = (F.col("ts_ns") - F.lag("ts_ns").over(w)) / F.lit(1e9)
        util = F.when(dt > 0, (cpu - F.lag(cpu).over(w)) / dt)
        for r in (h["samples"].select("node", "ts_ns", util.alias("u"), "rss_bytes")
                  .orderBy("ts_ns").collect()):
            t = (r["ts_ns"] - t0) / 1e9
            if r["u"] is not None:
                m.cpu.setdefault(r["node"], []).append((t, float(r["u"])))
            if r["rss_bytes"] is not None:
                m.rss.setdefault(r["node"], []).append((t, r["rss_bytes"] / 2**20))
    if h.has("supervision_events"):
        m.restarts = [r.asDict() for r in h["supervision_events"]
                      .where(F.col("kind").isin("crashed", "restarted", "intensity_exceeded"))
                      .groupBy("actor_class", "kind", "reason").count().collect()]
    if h.has("other_events"):
        for r in wal_batches(h).groupBy("node", "entries", "b").count().collect():
            m.wal.setdefault(r["node"], {})[(int(r["entries"]), int(r["b"]))] = int(r["count"])
    if h.has("replica_events"):
        for r in (replication_samples(h).groupBy("series", log_bucket_col(F.col("lat")).alias("b"))
                  .agg(F.count("*").alias("n"), F.max("lat").alias("mx")).collect()):
            m.replication.setdefault(r["series"], {})[int(r["b"])] = int(r["n"])
            m.replication_max_ns[r["series"]] = max(m.replication_max_ns.get(r["series"], 0),
                                                    int(r["mx"]))
        m.leader_changes = [(r["queue"], (r["ts_ns"] - t0) / 1e9) for r in rare_replica_rows(h)
                            .where(F.col("kind") == "leader_elected")
                            .select("queue", "ts_ns").collect()]
    m.summary = summarize(m, p)
    return m


def _histograms(m: Metrics, lat: DataFrame, p: Params) -> int:
    """Fill the latency histograms (per series and fault label, and per second of the
    end-to-end series) and maxima from one aggregation; return how many samples there
    are. One query rather than one per figure: on a cold JVM each costs its planning
    and compiling, whatever the size of the history."""
    start_sec = F.floor((F.col("start") - F.lit(m.t0_ns)) / F.lit(p.bucket_ns)).cast("long")
    e2e_sec = F.when(F.col("series") == "end_to_end", start_sec)
    n = 0
    for r in (lat.groupBy("series", "label", "b", e2e_sec.alias("s"))
              .agg(F.count("*").alias("n"), F.max("lat").alias("mx")).collect()):
        key, b, count = (r["series"], r["label"]), int(r["b"]), int(r["n"])
        hist = m.hist.setdefault(key, {})
        hist[b] = hist.get(b, 0) + count
        m.max_ns[key] = max(m.max_ns.get(key, 0), int(r["mx"]))
        if r["s"] is not None:
            per_sec = m.hist_by_second.setdefault((r["series"], int(r["s"])), {})
            per_sec[b] = per_sec.get(b, 0) + count
        n += count
    return n


def _replication(m: Metrics) -> dict[str, Any]:
    """Commit latency and local-delivery lag per sender role, in ms."""
    out: dict[str, Any] = {}
    for series, hist in sorted(m.replication.items()):
        entry = {**model.percentiles(hist), "count": sum(hist.values()),
                 "max": m.replication_max_ns[series] / 1e6}
        if series == "commit":
            out["commit_latency"] = entry
        else:
            out.setdefault("local_delivery_lag", {})[series.split(":", 1)[1]] = entry
    return out


def _wal(batches: dict[tuple[int, int], int]) -> dict[str, Any]:
    """One node's WAL: batches, entries per batch (mean, p50, p99, max) and the
    write+sync time of a batch (ms, log-bucket percentiles)."""
    sizes: dict[int, int] = defaultdict(int)
    syncs: dict[int, int] = defaultdict(int)
    for (entries, b), n in batches.items():
        sizes[entries] += n
        syncs[b] += n
    n = sum(sizes.values())
    return {"batches": n, "entries_mean": sum(e * k for e, k in sizes.items()) / n,
            "entries_p50": model.rank_key(sizes, 0.5),
            "entries_p99": model.rank_key(sizes, 0.99),
            "entries_max": max(sizes), "sync_ms": model.percentiles(dict(syncs))}


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _quantile(values: list[int], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return float(ordered[max(0, math.ceil(q * len(ordered)) - 1)])


def _median_p5(per_second: list[int]) -> dict[str, float]:
    """Median and p5 of per-bucket counts (the summary's confirms/s figures)."""
    return {"median": _quantile(per_second, 0.5), "p5": _quantile(per_second, 0.05)}


def _per_queue(m: Metrics, outside_faults: Any) -> dict[str, dict[str, Any]]:
    """Per queue (``(none)``: rows without one): totals per op and, for a queue that had
    confirms, confirms/s outside fault windows."""
    out: dict[str, dict[str, Any]] = {}
    for queue in sorted({q for _, q in m.rate_by_queue}, key=lambda q: (q is None, q or "")):
        entry: dict[str, Any] = {op: sum(m.rate_by_queue[(op, queue)].values())
                                 for op in OPS if (op, queue) in m.rate_by_queue}
        if ("confirm", queue) in m.rate_by_queue:
            entry["confirms_per_s_outside_faults"] = _median_p5(
                outside_faults(m.rate_by_queue[("confirm", queue)]))
        out["(none)" if queue is None else queue] = entry
    return out


def summarize(m: Metrics, p: Params) -> dict[str, Any]:
    """The metrics part of summary.json (plain numbers, milliseconds and per-second)."""
    bucket_s = p.bucket_ns / 1e9

    def inside(s: int) -> bool:
        lo = m.t0_ns + s * p.bucket_ns
        hi = lo + p.bucket_ns
        return any(w.start_ns < hi and lo <= w.stop_ns for w in m.windows)

    confirms = m.rate.get("confirm", {})
    last = max((s for series in m.rate.values() for s in series), default=-1)

    def outside_faults(per_second: dict[int, int]) -> list[int]:
        """Counts of the buckets from the first to the last, those in no fault window."""
        return [per_second.get(s, 0) for s in range(last + 1) if not inside(s)]

    outside = outside_faults(confirms)
    latency: dict[str, Any] = {}
    for series in SERIES:
        labels = sorted({lab for (s, lab) in m.hist if s == series})
        if not labels:
            continue
        entry: dict[str, Any] = {}
        overall = merge([m.hist[(series, lab)] for lab in labels])
        entry["overall"] = {**model.percentiles(overall), "count": sum(overall.values()),
                            "max": max(m.max_ns[(series, lab)] for lab in labels) / 1e6}
        faults = [lab for lab in labels if lab != "outside"]
        if "outside" in labels:
            entry["outside_faults"] = model.percentiles(m.hist[(series, "outside")])
        if faults:
            entry["inside_faults"] = model.percentiles(merge([m.hist[(series, f)]
                                                              for f in faults]))
            entry["per_fault"] = {f: model.percentiles(m.hist[(series, f)]) for f in faults}
        latency[series] = entry
    availability = []
    pre_median = _quantile(outside, 0.5)
    for w in m.windows:
        s0 = (w.start_ns - m.t0_ns) // p.bucket_ns
        s1 = (w.stop_ns - m.t0_ns) // p.bucket_ns
        zero = sum(1 for s in range(max(0, s0), min(last, s1) + 1) if confirms.get(s, 0) == 0)
        recovery = next((s - s1 for s in range(s1 + 1, last + 1)
                         if confirms.get(s, 0) >= 0.8 * pre_median), None)
        availability.append({"fault": w.fault, "zero_confirm_seconds": zero * bucket_s,
                             "recovery_s": None if recovery is None else recovery * bucket_s})
    flow: dict[str, Any] = {}
    for entity, start, stop, open_ in m.blocked:
        e = flow.setdefault(entity, {"intervals": 0, "blocked_s": 0.0, "max_s": 0.0,
                                     "open_at_end": False})
        e["intervals"] += 1
        e["blocked_s"] += stop - start
        e["max_s"] = max(e["max_s"], stop - start)
        e["open_at_end"] = e["open_at_end"] or open_
    return {
        "throughput": {
            "bucket_s": bucket_s,
            "totals": {op: sum(v.values()) for op, v in m.rate.items()},
            "confirms_per_s_outside_faults": _median_p5(outside),
            "per_queue": _per_queue(m, outside_faults),
            "per_node": {node: {kind: sum(v.values()) for (kind, n), v in
                                sorted(m.rate_by_node.items()) if n == node}
                         for node in sorted({n for _, n in m.rate_by_node})},
        },
        "latency_ms": latency,
        "availability": availability,
        "flow": flow,
        "supervision": m.restarts,
        "leader_changes": len(m.leader_changes),
        "replication_ms": _replication(m),
        "wal": {node: _wal(per) for node, per in sorted(m.wal.items())},
        "processes": {node: {"cpu_mean": _mean([u for _, u in m.cpu.get(node, [])]),
                             "cpu_max": max((u for _, u in m.cpu.get(node, [])), default=None),
                             "rss_mib_max": max((r for _, r in m.rss.get(node, [])),
                                                default=None)}
                      for node in sorted({*m.cpu, *m.rss})},
        "faults": [{"fault": w.fault, "start_s": (w.start_ns - m.t0_ns) / 1e9,
                    "stop_s": (w.stop_ns - m.t0_ns) / 1e9, "closed_at_end": w.closed_at_end}
                   for w in m.windows],
    }
