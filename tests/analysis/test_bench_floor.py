"""The analysis bench's floor (`bench.analysis.floor_queries`) is the least work any
implementation of the checks must do, and the bench compares the checks against it. It
only means that if it does that work: it must see every block of every queue's log,
every message, and a member that applied something else."""

from __future__ import annotations

from pyspark.sql import SparkSession

from analysis import load, synthetic
from analysis.checks.common import LOG_BLOCK
from bench.analysis import floor_queries
from tests.analysis.conftest import arrow_tables


def _floor(spark: SparkSession, syn: synthetic.Synthetic) -> tuple[dict, dict]:
    h = load.from_arrow(spark, arrow_tables(syn.tables))
    blocks, messages = (q.collect()[0].asDict() for q in floor_queries(h))
    h.unpersist()
    return blocks, messages


def test_floor_counts_every_block_and_message(spark: SparkSession) -> None:
    syn = synthetic.generate(seed=3, messages=30)
    applied = [r for r in syn.tables["replica_events"] if r["kind"] == "applied"]
    ops = syn.tables["client_ops"]
    blocks, messages = _floor(spark, syn)
    assert blocks == {"blocks": len({(r["queue"], r["raft_index"] // LOG_BLOCK)
                                     for r in applied}), "diverged": 0}
    assert messages == {"messages": len({r["msg_id"] for r in ops
                                         if r.get("msg_id") is not None}),
                        "undelivered": 0}


def test_floor_sees_a_member_that_applied_another_state(spark: SparkSession) -> None:
    syn = synthetic.generate(seed=3, messages=30)
    row = next(r for r in syn.tables["replica_events"] if r["kind"] == "applied")
    row["state_digest"] += 1
    blocks, _ = _floor(spark, syn)
    assert blocks["diverged"] == 1
