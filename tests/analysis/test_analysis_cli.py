"""`warren analyze` end to end on synthetic runs: exit codes CI can rely on, and the
report files a reader opens (summary.json, violations, report.html with its plots),
locally or at a URI Spark's Hadoop file system writes to."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from analysis import cli, report, synthetic, uris
from analysis.spark import SMALL_HISTORIES_CONF

SPARK_ARGS = ["--master", "local[2]", *[a for k, v in SMALL_HISTORIES_CONF.items()
                                       if k.startswith("spark.sql.")
                                       for a in ("--conf", f"{k}={v}")]]


def test_missing_run_directory_is_bad_input(tmp_path: Path) -> None:
    assert cli.main(["analyze", str(tmp_path / "nope")]) == 4


def test_unknown_schema_version_is_bad_input(tmp_path: Path) -> None:
    part = tmp_path / "history" / "client_ops" / "run_id=r" / "node=n"
    part.mkdir(parents=True)
    table = pa.table({"ts_ns": [1]}).replace_schema_metadata({b"warren.schema_version": b"9.0"})
    pq.write_table(table, part / "part-0.parquet")
    assert cli.main(["analyze", str(tmp_path)]) == 4


def test_failing_run_exits_1_and_writes_the_report(spark: SparkSession, tmp_path: Path) -> None:
    run = tmp_path / "run"
    code = cli.main(["analyze", str(run), "--synthetic", "11", "--messages", "30",
                     "--anomalies", "lose,crash", *SPARK_ARGS])
    assert code == 1
    out = run / "analysis"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["valid"] is False
    assert summary["checks"]["total_queue"]["lost"] == 1
    assert summary["checks"]["supervision_liveness"]["status"] == "fail"
    assert summary["checks"]["replica_determinism"]["status"] == "pass"
    lost = spark.read.parquet(str(out / "violations" / "total_queue.parquet")).collect()
    assert [r["violation"] for r in lost] in (["lost_never_delivered"],
                                              ["lost_delivered_never_acked"])
    assert pq.read_table(out / "verdicts.parquet").num_rows == len(summary["checks"])
    page = (out / "report.html").read_text()
    for name in report.PLOTS:
        assert (out / name).stat().st_size > 0
        assert f'data-file="{name}"' in page
    assert 'id="violations-total_queue"' in page


def test_run_without_drain_exits_2(tmp_path: Path) -> None:
    syn = synthetic.generate(12, 12)
    syn.tables["client_ops"] = [r for r in syn.tables["client_ops"]
                                if r["kind"] != "drain_end"]
    synthetic.write_run(tmp_path, syn)
    assert cli.main(["analyze", str(tmp_path), "--out", str(tmp_path / "out"),
                     "--checks", "total_queue,supervision_liveness", *SPARK_ARGS]) == 2
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["valid"] == "unknown"
    assert {k: v["status"] for k, v in summary["checks"].items()} == {
        "total_queue": "unknown", "supervision_liveness": "pass"}


def test_unknown_check_name_is_bad_input(tmp_path: Path) -> None:
    synthetic.write_run(tmp_path, synthetic.generate(1, 5))
    assert cli.main(["analyze", str(tmp_path), "--checks", "linearizable"]) == 4


def test_upload_copies_a_tree_through_sparks_file_system(spark: SparkSession,
                                                         tmp_path: Path) -> None:
    local = tmp_path / "staging"
    (local / "sub").mkdir(parents=True)
    (local / "a.json").write_text("{}")
    (local / "sub" / "b.png").write_bytes(b"\x89PNG")
    dest = f"file://{tmp_path}/remote/analysis"
    assert uris.upload(spark, local, dest) == [f"{dest}/a.json", f"{dest}/sub/b.png"]
    assert (tmp_path / "remote" / "analysis" / "a.json").read_text() == "{}"
    assert (tmp_path / "remote" / "analysis" / "sub" / "b.png").read_bytes() == b"\x89PNG"


def test_outputs_go_to_a_uri_through_spark(spark: SparkSession, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Storage only Spark reaches (hdfs://, s3a://) is stood in for by file:// URIs
    treated as remote: the same code path, Hadoop's local file system underneath."""
    real, real_upload = uris.is_remote, uris.upload
    monkeypatch.setattr(uris, "is_remote", lambda loc: str(loc).startswith("file://")
                        or real(loc))
    uploads: list[tuple[Path, str]] = []

    def upload(session: object, local: Path, location: str) -> list[str]:
        uploads.append((local, location))
        return real_upload(session, local, location)

    monkeypatch.setattr(uris, "upload", upload)
    run = tmp_path / "run"
    synthetic.write_run(run, synthetic.generate(11, 30, ("lose",)))
    dest = tmp_path / "bucket" / "analysis"
    code = cli.main(["analyze", str(run), "--out", f"file://{dest}", *SPARK_ARGS])
    assert code == 1
    summary = json.loads((dest / "summary.json").read_text())
    assert summary["checks"]["total_queue"]["lost"] == 1
    assert pq.read_table(dest / "verdicts.parquet").num_rows == len(summary["checks"])
    for name in ("report.html", *report.PLOTS):
        assert (dest / name).stat().st_size > 0
    lost = spark.read.parquet(str(dest / "violations" / "total_queue.parquet")).collect()
    assert len(lost) == 1
    assert not (run / "analysis").exists()  # nothing written beside the run instead
    # the driver's files went through Spark's file system from a staging directory,
    # which is gone afterwards
    [(staging, location)] = uploads
    assert location == f"file://{dest}"
    assert not staging.exists()


def test_a_missing_history_at_a_uri_is_bad_input(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    real = uris.is_remote
    monkeypatch.setattr(uris, "is_remote", lambda loc: str(loc).startswith("file://")
                        or real(loc))
    missing = f"file://{tmp_path}/nothing-here"
    assert cli.main(["analyze", missing, "--out", str(tmp_path / "out"), *SPARK_ARGS]) == 4
    assert f"bad input: {missing} does not exist" in capsys.readouterr().err
