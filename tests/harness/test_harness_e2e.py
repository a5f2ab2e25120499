"""The whole chain, nodes to verdict: a short leader-failover run through the runner
and the PySpark analysis, in which one confirmed message is taken from the queue
behind the workload's back, passes every check but total_queue, which names exactly
that one lost message: the leader kills lose nothing, and the analysis sees the loss.

The run uses the plugin's session-scoped SparkSession (`warren_analyzer`), which the
other scenario runs of the session share.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import pika
import pika.exceptions
import pyarrow.dataset as ds
import pytest
from rich.console import Console

from harness.cluster import HOST, NodeSpec
from harness.nemesis import FaultError, Nemesis
from harness.pytest_plugin import SparkAnalyzer
from harness.runner import Analyzer, RunResult, run_scenario
from harness.scenarios import FAULTS, SCENARIOS, FaultSpec, Scenario
from harness.workload import msg_id_of

#: a run and a Spark analysis each: longer than the suite's default per-test timeout
pytestmark = pytest.mark.timeout(600)

#: the catalogue's main scenario, 10 s instead of 30 (three leader kills of 1 s)
SHORT = SCENARIOS["leader-failover"].scaled(10.0)


class StealingNemesis(Nemesis):
    """The nemesis plus a test-only fault: `steal` consumes one message from an
    unrecorded connection, so the history holds a confirmed message nobody received."""

    def _start_steal(self, targets: list[NodeSpec], params: dict[str, Any]) -> Any:
        try:
            msg_id = _take_one(targets[0], params["queue"])
        except pika.exceptions.AMQPError as exc:
            raise FaultError(f"steal: {exc!r}")
        return {**params, "msg_id": msg_id}, lambda: None


def _take_one(node: NodeSpec, queue: str, timeout_s: float = 10.0) -> int:
    """Consume and ack one first-time delivery of `queue`; its message id."""
    conn = pika.BlockingConnection(pika.ConnectionParameters(HOST, node.amqp_port))
    try:
        ch = conn.channel()
        ch.basic_qos(prefetch_count=1)
        held: list[tuple[int, int]] = []  # (delivery tag, message id)

        def take(_ch: Any, method: Any, props: Any, body: bytes) -> None:
            # a redelivery may have been acked already (the ack lost with its node):
            # only a first delivery is a message no consumer has seen
            if method.redelivered or held:
                ch.basic_reject(method.delivery_tag, requeue=True)
            else:
                held.append((method.delivery_tag, msg_id_of(dict(props.headers or {}), body)))

        tag = ch.basic_consume(queue, take)
        deadline = time.monotonic() + timeout_s
        while not held and time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.05)
        ch.basic_cancel(tag)  # prefetch 1 and one unacked: nothing else is in flight
        if not held:
            raise FaultError(f"no message to steal from {queue}")
        ch.basic_ack(held[0][0])
        return held[0][1]
    finally:
        if conn.is_open:
            conn.close()


def _run(scenario: Scenario, run: Path, analyzer: Analyzer) -> Any:
    return run_scenario(scenario, run, console=Console(quiet=True), analyzer=analyzer,
                        nemesis_cls=StealingNemesis)  # no `steal` in a schedule: Nemesis


def assert_only_the_stolen_message_is_lost(result: RunResult, run: Path) -> None:
    """The run's analysis met every expectation but total_queue's, and total_queue
    names exactly the one confirmed message the `steal` fault took, nothing else."""
    assert result.problems == []  # the steal was injected
    assert result.summary is not None
    # every other check meets the scenario's expectation, and none fails or is undecided
    assert result.unmet == ["total_queue: expected pass, got fail"]
    others = {c: r["status"] for c, r in result.summary["checks"].items() if c != "total_queue"}
    assert set(others.values()) <= {"pass", "skipped"}, others
    total = result.summary["checks"]["total_queue"]
    assert total["status"] == "fail" and total["confirmed"] > 0
    assert (total["lost"], total["lost_never_delivered"]) == (1, 1)
    starts = ds.dataset(str(run / "history" / "nemesis_events"), partitioning="hive") \
        .to_table().to_pylist()
    (stolen,) = [json.loads(str(r["params"]))["msg_id"] for r in starts
                 if r["fault"] == "steal" and r["kind"] == "start"]
    assert [int(s) for s in total["sample"]] == [stolen]


def test_a_short_leader_failover_run_passes_every_check_but_a_message_taken_behind_its_back(
        tmp_path: Path, warren_analyzer: SparkAnalyzer, monkeypatch: pytest.MonkeyPatch) -> None:
    """One run: the leader kills lose nothing, so the analysis passes every check the
    scenario expects to pass, except total_queue, which names exactly the one
    confirmed message the `steal` took."""
    monkeypatch.setitem(FAULTS, "steal", False)  # an instant fault, for this test only
    steal = FaultSpec("steal", 3.0, 0.0, "random", {"queue": "q1"})
    scenario = dataclasses.replace(SHORT, faults=(*SHORT.faults, steal))
    run = tmp_path / "run"
    result = _run(scenario, run, warren_analyzer)

    assert_only_the_stolen_message_is_lost(result, run)
    assert result.exit_code == 1
