"""DOWN propagation latency (a metric, not a verdict).

The actor runtime records `down_sent` when a monitored process ends and fires its
monitor, and `down_received` when the DOWN reaches the monitoring process, both with
the monitor reference (`ref` in `extra`). One sample per monitor: received minus
sent, bucketed like every latency (`model.log_bucket`), split by whether the two
processes share a node. DOWNs with no `down_sent` (the monitored process was already
gone, or its node was lost: `noproc` / `noconnection`) are counted as unpaired.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F

from analysis import final_state
from analysis.load import History
from analysis.metrics import log_bucket_col


def histograms(h: History) -> tuple[dict[str, dict[int, int]], dict[str, int]]:
    """("all" / "local" / "remote") -> {bucket: count}, and the DOWN counts."""
    sup = h["supervision_events"]
    ref = F.get_json_object(F.col("extra"), "$.ref")
    sent = (sup.where((F.col("kind") == "down_sent") & ref.isNotNull())
            .groupBy(ref.alias("ref"))
            .agg(F.min(F.struct("ts_ns", "emitter", "seq", "node")).alias("s"))
            .select("ref", F.col("s.ts_ns").alias("sent_ts"),
                    F.substring_index(F.col("s.node"), "@", 1).alias("sent_node")))
    received = sup.where(F.col("kind") == "down_received").select(
        ref.alias("ref"), "ts_ns", F.substring_index(F.col("node"), "@", 1).alias("node"))
    pairs = received.join(sent, "ref").select(
        log_bucket_col(F.greatest(F.col("ts_ns") - F.col("sent_ts"), F.lit(0))).alias("b"),
        F.when(F.col("node") == F.col("sent_node"), "local").otherwise("remote").alias("where"))
    hist: dict[str, dict[int, int]] = {}
    for r in pairs.groupBy("where", "b").count().collect():
        for k in ("all", r["where"]):
            per = hist.setdefault(k, {})
            per[int(r["b"])] = per.get(int(r["b"]), 0) + int(r["count"])
    row = sup.agg(F.sum(F.when(F.col("kind") == "down_sent", 1).otherwise(0)).alias("s"),
                  F.sum(F.when(F.col("kind") == "down_received", 1).otherwise(0)).alias("r")
                  ).first()
    assert row is not None  # an aggregate without grouping always has its one row
    n_sent, n_received = int(row["s"] or 0), int(row["r"] or 0)
    paired = sum(hist.get("all", {}).values())
    counts = {"down_sent": n_sent, "down_received": n_received,
              "unpaired": n_received - paired}
    return hist, counts


def summary(h: History) -> dict[str, Any]:
    """The `down_latency_ms` block of summary.json (p50/p99 overall, local, remote)."""
    hist, counts = histograms(h)
    return final_state.down_summary(hist, counts)
