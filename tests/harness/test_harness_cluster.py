"""The cluster module: node processes start, report ready, stop, pause, die, are reaped."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from harness.cluster import Cluster, NodeStartError
from tests.harness.conftest import FakeCtl, fake_argv
from tests.waiting import wait_until


def _state(pid: int) -> str:
    """The process state letter from /proc (T = stopped)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def wait_state(pid: int, stopped: bool) -> None:
    """Signals land asynchronously: wait (boundedly) until the state is reached."""
    wait_until(lambda: (_state(pid) == "T") == stopped,
               f"process {pid} {'stopped' if stopped else 'running again'}", 5.0)


def test_nodes_start_ready_with_their_own_config(fake_cluster: Cluster) -> None:
    fake_cluster.start(timeout_s=30)
    names = fake_cluster.names
    assert len(set(names)) == 3
    ports = {n.amqp_port for n in fake_cluster.nodes} | {n.dist_port for n in fake_cluster.nodes}
    assert len(ports) == 6
    for n in fake_cluster.nodes:
        config = json.loads(n.config_file.read_text())
        assert config["name"] == n.name == n.ready["node"]
        assert config["peers"] == names
        assert config["history_dir"] == str(fake_cluster.root)
        assert n.ready["pid"] == n.proc.pid
    assert fake_cluster.live() == fake_cluster.nodes


def test_stop_terminates_every_node_cleanly(fake_cluster: Cluster) -> None:
    fake_cluster.start(timeout_s=30)
    fake_cluster.pause_node(fake_cluster.node("n2"))
    fake_cluster.stop(grace_s=10)
    assert [n.proc.returncode for n in fake_cluster.nodes] == [0, 0, 0]


def test_pause_resume_kill_and_restart(fake_cluster: Cluster) -> None:
    fake_cluster.start(timeout_s=30)
    n2 = fake_cluster.node("n2")
    fake_cluster.pause_node(n2)
    wait_state(n2.proc.pid, stopped=True)
    assert n2 not in fake_cluster.live()
    fake_cluster.resume_node(n2)
    wait_state(n2.proc.pid, stopped=False)
    old = n2.proc
    fake_cluster.kill_node(n2)
    assert old.returncode == -signal.SIGKILL
    fake_cluster.start_node(n2, timeout_s=30)
    assert n2.proc is not old and n2.running and n2.ready["pid"] == n2.proc.pid


def test_close_kills_stopped_nodes_too(fake_cluster: Cluster) -> None:
    fake_cluster.start(timeout_s=30)
    for n in fake_cluster.nodes:
        fake_cluster.pause_node(n)
    fake_cluster.close()
    assert [n.proc.returncode for n in fake_cluster.nodes] == [-signal.SIGKILL] * 3


def test_stop_sends_one_sigterm_so_a_node_on_its_way_out_exits_cleanly(tmp_path: Path) -> None:
    """A node that has begun to exit has no SIGTERM handler any more: stopping must
    not send it a second one (it would die of it, status -15, mid-flush)."""
    cluster = Cluster(tmp_path, 3, node_argv=fake_argv, ctl=FakeCtl(),
                      extra_config={"fake_slow_exit": True})
    try:
        cluster.start(timeout_s=30)
        cluster.stop(grace_s=10)
        assert [n.proc.returncode for n in cluster.nodes] == [0, 0, 0]
    finally:
        cluster.close()


def test_a_node_that_exits_before_ready_is_reported(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, 1, node_argv=fake_argv, ctl=FakeCtl(),
                      extra_config={"fake_fail": True})
    try:
        with pytest.raises(NodeStartError, match="exited"):
            cluster.start(timeout_s=30)
    finally:
        cluster.close()


def test_leader_lookup_prefers_the_newest_term(fake_cluster: Cluster,
                                               fake_ctl: FakeCtl) -> None:
    fake_cluster.start(timeout_s=30)
    n1, n3 = fake_cluster.node("n1").name, fake_cluster.node("n3").name
    fake_ctl.answers["quorum_status"] = [
        {"node": n1, "raft_state": "leader", "term": 2},
        {"node": n3, "raft_state": "leader", "term": 3}]
    assert fake_cluster.leader_of("q1") is fake_cluster.node("n3")
    fake_ctl.answers["quorum_status"] = [{"node": n1, "raft_state": "candidate", "term": 4}]
    assert fake_cluster.leader_of("q1") is None
