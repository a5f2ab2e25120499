"""`total_queue` reads most messages' verdicts from fixed-width aggregates (`_summary`)
and leaves the rest, the suspects, to the exact rules over arrays (`_exact`). A message
the summary calls clean is never looked at again, so its verdict must be the one the
exact rules give, and every message must come out once."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from analysis import load, synthetic
from analysis.checks import total_queue
from analysis.load import History
from analysis.model import Params, RunConfig
from tests.analysis.conftest import arrow_tables
from tests.analysis.test_analysis_cases import merged_cases


def _rows(df: DataFrame) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


def _both(h: History) -> tuple[DataFrame, DataFrame, DataFrame]:
    """(every message's verdict as the check reads it, every message by the exact rules,
    the summary)."""
    p = Params()
    rows = total_queue._message_rows(h, p)
    exact = total_queue._exact(rows, h.meta)
    summary = total_queue._summary(rows, total_queue._Chains(h.meta))
    return total_queue.messages(h, p), exact, summary


def _agree(spark: SparkSession, tables: dict[str, Any]) -> tuple[int, int]:
    """Assert that both ways give the same rows; return (clean, suspect) messages."""
    h = load.from_arrow(spark, arrow_tables(tables))
    got, exact, summary = _both(h)
    assert got.schema.simpleString() == exact.schema.simpleString()
    assert _rows(got) == _rows(exact)
    counts = summary.groupBy().agg(F.sum(F.col("clean").cast("int")).alias("c"),
                                   F.sum((~F.col("clean")).cast("int")).alias("s")).first()
    h.unpersist()
    return counts["c"], counts["s"]


def test_hand_made_corners_get_the_exact_verdict(spark: SparkSession) -> None:
    tables, _ = merged_cases()
    clean, suspect = _agree(spark, tables)
    assert clean > 0 and suspect > 0


@pytest.mark.parametrize("seed, anomalies", [
    (21, ()), (22, ("lose", "duplicate", "unexpected")), (23, ("dlx_lose", "reorder")),
])
def test_synthetic_runs_get_the_exact_verdict(
        spark: SparkSession, seed: int, anomalies: tuple[str, ...]) -> None:
    syn = synthetic.generate(seed, 60, anomalies)
    clean, _ = _agree(spark, syn.tables)
    assert clean > 0


def test_dead_lettered_messages_are_clean_along_their_chain(spark: SparkSession) -> None:
    """A message dead-lettered from its queue to the target and delivered there is read
    from the summary; so is one whose queue's chain is ambiguous only when it never
    reaches the shared target."""
    syn = synthetic.generate(24, 60)
    meta = json.loads(syn.tables["run_meta"][0]["queues_json"])
    assert any(c.get("dlx_target") for c in meta.values())
    h = load.from_arrow(spark, arrow_tables(syn.tables))
    _, _, summary = _both(h)
    moved = summary.where(F.col("end_depth") > 0)
    assert moved.count() > 0
    assert moved.where(~F.col("clean")).count() == 0
    h.unpersist()


def test_a_target_shared_by_two_chains_makes_its_messages_suspects() -> None:
    meta = RunConfig(queues={"a": {"dlx_target": "t"}, "b": {"dlx_target": "t"}, "t": {},
                             "c": {"dlx_target": "d"}, "d": {"dlx_target": "c"}})
    chains = total_queue._Chains(meta)
    assert chains.place == {"a": (0, 0), "b": (1, 0)}
    assert chains.depths == 1


@pytest.mark.parametrize("rows, summarised", [
    (total_queue.SUMMARY_MIN_ROWS, False), (total_queue.SUMMARY_MIN_ROWS + 1, True)])
def test_a_small_history_reads_every_message_with_the_exact_rules(
        spark: SparkSession, rows: int, summarised: bool) -> None:
    """Where a history's footers say it is small, per-query costs dominate: no summary.
    The verdicts are the same either way."""
    syn = synthetic.generate(25, 40)
    h = load.from_arrow(spark, arrow_tables(syn.tables))
    footers = {t: len(r) for t, r in syn.tables.items()}
    footers["client_ops"] += rows - sum(footers.values())  # as if it had `rows` in all
    h.footer_rows = footers
    got, exact, _ = _both(h)
    assert _rows(got) == _rows(exact)
    assert any(k.startswith("total_queue_summary/") for k in h.derived) == summarised
    h.unpersist()
