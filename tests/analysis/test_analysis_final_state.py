"""The final-state checks outside the merged cases: verdicts that depend on the whole
run (no drain, no counts recorded, no time after heal + grace), the DOWN latency
metric, where a lost message was last seen, and `warren analyze` on `file://` URIs.
Spark and the reference agree on each; the expected values are written out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from analysis import cli, load, model, reference, synthetic
from analysis.checks import dlx_liveness, down_latency, emptiness, where
from analysis.model import Params
from tests.analysis.cases import MS, Builder
from tests.analysis.cases_final import leader, state, worker
from tests.analysis.conftest import arrow_tables
from tests.analysis.test_analysis_cli import SPARK_ARGS

Tables = dict[str, list[dict[str, Any]]]


def both(spark: SparkSession, tables: Tables, check: str) -> tuple[Any, Any]:
    """(status, counts, rows) from Spark and from the reference for one check."""
    h = load.from_arrow(spark, arrow_tables(tables))
    fn = {"post_drain_emptiness": emptiness.run, "dlx_worker_liveness": dlx_liveness.run}[check]
    got = fn(h, Params())
    rows = sorted((tuple(r) for r in got.violations.collect()), key=repr)
    ref = reference.ALL[check](reference.RefHistory.from_rows(tables), Params())
    h.unpersist()
    return (got.status, got.counts, rows), (ref.status, ref.counts, ref.violations)


def undrained(b: Builder) -> Tables:
    tables = b.tables()
    tables["client_ops"] = [r for r in tables.get("client_ops", [])
                            if r["kind"] != "drain_end"]
    return tables


def test_emptiness_needs_a_drain_and_recorded_counts(spark: SparkSession) -> None:
    b = Builder()
    state(b, "q", 1, 1, 0)
    b.drain()
    spark_side, ref_side = both(spark, undrained(b), "post_drain_emptiness")
    assert spark_side == ref_side
    assert spark_side[0] == "unknown" and spark_side[2] == [] \
        and spark_side[1]["not_empty"] == 1
    no_drain_workload = undrained(b)
    no_drain_workload["run_meta"][0]["drain_expected"] = False
    assert reference.ALL["post_drain_emptiness"](
        reference.RefHistory.from_rows(no_drain_workload), Params()).status == "skipped"
    old = Builder()
    old.applied("q", 1, "enqueue", 1)  # recorded before schema 1.1: no counts
    old.drain()
    spark_side, ref_side = both(spark, old.tables(), "post_drain_emptiness")
    assert spark_side == ref_side
    assert spark_side[0] == "unknown" and spark_side[1]["unrecorded_queues"] == 1


def test_dlx_liveness_is_unknown_without_time_after_heal_plus_grace(
        spark: SparkSession) -> None:
    b = Builder()
    b.config("src", dlx_strategy="at-least-once", dlx_target="dlq")
    leader(b, "src", "n1", 1)
    b._emit("nemesis_events", "nemesis", "start", "nemesis", fault="partition", targets=["n1"])
    b._emit("nemesis_events", "nemesis", "stop", "nemesis", fault="partition", targets=["n1"])
    worker(b, "src", "n2", 5)  # a stray, but the run ended too soon after the heal to judge
    spark_side, ref_side = both(spark, b.tables(), "dlx_worker_liveness")
    assert spark_side == ref_side
    assert spark_side[0] == "unknown" and spark_side[2] == []
    b.t += 30 * model.NS  # now the run outlives the grace: judged at its end
    b.op("channel_open", "late")
    spark_side, ref_side = both(spark, b.tables(), "dlx_worker_liveness")
    assert spark_side == ref_side
    assert [r[1] for r in spark_side[2]] == ["dlx_worker_missing", "dlx_worker_stray"]


def down_rows(b: Builder) -> None:
    def down(kind: str, node: str, ref: str, at: int) -> None:
        b.t = at
        b._emit("supervision_events", f"{node}/rt", kind, node, actor_path="<w>",
                monitor_of="<x>", reason="'boom'", extra=json.dumps({"ref": ref}))

    t0 = 5_000 * MS
    down("down_sent", "n1@h:1", "#Ref<n1.1.1>", t0)
    down("down_received", "n1@h:1", "#Ref<n1.1.1>", t0 + 2 * MS)  # local: 2 ms
    down("down_sent", "n1@h:1", "#Ref<n2.7.1>", t0 + 3 * MS)
    down("down_received", "n2@h:2", "#Ref<n2.7.1>", t0 + 13 * MS)  # remote: 10 ms
    down("down_received", "n2@h:2", "#Ref<n2.8.1>", t0 + 14 * MS)  # noconnection: unpaired


def test_down_latency_pairs_sent_and_received_by_ref(spark: SparkSession) -> None:
    b = Builder()
    down_rows(b)
    h = load.from_arrow(spark, arrow_tables(b.tables()))
    hist, counts = down_latency.histograms(h)
    ref_h = reference.RefHistory.from_rows(b.tables())
    assert hist == reference.down_latency_hist(ref_h)
    assert counts == reference.down_counts(ref_h) == {"down_sent": 2, "down_received": 3,
                                                        "unpaired": 1}
    got = down_latency.summary(h)
    assert got["local"]["p50"] == round(model.bucket_value_ms(model.log_bucket(2 * MS)), 6)
    assert got["remote"]["p99"] == round(model.bucket_value_ms(model.log_bucket(10 * MS)), 6)
    assert got["all"]["n"] == 2


def test_lost_messages_say_where_they_were_last_seen(spark: SparkSession) -> None:
    b = Builder()
    b.open("p"), b.open("c")
    for m in (1, 2, 3, 4):
        b.publish("q", m)
    ch = {"queue": b.q("q"), "conn_id": None}
    b._emit("channel_events", "n1/ch", "publish_in", "n1", msg_id=b.m(2), **ch)
    b._emit("channel_events", "n1/ch", "publish_in", "n1", msg_id=b.m(3), **ch)
    b.applied("q", 1, "enqueue", 3)
    b._emit("channel_events", "n1/ch", "publish_in", "n1", msg_id=b.m(4), **ch)
    b.applied("q", 2, "enqueue", 4)
    b.rep("service_queue", "q", "n1", raft_index=2, msg_id=4, consumer_key="k", attempt=0)
    b._emit("channel_events", "n1/ch", "deliver_out", "n1", msg_id=b.m(4), **ch)
    b.deliver("q", 4)  # delivered, never acked
    b.drain()
    tables = b.tables()
    h = load.from_arrow(spark, arrow_tables(tables))
    from analysis.checks import total_queue

    annotated = where.annotate(h, "total_queue", total_queue.run(h, Params()).violations)
    got = {r["msg_id"]: r["last_seen"] for r in annotated.collect()}
    ref = reference.last_seen(reference.RefHistory.from_rows(tables), set(got))
    assert got == ref == {b.m(1): "client_publish", b.m(2): "channel_publish_in",
                          b.m(3): "ra_enqueued", b.m(4): "client_deliver"}
    h.unpersist()


def test_analyze_takes_file_uris_and_reports_the_new_results(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    synthetic.write_run(run, synthetic.generate(21, 20, ("lose",)))
    out = tmp_path / "out"
    code = cli.main(["analyze", run.as_uri(), "--out", out.as_uri(), *SPARK_ARGS])
    assert code == 1
    summary = json.loads((out / "summary.json").read_text())
    assert {k: summary["checks"][k]["status"] for k in
            ("post_drain_emptiness", "dlx_worker_liveness")} == {
        "post_drain_emptiness": "pass", "dlx_worker_liveness": "pass"}
    assert summary["metrics"]["down_latency_ms"]["down_received"] == 0
    lost = pq.read_table(out / "violations" / "total_queue.parquet").to_pylist()
    # the synthetic loss drops every delivery: the queue applied the enqueue, no more
    assert [(r["violation"], r["last_seen"]) for r in lost] == [
        ("lost_never_delivered", "ra_enqueued")]
    # no s3a connector on this Spark's class path: refused as bad input, with the reason
    assert cli.main(["analyze", "s3a://bucket/run", *SPARK_ARGS]) == model.EXIT_BAD_INPUT
    assert "no file system for s3a://bucket/run" in capsys.readouterr().err


def test_a_segment_of_schema_1_0_compacts_with_null_counts(tmp_path: Path) -> None:
    import pyarrow as pa
    from pyarrow import ipc

    from analysis import compact, schema

    new = schema.schema_of("replica_events")
    old = pa.schema([f for f in new if f.name not in ("ready", "checked_out")],
                    metadata={schema.SCHEMA_VERSION_KEY: b"1.0"})
    seg = tmp_path / "raw" / "replica_events" / "n1" / "n1-0.arrows"
    seg.parent.mkdir(parents=True)
    row = {"run_id": "r", "node": "n1", "emitter": "n1/ra/q", "seq": 0, "ts_ns": 5,
           "wall_ns": 5, "kind": "applied", "queue": "q", "server": "q@n1", "raft_index": 1}
    with pa.OSFile(str(seg), "wb") as sink, ipc.new_stream(sink, old) as writer:
        writer.write_table(pa.Table.from_pylist([row], schema=old))
    compact.compact(tmp_path)
    got = pq.read_table(tmp_path / "history" / "replica_events").to_pylist()
    assert [(r["raft_index"], r["ready"], r["checked_out"]) for r in got] == [(1, None, None)]
