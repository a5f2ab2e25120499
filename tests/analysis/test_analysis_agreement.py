"""Property: on random synthetic histories with injected anomalies, the Spark checks
and the plain-Python reference agree exactly (rows, counts, verdicts), and every
injected anomaly is reported. Latency histograms agree bucket for bucket."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from analysis import load, metrics, reference, runner, synthetic
from analysis.model import Params
from tests.analysis.conftest import arrow_tables

# anomaly -> (check, violation kinds whose ids must include the injected ones)
REPORTED = {
    "lost": ("total_queue", ("lost_never_delivered", "lost_delivered_never_acked")),
    "duplicated_beyond_redelivery": ("total_queue", ("duplicated_beyond_redelivery",)),
    "unexpected": ("total_queue", ("unexpected",)),
    "wrong_sender": ("local_delivery", ("wrong_sender",)),
    "double_send": ("local_delivery", ("double_send",)),
    "dlx_lost": ("dlx_at_least_once", ("dlx_lost",)),
    "return_order": ("ordering_returns", ("return_order",)),
}

examples = st.lists(
    st.tuples(st.integers(0, 10_000),
              st.sets(st.sampled_from(synthetic.ANOMALIES), max_size=4),
              st.integers(8, 30)),
    min_size=1, max_size=3)


def merge(parts: list[tuple[int, set[str], int]]) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    tables: dict[str, list[Any]] = {}
    truth: dict[str, set[Any]] = {}
    for i, (seed, anomalies, n) in enumerate(parts):
        syn = synthetic.generate(seed, n, tuple(sorted(anomalies)), run_id="merged",
                                 prefix=f"x{i}.", msg_base=1_000_000 * i)
        for t, rows in syn.tables.items():
            if t == "run_meta" and "run_meta" in tables:
                import json

                meta = tables["run_meta"][0]
                queues = json.loads(meta["queues_json"]) | json.loads(rows[0]["queues_json"])
                meta["queues_json"] = json.dumps(queues)
                continue
            tables.setdefault(t, []).extend(rows)
        for k, v in syn.truth.items():
            truth.setdefault(k, set()).update(v)
    return tables, truth


@settings(max_examples=2, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(parts=examples)
def test_spark_equals_reference_and_reports_injected_anomalies(
        spark: SparkSession, parts: list[tuple[int, set[str], int]]) -> None:
    tables, truth = merge(parts)
    h = load.from_arrow(spark, arrow_tables(tables))
    analysis = runner.run_checks(h)
    ref_h = reference.RefHistory.from_rows(tables)
    ref = reference.run_all(ref_h)
    for v in analysis.verdicts:
        got = sorted((tuple(r) for r in analysis.violations[v.check].collect()), key=repr)
        r = ref[v.check]
        assert got == r.violations, v.check
        assert v.violations == len(got), v.check
        assert (v.status, v.examined, v.counts) == (r.status, r.examined, r.counts), v.check
    for anomaly, (check, kinds) in REPORTED.items():
        ids = {row[3] for row in ref[check].violations if row[1] in kinds}
        assert truth.get(anomaly, set()) <= ids, anomaly
    disagreements = {(row[2], row[6]) for row in ref["replica_determinism"].violations
                     if row[1] == "state_disagreement"}
    assert truth.get("state_disagreement", set()) <= disagreements
    crashed = {row[5] for row in ref["supervision_liveness"].violations}
    assert truth.get("not_running", set()) <= crashed
    m = metrics.compute(h, Params())
    assert m.hist == reference.latency_histograms(ref_h, Params())
    assert (m.rate_by_queue, m.rate_by_node) == reference.throughput(ref_h, Params())
    assert m.replication == reference.replication_histograms(ref_h)
    assert m.replication  # the synthetic runs deliver from leaders and followers
    h.unpersist()


def test_clean_synthetic_history_passes_every_check() -> None:
    results = reference.run_all(reference.RefHistory.from_rows(synthetic.generate(5, 60).tables))
    assert {name: r.status for name, r in results.items()} == dict.fromkeys(results, "pass")
