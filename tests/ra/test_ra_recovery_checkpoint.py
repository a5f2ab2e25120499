"""Recovery checkpoints: a server stopped in order with
``min_recovery_checkpoint_interval`` saves its applied state and starts again
without replaying its log; without the key, or after a crash, it replays."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ra import api, recovery_checkpoint, snapshot_store
from ra import server as core
from ra import system as ra_system
from ra.disk_log import DiskLog
from ra.log import MemoryLog
from ra.machine import Machine
from ra.sim import CounterMachine
from ra.state import dehydrate, init
from tests.ra.ra_multiproc_support import (
    SERVER_CONFIG as PROC_SERVER_CONFIG,
)
from tests.ra.ra_multiproc_support import (
    LedgerMachine,
    ProcCluster,
    Publisher,
    check_ledger,
    leader_of,
    ledger,
    overview,
    proc_cluster,
    wait_until,
)
from tests.ra.ra_proc_support import SERVER_CONFIG, Cluster, SeqMachine
from tests.ra.ra_proc_support import overview as mem_overview
from tests.ra.ra_proc_support import wait_until as mem_wait_until
from tests.ra.ra_testlib import S1, entries

UID = "U1"
CLUSTER: dict[Any, dict[str, Any]] = {S1: {}}
RC = recovery_checkpoint.CONFIG_KEY


def meta(idx: int, term: int = 1, ver: int = 0) -> dict[str, Any]:
    return {"index": idx, "term": term, "cluster": CLUSTER, "machine_version": ver}


# --- the log keeps one ---------------------------------------------------------------------


def test_a_written_recovery_checkpoint_survives_a_reopen_and_replaces_the_older(
        tmp_path: Path) -> None:
    d = str(tmp_path)
    log = DiskLog.open(d, UID)
    assert log.recovery_checkpoint_index_term() is None and log.highest_snapshot_index() == -1
    log.write_recovery_checkpoint(meta(4), "rc4")
    log.write_recovery_checkpoint(meta(7), "rc7")
    assert os.listdir(os.path.join(d, snapshot_store.RECOVERY_CHECKPOINT)) == [
        snapshot_store.dir_name(7, 1)]
    again = DiskLog.open(d, UID)
    assert again.recovery_checkpoint_index_term() == (7, 1)
    assert again.highest_snapshot_index() == 7
    assert again.read_recovery_checkpoint() == (meta(7), "rc7")
    # it is no snapshot: the log does not start after it
    assert again.recovery_snapshot() is None and again.first_index() == 0


def test_a_damaged_recovery_checkpoint_is_deleted_at_open(tmp_path: Path) -> None:
    d = str(tmp_path)
    path = snapshot_store.write(d, snapshot_store.RECOVERY_CHECKPOINT, meta(5), "rc5",
                                sync=False)
    with open(os.path.join(path, snapshot_store.FILE), "r+b") as f:
        f.seek(12)
        f.write(b"\xff\xfe")
    log = DiskLog.open(d, UID)
    assert log.recovery_checkpoint_index_term() is None
    assert os.listdir(os.path.join(d, snapshot_store.RECOVERY_CHECKPOINT)) == []


@pytest.mark.parametrize("kind", ["memory", "disk"])
def test_a_snapshot_that_overtakes_the_recovery_checkpoint_deletes_it(
        kind: str, tmp_path: Path) -> None:
    if kind == "memory":
        log: Any = MemoryLog(entries(*[1] * 12), min_snapshot_interval=1)
    else:
        log = DiskLog.open(str(tmp_path), UID, min_snapshot_interval=1)
        log.write(entries(*[1] * 12))
        log.handle_event(("written", 1, [(1, 12)]))
    log.take_wal_writes()
    log.write_recovery_checkpoint(meta(8), "rc8")
    log.update_release_cursor(6, CLUSTER, 0, "s6")
    log.handle_event(("snapshot_written", (6, 1), [], "snapshot"))
    assert log.recovery_checkpoint_index_term() == (8, 1)  # not overtaken yet
    log.update_release_cursor(9, CLUSTER, 0, "s9")
    log.handle_event(("snapshot_written", (9, 1), [], "snapshot"))
    assert log.recovery_checkpoint_index_term() is None
    assert log.read_recovery_checkpoint() is None
    if kind == "disk":
        assert os.listdir(tmp_path / snapshot_store.RECOVERY_CHECKPOINT) == []


# --- the core decides when to write one and when to use it ----------------------------------


def recovering(log: MemoryLog, last_applied: int, machine: Machine | None = None) -> Any:
    """A server as ``ra_server:init`` leaves it before ``recover``."""
    return init({"id": S1, "initial_members": [S1], "machine": machine or CounterMachine(),
                 "log": log, "last_applied": last_applied})


def test_a_stop_writes_once_the_interval_is_reached() -> None:
    log = MemoryLog(entries(*[1] * 10))
    log.take_wal_writes()
    st = recovering(log, 10)
    core.recover(st)
    assert recovery_checkpoint.to_write(st, 0) is None  # off by default
    assert recovery_checkpoint.to_write(st, 12) is None  # 10 - (-1) < 12
    found = recovery_checkpoint.to_write(st, 11)
    assert found is not None
    assert found[0] == {"index": 10, "term": 1, "cluster": dehydrate(st.cluster),
                        "machine_version": 0}
    assert found[1] == st.machine_state == sum(range(1, 11))
    log.write_recovery_checkpoint(*found)
    # measured from the recovery checkpoint itself from now on
    assert recovery_checkpoint.to_write(st, 1) is None


@pytest.mark.parametrize(("persisted", "rc_idx", "used"), [
    (10, 7, True),    # above the snapshot (none), at or below the commit index
    (10, 10, True),
    (6, 7, False),    # above the commit index: the log after 6 is not known committed
])
def test_a_recovering_server_jumps_to_its_recovery_checkpoint_only_below_the_commit_index(
        persisted: int, rc_idx: int, used: bool) -> None:
    log = MemoryLog(entries(*[1] * 10),
                    recovery_checkpoint=(meta(rc_idx), ("from_rc", rc_idx)))
    log.take_wal_writes()
    st = recovering(log, persisted)
    assert recovery_checkpoint.recover(st) is used
    assert st.last_applied == (rc_idx if used else 0)


def test_a_recovery_checkpoint_at_or_below_the_snapshot_is_ignored() -> None:
    snap = (meta(8), 8)
    log = MemoryLog(entries(*[1] * 10, first=9)[:2], snapshot=snap,
                    recovery_checkpoint=(meta(7), ("stale", 7)))
    log.take_wal_writes()
    st = recovering(log, 10)
    assert recovery_checkpoint.recover(st) is False
    assert st.machine_state == 8 and st.last_applied == 8


def test_replay_continues_after_the_recovery_checkpoint() -> None:
    log = MemoryLog(entries(*[1] * 10), recovery_checkpoint=(meta(7), 1000))
    log.take_wal_writes()
    st = recovering(log, 10)
    assert recovery_checkpoint.recover(st)
    core.recover(st)
    # CounterMachine adds each index it applies: only 8, 9 and 10 were applied
    assert st.last_applied == 10 and st.machine_state == 1000 + 8 + 9 + 10


class Versioned(CounterMachine):
    """Two machine versions of the same counter."""

    def version(self) -> int:
        return 1

    def which_module(self, version: int) -> Any:
        return self


def test_a_recovery_checkpoint_of_a_newer_machine_version_takes_effect() -> None:
    log = MemoryLog(entries(*[1] * 10), recovery_checkpoint=(meta(7, ver=1), 7))
    log.take_wal_writes()
    st = recovering(log, 10, Versioned())
    assert st.cfg.effective_machine_version == 0
    assert recovery_checkpoint.recover(st)
    assert st.cfg.effective_machine_version == 1
    assert st.cfg.machine_versions[0] == (7, 1)


# --- a server process: stop, restart ----------------------------------------------------------


class CountingSeq(SeqMachine):
    """`SeqMachine` that counts its applies (one member: they are that member's)."""

    def __init__(self) -> None:
        super().__init__()
        self.applies = 0

    def apply(self, meta: dict[str, Any], command: Any, state: Any) -> tuple[Any, ...]:
        self.applies += 1
        return super().apply(meta, command, state)


def _stop_and_restart(c: Cluster, config: dict[str, Any]) -> tuple[CountingSeq, Any]:
    machine = CountingSeq()
    sid = c.ids[0]
    result = api.start_cluster("default", "rcq", machine, [sid],
                               server_config={**SERVER_CONFIG, **config})
    assert result[0] == "ok", result
    for seq in range(30):
        assert api.process_command(sid, ("push", seq))[0] == "ok"
    before = mem_overview(sid)["machine"]
    assert api.stop_server("default", sid) == "ok"
    machine.applies = 0
    assert api.restart_server("default", sid) == "ok"
    mem_wait_until(lambda: mem_overview(sid)["machine"] == before, what="the state back")
    return machine, before


def test_a_server_stopped_in_order_restarts_without_replaying(cluster: Cluster) -> None:
    with cluster.nodes[0].attached():
        machine, state = _stop_and_restart(cluster, {RC: 10})
        assert machine.applies == 0
        assert state == (29, tuple(range(30)))


def test_without_the_interval_a_restart_replays_the_log(cluster: Cluster) -> None:
    with cluster.nodes[0].attached():
        machine, _ = _stop_and_restart(cluster, {})
        assert machine.applies == 30


def test_too_few_entries_since_the_last_saved_state_write_no_recovery_checkpoint(
        cluster: Cluster) -> None:
    with cluster.nodes[0].attached():
        machine, _ = _stop_and_restart(cluster, {RC: 1000})
        assert machine.applies == 30


def test_the_ra_system_interval_applies_to_members_that_name_none(cluster: Cluster) -> None:
    node = cluster.nodes[0]
    with node.attached():
        assert ra_system.start({"name": "rc_sys", RC: 10})[0] == "ok"
        machine = CountingSeq()
        sid = ("rcs", node.name)
        result = api.start_cluster("rc_sys", "rcs", machine, [sid],
                                   server_config=dict(SERVER_CONFIG))
        assert result[0] == "ok", result
        for seq in range(30):
            assert api.process_command(sid, ("push", seq))[0] == "ok"
        before = mem_overview(sid)["machine"]
        assert api.stop_server("rc_sys", sid) == "ok"
        machine.applies = 0
        assert api.restart_server("rc_sys", sid) == "ok"
        mem_wait_until(lambda: mem_overview(sid)["machine"] == before, what="the state back")
        assert machine.applies == 0


# --- real node processes: files on disk, kill -9 -----------------------------------------------


def _rc_dir(procs: ProcCluster, sid: Any) -> str:
    uid = overview(sid)["uid"]
    return os.path.join(procs.node_of(sid).data_dir, uid, snapshot_store.RECOVERY_CHECKPOINT)


def _confirmed(pub: Publisher) -> bool:
    pub.receive_some(500)
    return not pub.pending


def _fill(sid: Any, n: int) -> Publisher:
    pub = Publisher([sid], sid)
    for seq in range(n):
        pub.send(seq)
    wait_until(lambda: _confirmed(pub), what="every confirm")
    return pub


@pytest.fixture
def one_node(tmp_path: Path) -> Any:
    with proc_cluster(tmp_path, size=1) as procs:
        yield procs


def test_an_orderly_stop_on_disk_writes_it_and_a_kill_does_not(one_node: ProcCluster) -> None:
    procs = one_node
    node = procs.nodes[0]
    sid = ("s1", node.name)
    # no release cursors: only the recovery checkpoint could spare a replay
    result = api.start_cluster("default", "rcl", LedgerMachine(), [sid], 10_000,
                               server_config={**PROC_SERVER_CONFIG, RC: 50})
    assert result[0] == "ok", result
    pub = _fill(sid, 120)
    rc_dir = _rc_dir(procs, sid)
    last_applied = overview(sid)["last_applied"]
    assert api.stop_server("default", sid) == "ok"
    (name,) = os.listdir(rc_dir)
    parsed = snapshot_store.parse_dir_name(name)
    assert parsed is not None and parsed[0] == last_applied
    assert api.restart_server("default", sid) == "ok"
    wait_until(lambda: ledger(sid)[0] >= last_applied, what="the member back")
    check_ledger(ledger(sid)[1], pub)

    # more than the interval again, then kill -9: nothing new is written
    leader_of([sid])
    more = Publisher([sid], sid)
    more.sends, more.applied = dict(pub.sends), dict(pub.applied)
    for seq in range(120, 240):
        more.send(seq)
    wait_until(lambda: _confirmed(more), what="every confirm")
    procs.kill(node)
    assert os.listdir(rc_dir) == [name]
    procs.boot(node)
    assert api.restart_server("default", sid) == "ok"
    newest = max(reply[1] for reply in more.applied.values())
    wait_until(lambda: ledger(sid)[0] >= newest, what="the member to replay past the kill")
    check_ledger(ledger(sid)[1], more)
