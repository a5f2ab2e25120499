"""`classic-rpc` end to end: RPC clients with exclusive server-named reply queues and
RPC servers on a durable classic work queue, whose home node is killed and restarted
meanwhile. One run: it passes every check of the analysis but total_queue (what
RabbitMQ does not keep, such as replies in a reply queue that went with its
connection or its node, is not called lost), its classic queues are in the history
with their type, and a confirmed request taken from the work queue behind the
workload's back is reported as exactly that one lost message, the only one.

The run uses the plugin's session-scoped SparkSession (`warren_analyzer`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from rich.console import Console

from harness.pytest_plugin import SparkAnalyzer
from harness.runner import Analyzer, RunResult, run_scenario
from harness.scenarios import FAULTS, SCENARIOS, FaultSpec, Scenario
from tests.harness.test_harness_e2e import StealingNemesis, assert_only_the_stolen_message_is_lost

#: a run and a Spark analysis each: longer than the suite's default per-test timeout
pytestmark = pytest.mark.timeout(600)

#: the scenario in 10 s instead of 20 (n1 killed at 3 s for 2 s)
SHORT = SCENARIOS["classic-rpc"].scaled(10.0)


def _run(scenario: Scenario, run: Path, analyzer: Analyzer) -> RunResult:
    return run_scenario(scenario, run, console=Console(quiet=True), analyzer=analyzer,
                        nemesis_cls=StealingNemesis)


def _rows(run: Path, table: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = ds.dataset(str(run / "history" / table),
                                            partitioning="hive").to_table().to_pylist()
    return rows


def test_a_short_classic_rpc_run_with_a_home_node_kill_loses_only_what_was_taken_behind_its_back(
        tmp_path: Path, warren_analyzer: SparkAnalyzer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(FAULTS, "steal", False)  # an instant fault, for this test only
    steal = FaultSpec("steal", 1.5, 0.0, "node:n2", {"queue": "work"})
    scenario = dataclasses.replace(SHORT, faults=(steal, *SHORT.faults))
    run = tmp_path / "run"
    result = _run(scenario, run, warren_analyzer)

    assert_only_the_stolen_message_is_lost(result, run)

    declared = [r for r in _rows(run, "queue_events") if r["kind"] == "queue_declared"]
    work = [r for r in declared if r["queue"] == "work"]
    replies = [r for r in declared if r["queue"].startswith("amq.gen-")]
    assert {(r["queue_type"], r["durable"], r["exclusive"]) for r in work} == \
        {("classic", True, False)}
    assert {r["node"].partition("@")[0] for r in work} == {"n1"}
    assert replies and all(r["exclusive"] for r in replies)
    # requests were answered: replies were delivered from the reply queues
    delivered = {r["queue"] for r in _rows(run, "client_ops") if r["kind"] == "deliver"}
    assert "work" in delivered and any(q.startswith("amq.gen-") for q in delivered)
