"""The recorder is the sink of `actors.trace`: every emitted event lands, in order,
in its table's Arrow IPC segments, and survives an abrupt end up to the last batch."""

from __future__ import annotations

import json
from pathlib import Path

import gevent
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from actors import trace
from analysis import schema
from analysis.client_ops import ClientHistory, body_digest
from analysis.recorder import Recorder


def read_table(run: Path, table: str) -> pa.Table:
    batches = []
    for seg in sorted((run / "raw" / table).rglob("*.arrows")):
        with pa.OSFile(str(seg), "rb") as f:
            batches.extend(ipc.open_stream(f))
    return pa.Table.from_batches(batches, schema=schema.schema_of(table))


def test_events_are_routed_to_their_tables_with_envelope(tmp_path: Path) -> None:
    clock = iter(range(100, 10_000, 10))
    rec = Recorder(tmp_path, "r1", "n1", "n1-main", clock=lambda: next(clock),
                   wall_clock=lambda: 7, register_atexit=False)
    rec.record("applied", queue="q1", server="q1@n1", raft_term=1, raft_index=1,
               cmd_type="enqueue", msg_id=5, emitter="n1/ra/q1")
    rec.record("credit_blocked", entity_type="channel", entity_id="c/1", value=33)
    rec.record("applied", queue="q1", server="q1@n1", raft_term=1, raft_index=2,
               cmd_type="settle", msg_id=5, emitter="n1/ra/q1")
    rec.close()
    rep = read_table(tmp_path, "replica_events").to_pylist()
    assert [(r["emitter"], r["seq"], r["raft_index"], r["cmd_type"]) for r in rep] == [
        ("n1/ra/q1", 0, 1, "enqueue"), ("n1/ra/q1", 1, 2, "settle")]
    assert {(r["run_id"], r["node"], r["wall_ns"]) for r in rep} == {("r1", "n1", 7)}
    assert rep[0]["ts_ns"] < rep[1]["ts_ns"]
    flow = read_table(tmp_path, "flow_events").to_pylist()
    assert [(r["kind"], r["entity_id"], r["value"], r["emitter"]) for r in flow] == [
        ("credit_blocked", "c/1", 33, "n1-main")]


def test_unknown_kinds_and_fields_are_kept_as_json(tmp_path: Path) -> None:
    rec = Recorder(tmp_path, "r1", "n1", register_atexit=False)
    rec.record("process_start", pid="<0.1.0>")
    rec.record("crashed", actor_path="a/b", reason="boom", stack_depth=3)
    rec.close()
    other = read_table(tmp_path, "other_events").to_pylist()
    assert [(r["kind"], json.loads(r["extra"])) for r in other] == [
        ("process_start", {"pid": "<0.1.0>"})]
    sup = read_table(tmp_path, "supervision_events").to_pylist()
    assert [(r["actor_path"], r["reason"], json.loads(r["extra"])) for r in sup] == [
        ("a/b", "boom", {"stack_depth": 3})]


def test_installed_as_trace_sink_records_from_many_greenlets(tmp_path: Path) -> None:
    rec = Recorder(tmp_path, "r1", "n1", flush_events=7, register_atexit=False)
    previous = trace.set_sink(rec.sink)
    try:
        def worker(k: int) -> None:
            for i in range(50):
                trace.emit("service_queue", emitter=f"g{k}", queue="q", msg_id=i, attempt=0)
                if i % 10 == 0:
                    gevent.sleep(0)
        gevent.joinall([gevent.spawn(worker, k) for k in range(8)])
    finally:
        trace.set_sink(previous)
    rec.close()
    rows = read_table(tmp_path, "replica_events").to_pylist()
    assert len(rows) == 400
    for k in range(8):
        mine = [r for r in rows if r["emitter"] == f"g{k}"]
        assert [r["seq"] for r in mine] == list(range(50))
        assert [r["msg_id"] for r in mine] == list(range(50))


def test_flushes_by_count_and_rotates_segments(tmp_path: Path) -> None:
    rec = Recorder(tmp_path, "r1", "n1", "proc", flush_events=10, segment_bytes=1,
                   register_atexit=False)
    for i in range(25):
        rec.record("publish", msg_id=i, conn_id="c", channel_id=1)
    segments = sorted((tmp_path / "raw" / "client_ops" / "n1").glob("proc-*.arrows"))
    assert len(segments) == 2  # two full batches flushed, each in its own segment
    rec.close()
    assert len(read_table(tmp_path, "client_ops")) == 25
    rec.record("publish", msg_id=99)  # after close: ignored, not an error
    assert len(read_table(tmp_path, "client_ops")) == 25


def test_flushes_by_time(tmp_path: Path) -> None:
    now = [0]
    rec = Recorder(tmp_path, "r1", "n1", flush_interval_s=1.0, clock=lambda: now[0],
                   register_atexit=False)
    rec.record("publish", msg_id=1)
    assert not list(tmp_path.rglob("*.arrows"))
    now[0] = 2_000_000_000
    rec.record("publish", msg_id=2)
    assert [r["msg_id"] for r in read_table(tmp_path, "client_ops").to_pylist()] == [1, 2]
    rec.close()


def test_client_history_expands_multiple_confirms_and_acks(tmp_path: Path) -> None:
    rec = Recorder(tmp_path, "r1", "client-1", register_atexit=False)
    client = ClientHistory(rec.sink, "client-1")
    pub = client.channel("conn-1", 1)
    for seq, m in enumerate((10, 11, 12), start=1):
        pub.publish("q", m, seq, f"m{m}".encode())
    pub.confirm(2, multiple=True)
    pub.close(error="connection reset")
    sub = client.channel("conn-2", 1)
    for tag, m in enumerate((10, 11, 12), start=1):
        sub.deliver("q", "ctag", tag, m, f"m{m}".encode(), redelivered=False)
    sub.ack(2, multiple=True)
    sub.nack(3, requeue=False)
    rec.close()
    rows = read_table(tmp_path, "client_ops").to_pylist()
    got = [(r["kind"], r["msg_id"], r["multiple"]) for r in rows
           if r["kind"] in ("confirm", "pub_timeout", "ack", "nack")]
    assert got == [("confirm", 10, True), ("confirm", 11, True), ("pub_timeout", 12, None),
                   ("ack", 10, True), ("ack", 11, True), ("nack", 12, False)]
    delivered = [r for r in rows if r["kind"] == "deliver"]
    assert delivered[0]["body_digest"] == body_digest(b"m10")
    assert [r["kind"] for r in rows if r["conn_id"] == "conn-1"][-1] == "channel_close"


@pytest.mark.parametrize("table", schema.TABLES)
def test_every_schema_carries_the_version(table: str) -> None:
    assert schema.check_version(schema.schema_of(table).metadata) == schema.SCHEMA_VERSION


def test_unknown_major_version_is_refused() -> None:
    with pytest.raises(ValueError, match="unsupported"):
        schema.check_version({schema.SCHEMA_VERSION_KEY: b"2.0"})
    with pytest.raises(ValueError, match=r"no warren\.schema_version"):
        schema.check_version({})
