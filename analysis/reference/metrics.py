"""The metrics of `analysis.metrics` recomputed in plain Python, as their oracle: latency
histograms per fault window, throughput per bucket, replication (commit and
local-delivery lag) histograms and WAL batch counts.
"""

from __future__ import annotations

import json
from collections import defaultdict

from analysis import model
from analysis.model import Params
from analysis.reference.common import (
    deliveries,
)
from analysis.reference.history import BIG, RefHistory


def latency_histograms(h: RefHistory, p: Params) -> dict[tuple[str, str], dict[int, int]]:
    """(series, fault label) -> {log bucket: count}, as `analysis.metrics` computes it."""
    windows = model.fault_windows(h.rows("nemesis_events"), h.run_end_ns)

    def label(ts: int) -> str:
        return next((w.fault for w in windows if w.start_ns <= ts <= w.stop_ns), "outside")

    ops = h.rows("client_ops")
    pub: dict[int, int] = {}
    conf: dict[int, int] = {}
    for r in ops:
        if r["kind"] == "publish":
            pub[r["msg_id"]] = min(pub.get(r["msg_id"], BIG), r["ts_ns"])
        elif r["kind"] == "confirm":
            conf[r["msg_id"]] = min(conf.get(r["msg_id"], BIG), r["ts_ns"])
    first_del: dict[int, int] = {}
    first_ok: dict[int, int] = {}
    samples: list[tuple[str, int, int]] = []
    for d in deliveries(h, p):
        m = d.row["msg_id"]
        first_del[m] = min(first_del.get(m, BIG), d.row["ts_ns"])
        if d.ok_ts is not None:
            first_ok[m] = min(first_ok.get(m, BIG), d.ok_ts)
            samples.append(("deliver_ack", d.row["ts_ns"], d.ok_ts - d.row["ts_ns"]))
    for m, t in pub.items():
        for series, end in (("publish_confirm", conf), ("publish_deliver", first_del),
                            ("end_to_end", first_ok)):
            if m in end:
                samples.append((series, t, end[m] - t))
    out: dict[tuple[str, str], dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for series, start, lat in samples:
        if lat >= 0:
            out[(series, label(start))][model.log_bucket(lat)] += 1
    return {k: dict(v) for k, v in out.items()}


def throughput(h: RefHistory, p: Params) -> tuple[dict[tuple[str, str | None], dict[int, int]],
                                                  dict[tuple[str, str], dict[int, int]]]:
    """Counts per bucket by (op, queue) from `client_ops` and by (channel event kind,
    node) from `channel_events`, as `analysis.metrics` computes them (buckets counted
    from the first client operation)."""
    ops = h.rows("client_ops")
    t0 = min((r["ts_ns"] for r in ops), default=0)
    by_queue: dict[tuple[str, str | None], dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for r in ops:
        if r["kind"] in model.OPS:
            by_queue[(r["kind"], r["queue"])][(r["ts_ns"] - t0) // p.bucket_ns] += 1
    by_node: dict[tuple[str, str], dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for r in h.rows("channel_events"):
        if r["kind"] in model.BROKER_OPS:
            by_node[(r["kind"], r["node"])][(r["ts_ns"] - t0) // p.bucket_ns] += 1
    return ({k: dict(v) for k, v in by_queue.items()}, {k: dict(v) for k, v in by_node.items()})


def replication_histograms(h: RefHistory) -> dict[str, dict[int, int]]:
    """Commit latency and local-delivery lag histograms, as `analysis.metrics` computes
    them (`replication_samples`)."""
    lead: dict[tuple[str, int], int] = {}
    enq: dict[tuple[str, int], int] = {}
    for r in h.rows("replica_events", "applied"):
        if r["role"] != "leader":
            continue
        key = (r["queue"], r["raft_index"])
        lead[key] = min(lead.get(key, BIG), r["ts_ns"])
        if r["cmd_type"] == "enqueue" and r["msg_id"] is not None:
            enq[key] = min(enq.get(key, BIG), r["msg_id"])
    samples: list[tuple[str, int]] = []
    for r in h.rows("replica_events", "local_delivery"):
        key = (r["queue"], r["raft_index"])
        if r["raft_index"] is not None and key in lead:
            samples.append((f"local_delivery_lag:{r['role'] or 'unknown'}",
                            r["ts_ns"] - lead[key]))
    applied: dict[tuple[str, int], int] = {}
    for (queue, idx), m in enq.items():
        applied[(queue, m)] = min(applied.get((queue, m), BIG), lead[(queue, idx)])
    sent: dict[tuple[str, int], int] = {}
    for r in h.rows("channel_events", "enqueue_sent"):
        key = (r["queue"], r["msg_id"])
        sent[key] = min(sent.get(key, BIG), r["ts_ns"])
    samples += [("commit", applied[k] - t) for k, t in sent.items() if k in applied]
    out: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for series, lat in samples:
        if lat >= 0:
            out[series][model.log_bucket(lat)] += 1
    return {k: dict(v) for k, v in out.items()}


def wal_batches(h: RefHistory) -> dict[str, dict[tuple[int, int], int]]:
    """node -> (entries, log bucket of write+sync ns) -> batches, as `analysis.metrics`
    counts the WAL's `ra_wal_batch` rows."""
    out: dict[str, dict[tuple[int, int], int]] = defaultdict(lambda: defaultdict(int))
    for r in h.rows("other_events", "ra_wal_batch"):
        extra = json.loads(r["extra"] or "{}")
        entries, sync_ms = extra.get("entries"), extra.get("fsync_ms")
        if entries is None or sync_ms is None:
            continue
        out[r["node"]][(int(entries), model.log_bucket(int(float(sync_ms) * 1e6)))] += 1
    return {k: dict(v) for k, v in out.items()}
