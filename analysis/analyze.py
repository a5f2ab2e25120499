"""One analysis of one run: load, check, measure, write outputs, choose the exit code.

Kept apart from the command line so tests (and the harness) can call it with a
session they already hold. The exit code is `model.exit_code` of the
verdicts; errors and bad input are mapped by the command line.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from analysis import load, metrics, model, report, runner, uris, verdict_table
from analysis.checks import down_latency, where
from analysis.load import History
from analysis.model import Params

TOP_VIOLATIONS = 20
SUMMARY_SCHEMA = 1


TABLE_COLUMNS = ("check", "status", "examined", "violations", "sample", "note")


def format_table(rows: list[dict[str, Any]], width: int | None = None) -> str:
    """The verdict table as aligned text, fitted to `width` columns (default: the
    terminal's); the notes in full are in `summary.json` and `report.html`."""
    cells = [[r.get(c) for c in TABLE_COLUMNS] for r in rows]
    return verdict_table.fit(TABLE_COLUMNS, cells,
                             width or verdict_table.terminal_width()).text


def analyze_history(h: History, out: Path, params: Params | None = None,
                    timings: dict[str, float] | None = None,
                    only: list[str] | None = None,
                    workers: int | None = None,
                    violations_at: str | None = None) -> tuple[int, dict[str, Any]]:
    """Checks (all, or `only` these; `workers` at once), metrics and every output file
    for a loaded history, into `out`; the violation tables into `violations_at` instead
    when given (a URI Spark writes to)."""
    try:
        return _analyze(h, out, params or Params(), dict(timings or {}), only, workers,
                        violations_at)
    finally:
        h.unpersist()  # a JVM kept for more analyses gets its memory back


def _analyze(h: History, out: Path, p: Params, timings: dict[str, float],
             only: list[str] | None, workers: int | None,
             violations_at: str | None) -> tuple[int, dict[str, Any]]:
    out.mkdir(parents=True, exist_ok=True)
    result = runner.run_checks(h, p, only, workers)
    timings.update(result.timings_s)
    start = time.perf_counter()
    m = metrics.compute(h, p)
    m.summary["down_latency_ms"] = down_latency.summary(h)  # a metric only, never a verdict
    timings["metrics"] = round(time.perf_counter() - start, 3)
    start = time.perf_counter()
    verdict_rows = [v.row() for v in result.verdicts]
    pq.write_table(pa.Table.from_pylist(verdict_rows), out / "verdicts.parquet")
    top: dict[str, list[dict[str, Any]]] = {}
    vdir = violations_at or str(out / "violations")
    for v in result.verdicts:
        df = result.violations[v.check]
        if v.violations:
            rows = where.annotate(h, v.check, df)  # lost messages: where last seen
            rows.coalesce(1).write.mode("overwrite").parquet(
                uris.join(vdir, f"{v.check}.parquet"))
            top[v.check] = [r.asDict() for r in
                            rows.orderBy("violation", "queue", "msg_id", "raft_index", "key")
                            .limit(TOP_VIOLATIONS).collect()]
        df.unpersist()
    plots = report.plot_all(m, out, p.bucket_ns / 1e9)
    spark = h.spark
    summary: dict[str, Any] = {
        "schema": SUMMARY_SCHEMA,
        "run_id": h.meta.run_id,
        "valid": result.valid,
        "checks": {v.check: {"status": v.status, "examined": v.examined,
                             "violations": v.violations, "sample": v.sample, "note": v.note,
                             **v.counts, **_fractions(v)}
                   for v in result.verdicts},
        "metrics": m.summary,
        "spark": {"master": spark.sparkContext.master, "version": spark.version,
                  "app_id": spark.sparkContext.applicationId,
                  "conf": {k: v for k, v in spark.sparkContext.getConf().getAll()
                           if k.startswith("spark.sql.") or k in ("spark.driver.memory",)}},
        "run": asdict(h.meta),
        "params": asdict(p),
        "timings_s": timings,
    }
    report.write_html(out / "report.html", summary, verdict_rows, top, plots)
    timings["report"] = round(time.perf_counter() - start, 3)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    return model.exit_code(result.valid), summary


def _fractions(v: runner.Verdict) -> dict[str, float]:
    """Jepsen-style fractions of attempts for the total-queue counts."""
    attempted = v.counts.get("attempted")
    if not attempted:
        return {}
    keys = ("lost", "unexpected", "duplicated", "recovered_nacked", "recovered_indeterminate",
            "settled_ok")
    return {f"{k}_frac": round(v.counts.get(k, 0) / attempted, 6) for k in keys}


def analyze_run(spark: SparkSession, run_dir: str | Path, out: str | Path | None = None,
                params: Params | None = None,
                only: list[str] | None = None,
                workers: int | None = None) -> tuple[int, dict[str, Any]]:
    """Load `<run_dir>/history` and analyse it into `out` (default `<run_dir>/analysis`),
    a local path or a URI of storage Spark writes to (see `analysis.uris`)."""
    start = time.perf_counter()
    h = load.load(spark, run_dir)
    timings = {"load": round(time.perf_counter() - start, 3)}
    target = str(out) if out else uris.join(run_dir, "analysis")
    if not uris.is_remote(target):
        return analyze_history(h, uris.local_path(target), params, timings, only, workers)
    staging = Path(tempfile.mkdtemp(prefix="warren-analysis-"))
    try:
        result = analyze_history(h, staging, params, timings, only, workers,
                                 violations_at=uris.join(target, "violations"))
        uris.upload(spark, staging, target)
        return result
    finally:
        shutil.rmtree(staging, ignore_errors=True)


