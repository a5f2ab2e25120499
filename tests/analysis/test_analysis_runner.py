"""`runner.run_checks` submits several checks at once; what it returns must not depend
on how many run together: the same verdicts, counts and violation rows, in the checks'
fixed order, and a failing check still fails the run."""

from __future__ import annotations

import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from analysis import analyze, load, model, runner, synthetic
from analysis.checks import ALL
from analysis.checks.common import CheckResult, count_parts, take_violations
from analysis.load import History
from tests.analysis.conftest import arrow_tables

ANOMALIES = ("lose", "duplicate", "reorder", "nondeterminism", "wrong_sender", "dlx_lose",
             "crash")


def _outcome(analysis: runner.Analysis) -> list[tuple[object, ...]]:
    return [(v.check, v.status, v.examined, v.violations, v.sample, v.note, v.counts,
             sorted((tuple(r) for r in analysis.violations[v.check].collect()), key=repr))
            for v in analysis.verdicts]


def _history(spark: SparkSession) -> History:
    return load.from_arrow(spark, arrow_tables(synthetic.generate(21, 40, ANOMALIES).tables))


def _exploding_check(h: History, p: object) -> CheckResult:
    raise RuntimeError("check exploded")


def test_concurrent_checks_give_what_one_at_a_time_gives(spark: SparkSession) -> None:
    one = _history(spark)
    alone = runner.run_checks(one, workers=1)
    expected = _outcome(alone)
    one.unpersist()
    many = _history(spark)
    together = runner.run_checks(many, workers=4)
    assert _outcome(together) == expected
    many.unpersist()
    assert [v.check for v in together.verdicts] == list(ALL)
    assert set(together.timings_s) == set(ALL)
    assert any(v.violations for v in together.verdicts)  # the anomalies were found


def test_only_keeps_the_fixed_order(spark: SparkSession) -> None:
    h = _history(spark)
    picked = ["post_drain_emptiness", "dlx_at_least_once", "flow_not_stuck"]
    result = runner.run_checks(h, only=picked, workers=3)
    h.unpersist()
    assert [v.check for v in result.verdicts] == [c for c in ALL if c in picked]


def test_a_failing_check_fails_the_run(spark: SparkSession,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ALL, "flow_not_stuck", _exploding_check)
    h = _history(spark)
    with pytest.raises(RuntimeError, match="check exploded"):
        runner.run_checks(h, only=["dlx_at_least_once", "flow_not_stuck"], workers=2)
    h.unpersist()


def test_derived_frames_are_built_once_across_threads(spark: SparkSession) -> None:
    h = _history(spark)
    built: list[str] = []

    def build() -> object:
        built.append("x")
        return h["client_ops"]

    with ThreadPoolExecutor(4) as pool:
        frames = list(pool.map(lambda _: h.cached("shared", build), range(8)))
    h.unpersist()
    assert built == ["x"]
    assert all(f is frames[0] for f in frames)


def test_frames_of_other_names_are_built_while_one_is(spark: SparkSession) -> None:
    """One build does not hold up another: a check waiting for a large frame does not
    stop a second check from building the small one it needs."""
    h = _history(spark)
    b_started = threading.Event()

    def build_a() -> DataFrame:
        assert b_started.wait(60), "the build of b waited for the build of a"
        return h["client_ops"]

    def build_b() -> DataFrame:
        b_started.set()
        return h["client_ops"].limit(1)

    with ThreadPoolExecutor(2) as pool:
        a = pool.submit(h.cached, "a", build_a)
        b = pool.submit(h.cached, "b", build_b)
        assert a.result(90).count() == h["client_ops"].count()
        assert b.result(90).count() == 1
    h.unpersist()


def test_a_derived_frame_is_computed_once_and_read_from_its_stored_rows(
        spark: SparkSession, tmp_path: Path) -> None:
    """Queries over a derived frame read the rows computed when it was built, not the
    history's files again, and dropping the history drops those rows."""
    run = tmp_path / "run"
    synthetic.write_run(run, synthetic.generate(5, 10))
    h = load.load(spark, run)
    ops = h.cached("ops", lambda: h["client_ops"].select("msg_id", "kind"))
    expected = sorted(map(repr, ops.collect()))
    shutil.rmtree(run / "history")  # the files are gone; the frame's rows are not
    assert sorted(map(repr, ops.collect())) == expected
    assert ops.where(F.col("kind") == "publish").count() > 0
    h.unpersist()
    assert _cache_is_empty(spark)


def _cache_is_empty(spark: SparkSession) -> bool:
    """Nothing cached and no stored rows: neither a cached plan nor an RDD whose blocks
    are kept (the derived frames' checkpoints)."""
    return (bool(spark._jsparkSession.sharedState().cacheManager().isEmpty())
            and spark.sparkContext._jsc.getPersistentRDDs().isEmpty())


def test_dropping_the_history_drops_every_frame_the_analysis_cached(
        spark: SparkSession) -> None:
    """A JVM kept for many analyses (a test session, `warren_cluster`) must not keep
    their cached frames, nor the plans and broadcast tables those hold: derived frames,
    frames one check caches for itself and the violations the runner caches."""
    spark.catalog.clearCache()
    h = _history(spark)
    analysis = runner.run_checks(h, workers=3)
    failed = {v.check for v in analysis.verdicts if v.violations}
    assert {"total_queue", "ordering_sac_fifo"} <= {v.check for v in analysis.verdicts
                                                    if v.status != model.SKIPPED}
    assert failed and all(analysis.violations[c].is_cached for c in failed)
    assert not _cache_is_empty(spark)
    h.unpersist()
    assert _cache_is_empty(spark)


def test_an_analysis_into_files_drops_what_it_cached_even_when_a_check_fails(
        spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spark.catalog.clearCache()
    code, _ = analyze.analyze_history(_history(spark), tmp_path / "failing")
    assert code == 1
    assert _cache_is_empty(spark)
    monkeypatch.setitem(ALL, "flow_not_stuck", _exploding_check)
    with pytest.raises(RuntimeError, match="check exploded"):
        analyze.analyze_history(_history(spark), tmp_path / "broken")
    assert _cache_is_empty(spark)


@pytest.mark.parametrize(("master", "workers"), [
    ("local[2]", 3), ("local[1]", 2), ("local[16]", runner.MAX_WORKERS),
    ("spark://host:7077", runner.MAX_WORKERS),
])
def test_default_workers_follow_the_master(master: str, workers: int) -> None:
    assert runner.check_workers(master) == workers


def _exploding(spark: SparkSession) -> DataFrame:
    """A violations frame that fails if Spark ever evaluates it."""
    return spark.range(1).select(F.raise_error(F.lit("evaluated")).alias("x"))


def test_a_violation_count_of_zero_leaves_the_frame_unevaluated(spark: SparkSession) -> None:
    verdict, _ = runner.verdict_of(CheckResult("c", None, 5, _exploding(spark),
                                               violation_count=0))
    assert (verdict.status, verdict.violations, verdict.sample) == (model.PASS, 0, [])


def test_without_a_violation_count_the_runner_counts_the_rows(spark: SparkSession) -> None:
    with pytest.raises(Exception, match="evaluated"):
        runner.verdict_of(CheckResult("c", None, 5, _exploding(spark)))


def test_count_parts_gathers_several_frames_in_one_collect(spark: SparkSession) -> None:
    nums = spark.range(10)
    got = count_parts((nums, {"n": F.count("*"), "even": F.sum(F.when(F.col("id") % 2 == 0, 1))}),
                      (nums.where(F.col("id") > 100), {"none": F.count("*"),
                                                       "null_sum": F.sum("id")}))
    assert got == {"n": 10, "even": 5, "none": 0, "null_sum": 0}
    with pytest.raises(ValueError, match="twice"):
        count_parts((nums, {"n": F.count("*")}), (nums, {"n": F.count("*")}))


def test_take_violations_sums_and_removes_the_underscored_counts() -> None:
    counts = {"decisions": 7, "_missing": 2, "resent": 1, "_double": 3}
    assert take_violations(counts) == 5
    assert counts == {"decisions": 7, "resent": 1}
    assert take_violations(counts) == 0
