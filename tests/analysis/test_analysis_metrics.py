"""The latency figures of `analysis.metrics` come from one aggregation: histograms per
series and fault label, the maximum of each, the end-to-end histogram of every second,
and the number of samples must be what each figure means on its own. Throughput is
counted per bucket in all, per queue (client side) and per broker node (the channels'
side); replication latencies are measured from the leader's `applied`; each the same in
Spark as in the reference checker."""

from __future__ import annotations

import json

from pyspark.sql import SparkSession

from analysis import load, metrics, model, reference
from analysis.model import Params
from tests.analysis.conftest import arrow_tables

SEC = Params().bucket_ns
T0 = 1_000 * SEC


def test_histograms_maxima_and_seconds_from_one_aggregation(spark: SparkSession) -> None:
    rows = [  # series, label, b (bucket), start, lat
        ("end_to_end", "outside", 3, T0 + 10, 30),
        ("end_to_end", "outside", 3, T0 + SEC + 5, 35),
        ("end_to_end", "kill", 3, T0 + SEC + 7, 33),
        ("end_to_end", "kill", 5, T0 + SEC + 9, 90),
        ("publish_confirm", "outside", 3, T0 + 10, 31),
        ("publish_confirm", "outside", 3, T0 + 2 * SEC, 34),
    ]
    lat = spark.createDataFrame(rows, "series string, label string, b long, start long, "
                                      "lat long")
    m = metrics.Metrics(t0_ns=T0)
    n = metrics._histograms(m, lat, Params())
    assert n == 6
    assert m.hist == {("end_to_end", "outside"): {3: 2}, ("end_to_end", "kill"): {3: 1, 5: 1},
                      ("publish_confirm", "outside"): {3: 2}}
    assert m.max_ns == {("end_to_end", "outside"): 35, ("end_to_end", "kill"): 90,
                        ("publish_confirm", "outside"): 34}
    # per second only for end_to_end, over all labels
    assert m.hist_by_second == {("end_to_end", 0): {3: 1}, ("end_to_end", 1): {3: 2, 5: 1}}


def _op(kind: str, queue: str | None, ts: int, msg: int) -> dict[str, object]:
    return {"run_id": "r", "node": "client-1", "emitter": "c", "seq": msg * 10 + len(kind),
            "ts_ns": ts, "wall_ns": ts, "kind": kind, "queue": queue, "msg_id": msg,
            "conn_id": "p", "channel_id": 1}


def _ch(kind: str, node: str, ts: int, msg: int) -> dict[str, object]:
    return {"run_id": "r", "node": node, "emitter": f"ch-{node}", "seq": msg * 10 + len(kind),
            "ts_ns": ts, "wall_ns": ts, "kind": kind, "queue": "qa", "msg_id": msg,
            "conn_id": "p", "channel_id": 1}


THROUGHPUT_TABLES = {
    "client_ops": [
        _op("publish", "qa", T0, 1), _op("confirm", "qa", T0 + 5, 1),
        _op("publish", "qb", T0 + 10, 2), _op("confirm", "qb", T0 + SEC + 1, 2),
        _op("publish", "qa", T0 + SEC + 2, 3), _op("confirm", "qa", T0 + 2 * SEC + 3, 3),
        _op("publish", None, T0 + 2 * SEC + 4, 4),  # a publish the harness could not route
        _op("consume_ok", "qa", T0 + 6, 0),  # not a counted operation
    ],
    "channel_events": [
        _ch("publish_in", "n1", T0 + 1, 1), _ch("confirm_out", "n1", T0 + 4, 1),
        _ch("publish_in", "n2", T0 + 11, 2), _ch("confirm_out", "n2", T0 + SEC, 2),
        _ch("publish_in", "n1", T0 + SEC + 3, 3), _ch("confirm_out", "n1", T0 + 2 * SEC + 2, 3),
        _ch("enqueue_sent", "n1", T0 + 2, 1),  # not a counted operation
    ],
}


def test_throughput_per_queue_and_per_broker_node(spark: SparkSession) -> None:
    h = load.from_arrow(spark, arrow_tables(THROUGHPUT_TABLES))
    m = metrics.compute(h, Params())
    assert m.rate == {"publish": {0: 2, 1: 1, 2: 1}, "confirm": {0: 1, 1: 1, 2: 1}}
    assert m.rate_by_queue == {
        ("publish", "qa"): {0: 1, 1: 1}, ("publish", "qb"): {0: 1}, ("publish", None): {2: 1},
        ("confirm", "qa"): {0: 1, 2: 1}, ("confirm", "qb"): {1: 1}}
    assert m.rate_by_node == {
        ("publish_in", "n1"): {0: 1, 1: 1}, ("confirm_out", "n1"): {0: 1, 2: 1},
        ("publish_in", "n2"): {0: 1}, ("confirm_out", "n2"): {1: 1}}
    assert (m.rate_by_queue, m.rate_by_node) == reference.throughput(
        reference.RefHistory.from_rows(THROUGHPUT_TABLES), Params())
    out = m.summary["throughput"]
    assert out["per_node"] == {"n1": {"confirm_out": 2, "publish_in": 2},
                               "n2": {"confirm_out": 1, "publish_in": 1}}
    assert out["per_queue"]["qa"] == {
        "publish": 2, "confirm": 2,
        "confirms_per_s_outside_faults": {"median": 1.0, "p5": 0.0}}
    assert out["per_queue"]["(none)"]["publish"] == 1
    h.unpersist()


def test_per_queue_confirm_rates_leave_out_fault_windows() -> None:
    m = metrics.Metrics(t0_ns=T0, windows=[model.FaultWindow("kill", T0 + SEC, T0 + SEC + 1,
                                                              False)])
    m.rate = {"confirm": {0: 4, 1: 9, 2: 6}}
    m.rate_by_queue = {("confirm", "qa"): {0: 3, 1: 9, 2: 6}, ("confirm", "qb"): {0: 1}}
    per_queue = metrics.summarize(m, Params())["throughput"]["per_queue"]
    # second 1 is inside the kill window: qa's rates outside are 3 and 6, qb's 1 and 0
    assert per_queue["qa"]["confirms_per_s_outside_faults"] == {"median": 3.0, "p5": 3.0}
    assert per_queue["qb"]["confirms_per_s_outside_faults"] == {"median": 0.0, "p5": 0.0}
    assert per_queue["qa"]["confirm"] == 18


def _sample(node: str, k: int, cpu_s: float, rss_mib: int) -> dict[str, object]:
    return {"run_id": "r", "node": node, "emitter": f"{node}/sampler", "seq": k,
            "ts_ns": T0 + k * SEC, "wall_ns": T0 + k * SEC, "kind": "sample",
            "cpu_user_s": cpu_s * 0.75, "cpu_sys_s": cpu_s * 0.25, "rss_bytes": rss_mib << 20}


def test_cpu_and_resident_memory_per_process(spark: SparkSession) -> None:
    tables = {"client_ops": [_op("publish", "qa", T0, 1)],
              "samples": [_sample("n1", 0, 0.0, 100), _sample("n1", 1, 0.5, 120),
                          _sample("n1", 2, 1.5, 110), _sample("n2", 1, 2.0, 64)]}
    h = load.from_arrow(spark, arrow_tables(tables))
    m = metrics.compute(h, Params())
    # utilisation is the CPU seconds used per second since the previous sample
    assert m.cpu == {"n1": [(1.0, 0.5), (2.0, 1.0)]}
    assert m.rss == {"n1": [(0.0, 100.0), (1.0, 120.0), (2.0, 110.0)], "n2": [(1.0, 64.0)]}
    assert m.summary["processes"] == {
        "n1": {"cpu_mean": 0.75, "cpu_max": 1.0, "rss_mib_max": 120.0},
        "n2": {"cpu_mean": None, "cpu_max": None, "rss_mib_max": 64.0}}
    h.unpersist()


def _rep(kind: str, server: str, role: str, idx: int, ts: int, **f: object) -> dict[str, object]:
    return {"run_id": "r", "node": server.split("@")[1], "emitter": f"ra/{server}",
            "seq": ts, "ts_ns": ts, "wall_ns": ts, "kind": kind, "queue": "qa",
            "server": server, "role": role, "raft_term": 1, "raft_index": idx, **f}


REPLICATION_TABLES = {
    "client_ops": [_op("publish", "qa", T0, 1)],
    "channel_events": [_ch("enqueue_sent", "n1", T0 + 40, 1),
                       _ch("enqueue_sent", "n1", T0 + 70, 1)],  # resent: the first counts
    "replica_events": [
        _rep("applied", "qa@n1", "leader", 1, T0 + 100, cmd_type="enqueue", msg_id=1),
        _rep("applied", "qa@n2", "follower", 1, T0 + 300, cmd_type="enqueue", msg_id=1),
        _rep("applied", "qa@n1", "leader", 2, T0 + 1_000, cmd_type="checkout"),
        _rep("local_delivery", "qa@n1", "leader", 2, T0 + 1_100, msg_id=1),
        _rep("local_delivery", "qa@n2", "follower", 2, T0 + 1_500, msg_id=1),
        # recorded before the leader's `applied`: left out
        _rep("local_delivery", "qa@n3", "follower", 2, T0 + 900, msg_id=1),
        # an index no leader applied in the record: nothing to measure from
        _rep("local_delivery", "qa@n2", "follower", 3, T0 + 2_000, msg_id=1),
    ],
}


def test_commit_latency_and_local_delivery_lag_from_the_leaders_applied(
        spark: SparkSession) -> None:
    h = load.from_arrow(spark, arrow_tables(REPLICATION_TABLES))
    m = metrics.compute(h, Params())
    b = model.log_bucket
    assert m.replication == {"commit": {b(60): 1}, "local_delivery_lag:leader": {b(100): 1},
                             "local_delivery_lag:follower": {b(500): 1}}
    assert m.replication == reference.replication_histograms(
        reference.RefHistory.from_rows(REPLICATION_TABLES))
    out = m.summary["replication_ms"]
    assert out["commit_latency"]["count"] == 1
    assert out["commit_latency"]["max"] == 60 / 1e6
    assert set(out["local_delivery_lag"]) == {"leader", "follower"}
    assert out["local_delivery_lag"]["follower"]["max"] == 500 / 1e6
    h.unpersist()


def _wal(node: str, k: int, entries: int, sync_ms: float) -> dict[str, object]:
    return {"run_id": "r", "node": node, "emitter": f"{node}/wal", "seq": k,
            "ts_ns": T0 + k, "wall_ns": T0 + k, "kind": "ra_wal_batch",
            "extra": json.dumps({"entries": entries, "fsync_ms": sync_ms, "bytes": 99})}


WAL_TABLES = {
    "client_ops": [_op("publish", "qa", T0, 1)],
    "other_events": [_wal("n1", 1, 1, 0.25), _wal("n1", 2, 1, 0.25), _wal("n1", 3, 40, 1.5),
                     _wal("n2", 1, 3, 0.5),
                     {**_wal("n2", 2, 3, 0.5), "kind": "something_else"}],
}


def test_wal_batch_sizes_and_sync_times_per_node(spark: SparkSession) -> None:
    h = load.from_arrow(spark, arrow_tables(WAL_TABLES))
    m = metrics.compute(h, Params())
    b = model.log_bucket
    assert m.wal == {"n1": {(1, b(250_000)): 2, (40, b(1_500_000)): 1},
                     "n2": {(3, b(500_000)): 1}}
    assert m.wal == reference.wal_batches(reference.RefHistory.from_rows(WAL_TABLES))
    n1 = m.summary["wal"]["n1"]
    assert (n1["batches"], n1["entries_mean"], n1["entries_p50"], n1["entries_p99"],
            n1["entries_max"]) == (3, 14.0, 1, 40, 40)
    assert n1["sync_ms"]["p50"] == model.percentiles({b(250_000): 2, b(1_500_000): 1})["p50"]
    h.unpersist()
