"""`warren analyze` end to end on synthetic runs: exit codes CI can rely on, and the
report files a reader opens (summary.json, violations, report.html with its plots)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from analysis import cli, report, synthetic
from tests.analysis.conftest import TEST_CONF

SPARK_ARGS = ["--master", "local[2]", *[a for k, v in TEST_CONF.items()
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
