"""`total_queue` judges delivery limits by the release the run's nodes modelled, read
from the run's recorded release record (`run_meta`), the reference checker and Spark
alike.

A message that never reached an ack is excused as *dropped* when its queue gave up on
it: rejected without requeue, or returned past its delivery limit. Which returns count
toward that limit is the release's: up to 4.2 every return (a `basic.nack` or
`basic.reject` with requeue, and the returns of a closed channel), in 4.3 only the
returns of a consumer that went away (a failed delivery) and not its requeues, and on
3.10 a queue declares any limit it has itself.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pyspark.sql import SparkSession

from analysis import load, reference
from analysis.checks import total_queue
from analysis.model import Params, RunConfig
from releases import RELEASES
from tests.analysis.cases import Builder
from tests.analysis.conftest import arrow_tables
from tests.analysis.test_analysis_message_summary import _agree

TQ = "total_queue"


def _history(series: str) -> tuple[dict[str, list[dict[str, Any]]], Builder]:
    """Under `series`' record: message 1 requeued by nack five times (its
    `x-delivery-count` as that release counts), message 2 held by a consumer whose
    channel closed three times; neither acked, both on queue `q` limited to 2, and
    message 3 on `d` (no limit declared) requeued 25 times."""
    release = RELEASES[series]
    b = Builder()
    b.config("q", type="quorum", delivery_limit=2)
    b.config("d", type="quorum")
    b.open("p")
    b.open("c")
    requeues_count = release.requeue_counts_toward_limit
    b.publish("q", 1)
    for n in range(5):
        t = b.deliver("q", 1, redelivered=n > 0, count=n if requeues_count else None)
        b.settle("nack", "q", 1, t, requeue=True)
    b.publish("q", 2)
    for n in range(3):  # each hand-out ends with its channel: a failed delivery
        b.open("x", ch=n + 1)
        b.deliver("q", 2, conn="x", ch=n + 1, redelivered=n > 0, count=n or None)
        b.close("x", ch=n + 1)
    b.publish("d", 3)
    for n in range(25):
        t = b.deliver("d", 3, redelivered=n > 0, count=n if requeues_count else None)
        b.settle("nack", "d", 3, t, requeue=True)
    b.drain()
    tables = b.tables()
    tables["run_meta"][0]["config_json"] = json.dumps({"rabbitmq_version": series,
                                                       "release": release.recorded()})
    return tables, b


#: the messages `total_queue` reports lost under each release
LOST = {
    "3.10": {3},  # no default limit: 25 requeues leave message 3 in its queue
    "4.0": set(),  # every return counts: 1 and 3 went past their limits, 2 too
    "4.2": set(),
    "4.3": {1, 3},  # requeues do not count: only 2, failed three times, was dropped
}


@pytest.mark.parametrize("series", sorted(LOST))
def test_the_reference_counts_the_returns_its_release_counts(series: str) -> None:
    tables, b = _history(series)
    result = reference.run_all(reference.RefHistory.from_rows(tables))[TQ]
    lost = {v[3] for v in result.violations if v[1] == "lost_delivered_never_acked"}
    assert lost == {b.m(m) for m in LOST[series]}


def test_a_run_that_recorded_a_record_is_read_from_it() -> None:
    tables, _b = _history("4.3")
    meta = RunConfig.from_row(tables["run_meta"][0])
    assert meta.requeue_counts_toward_limit() is False
    assert meta.delivery_limit(next(q for q in meta.queues if q.endswith("d"))) == 20
    assert RunConfig().requeue_counts_toward_limit() is True  # no record: as 4.0-4.2


@pytest.mark.parametrize("series", ["4.2", "4.3"])
def test_spark_agrees_with_the_reference(spark: SparkSession, series: str) -> None:
    tables, _b = _history(series)
    h = load.from_arrow(spark, arrow_tables(tables))
    result = total_queue.run(h, Params())
    rows = sorted((tuple(r) for r in result.violations.collect()), key=repr)
    h.unpersist()
    ref = reference.run_all(reference.RefHistory.from_rows(tables))[TQ]
    assert rows == sorted(ref.violations, key=repr)
    # the fixed-width summary and the exact rules give every message the same verdict
    _agree(spark, tables)
