"""The nemesis against fake node processes: faults happen, heal, and are recorded as windows."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from analysis import model
from analysis.compact import compact
from analysis.recorder import Recorder
from harness.cluster import Cluster
from harness.nemesis import FaultError, Nemesis
from harness.scenarios import FaultSpec
from tests.harness.conftest import FakeCtl
from tests.harness.test_harness_cluster import wait_state


class Rows:
    """A sink that keeps what the nemesis records."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, kind: str, fields: dict[str, Any]) -> None:
        self.rows.append((kind, fields))

    def windows(self) -> list[tuple[str, str, list[str]]]:
        return [(k, f["fault"], f["targets"]) for k, f in self.rows]


@pytest.fixture
def started(fake_cluster: Cluster) -> Cluster:
    fake_cluster.start(timeout_s=30)
    return fake_cluster


def _leader_is(cluster: Cluster, ctl: FakeCtl, short: str) -> None:
    ctl.answers["quorum_status"] = [
        {"node": n.name, "raft_state": "leader" if n.short == short else "follower", "term": 1}
        for n in cluster.nodes]


def test_pause_stops_the_node_for_the_window(started: Cluster) -> None:
    rows = Rows()
    nemesis = Nemesis(started, rows)
    n2 = started.node("n2")
    active = nemesis.start(FaultSpec("pause", 0, 1, "node:n2"))
    wait_state(n2.proc.pid, stopped=True)
    nemesis.stop(active)
    wait_state(n2.proc.pid, stopped=False)
    assert rows.windows() == [("start", "pause", [n2.name]), ("stop", "pause", [n2.name])]
    assert nemesis.active == []


def test_kill_hits_the_leader_and_the_window_ends_with_a_restart(
        started: Cluster, fake_ctl: FakeCtl) -> None:
    _leader_is(started, fake_ctl, "n3")
    rows = Rows()
    nemesis = Nemesis(started, rows)
    n3 = started.node("n3")
    before = n3.proc
    active = nemesis.start(FaultSpec("kill", 0, 1, "leader:q1"))
    assert before.returncode == -signal.SIGKILL and not n3.running
    nemesis.stop(active)
    assert n3.running and n3.proc is not before
    assert rows.windows() == [("start", "kill", [n3.name]), ("stop", "kill", [n3.name])]


def test_partition_isolates_a_follower_on_every_node_and_heals_everywhere(
        started: Cluster, fake_ctl: FakeCtl) -> None:
    _leader_is(started, fake_ctl, "n1")
    rows = Rows()
    nemesis = Nemesis(started, rows, seed=7)
    active = nemesis.start(FaultSpec("partition", 0, 1, "follower:q1"))
    isolated = active.targets[0]
    assert isolated.short in ("n2", "n3")
    rest = [n.name for n in started.nodes if n is not isolated]
    told = fake_ctl.commands("partition")
    assert sorted(n for n, _ in told) == sorted(started.names)
    assert {a for _, a in told} == {("partition", isolated.name, ",".join(rest))}
    nemesis.stop(active)
    assert sorted(n for n, _ in fake_ctl.commands("heal")) == sorted(started.names)
    params = json.loads(rows.rows[0][1]["params"])
    assert params["groups"] == [[isolated.name], rest]


def test_crash_channel_picks_a_channel_that_has_a_consumer(
        started: Cluster, fake_ctl: FakeCtl) -> None:
    fake_ctl.answers["list_channels"] = lambda node, _a: (
        [{"pid": "<0.1.0>", "consumers": 0}, {"pid": "<0.2.0>", "consumers": 1}]
        if node == started.node("n2").name else [])
    rows = Rows()
    Nemesis(started, rows).start(FaultSpec("crash_channel", 0, 0, "consumer-channel"))
    assert fake_ctl.commands("crash_channel") == [
        (started.node("n2").name, ("crash_channel", "<0.2.0>"))]
    assert rows.windows() == [("start", "crash_channel", [started.node("n2").name])]


def test_a_refused_hook_is_an_error_and_nothing_is_recorded(
        started: Cluster, fake_ctl: FakeCtl) -> None:
    fake_ctl.refuse.add("set_disk_delay")
    rows = Rows()
    with pytest.raises(FaultError, match="set_disk_delay"):
        Nemesis(started, rows).start(FaultSpec("disk_slow", 0, 1, "all", {"delay_ms": 5}))
    assert rows.rows == []


def test_a_schedule_heals_everything_and_keeps_going_past_bad_faults(
        started: Cluster, fake_ctl: FakeCtl) -> None:
    fake_ctl.answers["quorum_status"] = []  # no leader: the kill cannot be aimed
    rows = Rows()
    nemesis = Nemesis(started, rows)
    schedule = [FaultSpec("mem_alarm", 0, 0.2, "all", {"watermark": 0.0, "restore": 0.4}),
                FaultSpec("kill", 0.1, 0.2, "leader:q1"),
                FaultSpec("pause", 0.3, 60, "node:n1")]
    seen = []
    nemesis.run(schedule, time.monotonic(), stopped=lambda: len(seen) > 8,
                tick=lambda: seen.append(1))
    assert [w[:2] for w in rows.windows()] == [
        ("start", "mem_alarm"), ("stop", "mem_alarm"), ("start", "pause"), ("stop", "pause")]
    assert [a for _, a in fake_ctl.commands("set_vm_memory_high_watermark")] == [
        ("set_vm_memory_high_watermark", "0.0")] * 3 + [
        ("set_vm_memory_high_watermark", "0.4")] * 3
    assert nemesis.errors == ["kill on leader:q1: queue q1 has no leader now"]
    assert nemesis.active == [] and started.node("n1") in started.live()


def test_recorded_windows_are_what_the_analysis_reads(started: Cluster,
                                                      tmp_path: Path) -> None:
    run = tmp_path / "run"
    with Recorder(run, "r1", "nemesis", register_atexit=False) as rec:
        nemesis = Nemesis(started, rec.sink)
        nemesis.stop(nemesis.start(FaultSpec("pause", 0, 1, "node:n1")))
        nemesis.start(FaultSpec("pause", 0, 1, "node:n2"))  # left open: closed at run end
    compact(run)
    table = pq.read_table(run / "history/nemesis_events/run_id=r1/node=nemesis")
    rows = table.to_pylist()
    assert [(r["kind"], r["fault"], r["targets"], r["emitter"]) for r in rows] == [
        ("start", "pause", [started.node("n1").name], "nemesis"),
        ("stop", "pause", [started.node("n1").name], "nemesis"),
        ("start", "pause", [started.node("n2").name], "nemesis")]
    windows = model.fault_windows(rows, run_end_ns=rows[-1]["ts_ns"] + 1)
    assert [(w.fault, w.closed_at_end) for w in windows] == [("pause", False),
                                                             ("pause", True)]
