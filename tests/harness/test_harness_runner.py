"""The runner end to end on a one-node cluster (in-memory queues), without Spark.

The analysis itself is tested in tests/analysis; here the runner must leave a
complete, compacted history (run_meta, client_ops with a completed drain, nemesis
windows) and no process behind.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from rich.console import Console

from analysis.compare_load import load_run
from analysis.model import CHECKS
from harness.runner import RunResult, _analyze, run_scenario, unmet_expectations
from harness.scenarios import SCENARIOS, ClientSpec, FaultSpec, QueueSpec, Scenario


def _table(run: Path, name: str) -> list[dict[str, object]]:
    return ds.dataset(str(run / "history" / name), partitioning="hive").to_table().to_pylist()


def test_a_scenario_runs_records_and_cleans_up(tmp_path: Path) -> None:
    scenario = Scenario(
        "tiny", "one node, one pause", queues=(QueueSpec("q1", queue_type="classic"),),
        clients=(ClientSpec("publisher", "q1", rate=100), ClientSpec("consumer", "q1")),
        # long enough that a node and its clients that start slowly on a busy machine
        # still publish and confirm before the run ends
        faults=(FaultSpec("pause", 3.0, 0.5, "node:n1"),), nodes=1, duration_s=6.0,
        settle_s=0.5, drain_timeout_s=20)
    run = tmp_path / "run"
    result = run_scenario(scenario, run, console=Console(quiet=True), analyze=False,
                          backend="memory")
    assert result.exit_code == 0, result.problems
    assert result.problems == []

    (meta,) = _table(run, "run_meta")
    assert json.loads(str(meta["queues_json"]))["q1"]["prefetch"] == 10
    assert meta["workload"] == "total_queue" and meta["drain_expected"] is True

    windows = [(r["kind"], r["fault"]) for r in _table(run, "nemesis_events")]
    assert windows == [("start", "pause"), ("stop", "pause")]

    ops = [r for r in _table(run, "client_ops") if str(r["node"]).startswith("client-")]
    confirmed = {r["msg_id"] for r in ops if r["kind"] == "confirm"}
    acked = {r["msg_id"] for r in ops if r["kind"] == "ack"}
    assert confirmed and confirmed <= acked
    assert [r["outcome"] for r in ops if r["kind"] == "drain_end"] == ["ok"]

    assert _processes_mentioning(str(run)) == []


def test_the_nodes_record_a_state_digest_every_k_indexes(tmp_path: Path) -> None:
    """The scenario's K reaches the nodes' replica trace and the run's metadata: only
    indexes that are multiples of K carry a digest, the others none."""
    scenario = Scenario(
        "tiny-quorum", "one node, a quorum queue", queues=(QueueSpec("q1"),),
        clients=(ClientSpec("publisher", "q1", rate=100), ClientSpec("consumer", "q1")),
        nodes=1, duration_s=1.5, settle_s=0.5, drain_timeout_s=20, state_digest_every=3)
    run = tmp_path / "run"
    result = run_scenario(scenario, run, console=Console(quiet=True), analyze=False)
    assert result.exit_code == 0, result.problems

    (meta,) = _table(run, "run_meta")
    assert meta["state_digest_every"] == 3
    applied = [r for r in _table(run, "replica_events") if r["kind"] == "applied"]
    digested = {r["raft_index"] for r in applied if r["state_digest"] is not None}
    plain = {r["raft_index"] for r in applied if r["state_digest"] is None}
    assert digested and plain
    assert all(i % 3 == 0 for i in digested)
    assert not any(i % 3 == 0 for i in plain)
    assert _processes_mentioning(str(run)) == []


def test_the_nodes_model_the_release_the_run_asks_for(tmp_path: Path) -> None:
    """`rabbitmq_version` reaches every node and the run's metadata. RabbitMQ 3.10 has
    no default delivery limit (4.2 removes a message after 20 returns), and its
    x-delivery-count counts every requeue: a poison message rejected with requeue
    22 times comes back 22 times, counting 1 to 22, and is then acked."""
    scenario = Scenario(
        "tiny-poison", "one node, poison requeued", queues=(QueueSpec("q1"),),
        clients=(ClientSpec("publisher", "q1", rate=20, messages=3, poison_every=3),
                 ClientSpec("consumer", "q1", poison_requeues=22)),
        nodes=1, duration_s=4, settle_s=0.5, drain_timeout_s=30)
    run = tmp_path / "run"
    result = run_scenario(scenario, run, console=Console(quiet=True), analyze=False,
                          rabbitmq_version="3.10")
    assert result.exit_code == 0, result.problems

    (meta,) = _table(run, "run_meta")
    config = json.loads(str(meta["config_json"]))
    assert config["rabbitmq_version"] == "3.10"
    assert config["quorum_default_delivery_limit"] is None  # 3.10 has no default limit
    assert load_run(run).label == "3.10"  # what `warren scenario compare` names it
    ops = [r for r in _table(run, "client_ops") if str(r["node"]).startswith("client-")]
    poison = {r["msg_id"] for r in ops if r["kind"] == "reject"}
    assert len(poison) == 1
    counts = [r["delivery_count"] for r in sorted(ops, key=lambda r: int(str(r["ts_ns"])))
              if r["kind"] == "deliver" and r["msg_id"] in poison]
    assert counts[1:] == list(range(1, 23))
    assert poison <= {r["msg_id"] for r in ops if r["kind"] == "ack"}
    assert _processes_mentioning(str(run)) == []


def _processes_mentioning(text: str) -> list[int]:
    """Pids whose command line names `text` (every node and client names its run dir)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


def test_expectations_are_compared_with_the_verdicts() -> None:
    s = SCENARIOS["sac-fifo"]
    summary = {"checks": {"total_queue": {"status": "pass"},
                          "ordering_channel_fifo": {"status": "pass"},
                          "replica_determinism": {"status": "unknown"},
                          "ordering_sac_fifo": {"status": "pass"},
                          "flow_not_stuck": {"status": "fail", "violations": 2}}}
    assert unmet_expectations(s, summary) == [
        "replica_determinism: expected pass, got unknown",
        "flow_not_stuck: fail (2 violations)"]


@pytest.mark.parametrize("width", [80, 120])
def test_the_verdict_table_fits_the_console(tmp_path: Path, width: int) -> None:
    """The runner prints the verdicts fitted to its console: no line wider than it and
    every check named in full, long notes cut (they are whole in the report)."""
    note = ("2 decisions and 2 client deliveries not decidable: the sender's history has "
            "a hole (killed before its buffer was written)")
    checks = {c: {"status": "unknown" if i % 2 else "pass", "examined": 1000 * i,
                  "violations": 0, "sample": [2**36 * k for k in range(1, 6)],
                  "note": note if i % 2 else ""} for i, c in enumerate(CHECKS)}
    (tmp_path / "analysis").mkdir()
    (tmp_path / "analysis" / "summary.json").write_text(
        json.dumps({"valid": "unknown", "checks": checks}))
    out = Console(width=width, file=io.StringIO(), record=True)
    _analyze(RunResult(tmp_path, 0), SCENARIOS["poison-message"], out, None,
             analyzer=lambda run_dir: 2)
    lines = out.export_text().splitlines()
    assert max(len(line) for line in lines) <= width
    for check in CHECKS:
        assert any(re.search(rf"(^|\W){check}(\W|$)", line) for line in lines), check
    # a note is cut on one line, not wrapped a word or two a line
    assert sum("2 decisions and 2 client deliveries" in line for line in lines) == \
        len(CHECKS) // 2
