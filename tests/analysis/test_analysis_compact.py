"""Compaction turns a run's IPC segments into the Hive-partitioned Parquet dataset the
checks read: partitioned by run and node, sorted by time, versioned, and tolerant of a
segment whose writer was killed mid-batch."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from analysis import load, schema
from analysis.compact import compact
from analysis.recorder import Recorder


def record(run: Path, node: str, times: list[int], process: str | None = None) -> None:
    rec = Recorder(run, "r1", node, process, register_atexit=False)
    for t in times:
        rec.record("publish", msg_id=t, conn_id="c", channel_id=1, ts_ns=t)
    rec.close()


def test_layout_order_and_metadata(tmp_path: Path) -> None:
    record(tmp_path, "client-1", [30, 10, 20], "a")
    record(tmp_path, "client-1", [15, 25], "b")
    record(tmp_path, "client-2", [5])
    stats = compact(tmp_path)
    assert stats.rows == {"client_ops": 6}
    assert stats.truncated == []
    files = sorted(p.relative_to(tmp_path).as_posix() for p in stats.files)
    assert files == ["history/client_ops/run_id=r1/node=client-1/part-0.parquet",
                     "history/client_ops/run_id=r1/node=client-2/part-0.parquet"]
    one = pq.read_table(tmp_path / files[0])
    assert one["ts_ns"].to_pylist() == [10, 15, 20, 25, 30]
    assert "run_id" not in one.column_names  # it is the partition
    assert schema.check_version(pq.read_schema(tmp_path / files[0]).metadata) \
        == schema.SCHEMA_VERSION
    full = ds.dataset(tmp_path / "history" / "client_ops", partitioning="hive").to_table()
    assert sorted(full["node"].to_pylist()) == ["client-1"] * 5 + ["client-2"]


def test_compacting_again_gives_the_same_dataset(tmp_path: Path) -> None:
    record(tmp_path, "n1", [3, 1, 2])
    first = compact(tmp_path)
    second = compact(tmp_path)
    assert [p.relative_to(tmp_path) for p in first.files] == \
        [p.relative_to(tmp_path) for p in second.files]
    table = ds.dataset(tmp_path / "history" / "client_ops", partitioning="hive").to_table()
    assert table["ts_ns"].to_pylist() == [1, 2, 3]


def test_truncated_segment_keeps_complete_batches(tmp_path: Path) -> None:
    rec = Recorder(tmp_path, "r1", "n1", "p", flush_events=2, register_atexit=False)
    for i in range(5):
        rec.record("publish", msg_id=i)
    # process killed: the fifth event was never flushed and the stream has no end marker
    seg = next((tmp_path / "raw").rglob("*.arrows"))
    data = seg.read_bytes()
    seg.write_bytes(data[: len(data) - 40])
    stats = compact(tmp_path)
    assert stats.truncated == [seg]
    got = pq.read_table(next((tmp_path / "history").rglob("*.parquet")))
    assert got["msg_id"].to_pylist() == [0, 1]


def test_missing_raw_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        compact(tmp_path)


def test_footers_answer_what_spark_would(tmp_path: Path, spark: SparkSession) -> None:
    """Row counts and the first and last times are read from the Parquet footers; a
    file written without statistics leaves the times to Spark."""
    record(tmp_path, "client-1", [30, 10, 20])
    record(tmp_path, "n1", [7])
    compact(tmp_path)
    h = load.load(spark, tmp_path)
    assert h.footer_rows == {"client_ops": 4}
    bare = load.History(spark, h.tables, h.meta)
    assert h.footer_ts_min == {"client_ops": 7}
    assert (h.has("client_ops"), h.has("replica_events"), h.run_end_ns,
            h.first_ts_ns("client_ops"), h.first_ts_ns("replica_events")) \
        == (bare.has("client_ops"), bare.has("replica_events"), bare.run_end_ns,
            bare.first_ts_ns("client_ops"), bare.first_ts_ns("replica_events")) \
        == (True, False, 30, 7, 0)
    f = next((tmp_path / "history").rglob("node=n1/*.parquet"))
    pq.write_table(pq.read_table(f), f, write_statistics=False)
    h = load.load(spark, tmp_path)
    assert h.footer_ts_max == h.footer_ts_min == {"client_ops": None}
    assert (h.run_end_ns, h.first_ts_ns("client_ops")) == (30, 7)


def test_warren_history_compact_writes_the_dataset(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from warren_cli import main

    record(tmp_path, "n1", [2, 1])
    record(tmp_path, "n2", [3])
    assert main(["history", "compact", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "2 segments -> 2 files, rows {'client_ops': 3}" in out
    table = ds.dataset(tmp_path / "history" / "client_ops", partitioning="hive").to_table()
    assert sorted(table["ts_ns"].to_pylist()) == [1, 2, 3]


def test_warren_history_compact_refuses_a_run_without_segments(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from warren_cli import main

    assert main(["history", "compact", str(tmp_path)]) == 4
    err = capsys.readouterr().err
    assert err.startswith("warren history compact: bad input: ")
    assert str(tmp_path / "raw") in err
    assert not (tmp_path / "history").exists()


def test_warren_history_compact_refuses_an_unknown_schema_version(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from warren_cli import main

    target = schema.schema_of("client_ops")
    meta = {schema.SCHEMA_VERSION_KEY: b"99.0"}
    seg = tmp_path / "raw" / "client_ops" / "n1" / "p-0.arrows"
    seg.parent.mkdir(parents=True)
    with pa.OSFile(str(seg), "wb") as sink, \
            ipc.new_stream(sink, target.with_metadata(meta)) as writer:
        writer.write_table(target.empty_table())
    assert main(["history", "compact", str(tmp_path)]) == 4
    assert "unsupported history schema version 99.0" in capsys.readouterr().err
