"""`DiskLog` on disk: reads from memtable and segments, restart recovery,
snapshot files, the meta row, and the pure core running on it."""

from __future__ import annotations

import os
import random
from typing import Any

import pytest

from actors import Node
from ra import segment as ra_segment
from ra import sim as ra_sim
from ra import snapshot_store
from ra.disk_log import DiskLog, run_bg_work
from ra.log import CorruptLog
from ra.log_ets import LogEts
from ra.log_meta import LogMeta
from ra.types import DUMMY_ENTRY
from tests.ra.ra_disk_support import CountingFsync, Stack, drain_events, flush_to_wal, pump

UID = "U1"
CLUSTER = {("s1", "n1"): {}}


def es(first: int, last: int, term: int = 1) -> list[tuple[int, int, Any]]:
    return [(i, term, ("cmd", i, term)) for i in range(first, last + 1)]


def open_log(stack: Stack, **opts: Any) -> DiskLog:
    return DiskLog.open(stack.server_dir(UID), UID, stack.ets, **opts)


def written_up(log: DiskLog) -> bool:
    return log.last_written() == log.last_index_term()


def restart_node(stack: Stack) -> None:
    """Every process of the node dies; the memtables go with it."""
    stack.stop_all()
    stack.ets = LogEts()
    stack.start(segment_max_entries=4)


# --- entries move from memory to segments -------------------------------------------------


def test_flushed_entries_are_read_from_segments_and_leave_memory(
    node: Node, tmp_path: Any
) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segment_max_entries=4)
        log = open_log(stack)
        for e in es(1, 10):
            log.append(e)
        pump(log, UID, lambda: written_up(log))
        assert log.mem_size() == 11  # the dummy and ten entries
        stack.rollover()
        pump(log, UID, lambda: log.mem_size() == 1)
        assert [r[1] for r in log.segment_refs()] == [(1, 4), (5, 8), (9, 10)]
        assert log.fold(0, 10) == [DUMMY_ENTRY, *es(1, 10)]
        assert [log.fetch_term(i) for i in (1, 5, 10)] == [1, 1, 1]
        stack.stop_all()


def test_a_long_log_keeps_only_a_window_of_wal_max_entries_in_memory(
    node: Node, tmp_path: Any
) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segment_max_entries=16, wal_max_entries=20)
        log = open_log(stack)
        held: list[int] = []
        for first in range(1, 301, 10):
            log.write(es(first, first + 9))
            pump(log, UID, lambda: written_up(log))
            stack.sync()
            drain_events(log, UID)
            held.append(max(log.mem_size() - 1, len(stack.ets.mem_table(UID))))
        # every file of 20 entries went to segments and left the log's memory and the
        # memtables: what stays is the current file's entries, however long the log
        assert max(held) <= 20
        assert log.fold(1, 300) == es(1, 300)
        assert log.last_written() == (300, 1)
        stack.stop_all()


def test_an_overwrite_of_flushed_entries_is_read_and_recovered_correctly(
    node: Node, tmp_path: Any
) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segment_max_entries=4)
        log = open_log(stack)
        log.write(es(1, 10, term=1))
        pump(log, UID, lambda: written_up(log))
        stack.rollover()
        pump(log, UID, lambda: log.mem_size() == 1)
        # a new leader overwrites 5.. with a shorter suffix of term 2
        log.write(es(5, 6, term=2))
        pump(log, UID, lambda: written_up(log))
        expected = [DUMMY_ENTRY, *es(1, 4, 1), *es(5, 6, 2)]
        assert log.fold(0, 20) == expected and log.last_index_term() == (6, 2)
        # recovered while term-2 entries are only in the WAL: the old 7..10 stay dead
        assert open_log(stack).fold(0, 20) == expected
        stack.rollover()
        drain_events(log, UID)
        assert log.fold(0, 20) == expected and log.mem_size() == 1
        recovered = open_log(stack)
        assert recovered.fold(0, 20) == expected
        assert recovered.last_written() == (6, 2)
        stack.stop_all()


# --- restart recovery -----------------------------------------------------------------------


def build_history(stack: Stack, log: DiskLog) -> list[Any]:
    """Several terms, an overwrite, part in segments and part in the WAL."""
    log.write(es(1, 6, 1))
    pump(log, UID, lambda: written_up(log))
    stack.rollover()
    log.write(es(4, 9, 2))
    pump(log, UID, lambda: written_up(log))
    stack.rollover()
    for e in es(10, 12, 3):
        log.append(e)
    pump(log, UID, lambda: written_up(log))
    drain_events(log, UID)
    return log.fold(0, 100)


def test_a_restarted_server_recovers_exactly_what_was_written(
    node: Node, tmp_path: Any
) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segment_max_entries=4)
        log = open_log(stack)
        history = build_history(stack, log)
        assert history == [DUMMY_ENTRY, *es(1, 3, 1), *es(4, 9, 2), *es(10, 12, 3)]
        again = open_log(stack)
        assert again.fold(0, 100) == history
        assert again.last_written() == (12, 3) == again.last_index_term()
        assert again.pending() == [] and not again.is_new()
        stack.stop_all()


def test_a_restarted_node_recovers_exactly_what_was_written(node: Node, tmp_path: Any) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segment_max_entries=4)
        log = open_log(stack)
        history = build_history(stack, log)
        restart_node(stack)
        again = open_log(stack)  # possibly while recovered files are being flushed
        assert again.fold(0, 100) == history and again.last_written() == (12, 3)
        stack.sync()
        assert stack.wal_files() == ["0000000000000004.wal"]  # recovered files flushed
        drain_events(again, UID)  # the server deletes the flushed rows as it hears of them
        final = open_log(stack)
        assert final.fold(0, 100) == history and final.mem_size() == 1
        stack.stop_all()


def test_a_torn_wal_tail_loses_only_the_unacknowledged_batch(node: Node, tmp_path: Any) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segments=False)
        log = open_log(stack)
        for n in range(3):
            log.write(es(n * 3 + 1, n * 3 + 3))
            pump(log, UID, lambda: written_up(log))
        (name,) = stack.wal_files()
        stack.kill_wal()
        path = os.path.join(stack.wal_dir, name)
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) - 5)
        stack.ets = LogEts()
        stack.start(segments=False)
        again = open_log(stack)
        assert again.fold(0, 100) == [DUMMY_ENTRY, *es(1, 6)]
        assert again.last_written() == (6, 1)
        stack.stop_all()


def test_entries_after_a_hole_are_dropped_and_a_log_must_follow_its_snapshot(
    tmp_path: Any,
) -> None:
    d = str(tmp_path / UID)
    os.makedirs(d)
    ra_segment.write(d, 1, es(1, 3))
    ra_segment.write(d, 2, es(6, 7))  # 4..5 missing: not part of the log
    log = DiskLog.open(d, UID)
    assert log.last_index_term() == (3, 1) and log.fold(0, 10)[-1] == es(3, 3)[0]
    snapshot_store.write(d, snapshot_store.SNAPSHOTS,
                         {"index": 4, "term": 1, "cluster": {}, "machine_version": 0}, "s",
                         sync=False)
    with pytest.raises(CorruptLog):
        DiskLog.open(d, UID)


def test_recovery_keeps_a_segment_whose_flush_is_still_being_announced(tmp_path: Any) -> None:
    """Open between the segment writer's rename and its ``segments`` event."""
    d = str(tmp_path / UID)
    os.makedirs(d)
    ets = LogEts()
    table = ets.mem_table_please(UID)  # the table being flushed
    for entry in es(1, 4):
        table.insert(entry)
    name, rng = ra_segment.write(d, 1, es(1, 4))  # ... already renamed into place
    log = DiskLog.open(d, UID, ets)
    assert log.fold(0, 10) == [DUMMY_ENTRY, *es(1, 4)]
    assert ra_segment.list_segments(d) == [name]
    log.handle_event(("segments", [(table.tid, [(1, 4)])], [(name, rng)]))
    assert log.mem_size() == 1 and log.fold(0, 10) == [DUMMY_ENTRY, *es(1, 4)]
    assert DiskLog.open(d, UID).fold(0, 10) == [DUMMY_ENTRY, *es(1, 4)]


def test_a_segment_superseded_by_a_newer_segment_is_deleted(tmp_path: Any) -> None:
    d = str(tmp_path / UID)
    os.makedirs(d)
    ra_segment.write(d, 1, es(3, 6, 1))
    ra_segment.write(d, 2, es(1, 2, 1) + es(3, 4, 2))  # an overwrite from 1 flushed later
    log = DiskLog.open(d, UID)
    assert log.fold(0, 10) == [DUMMY_ENTRY, *es(1, 2, 1), *es(3, 4, 2)]
    assert ra_segment.list_segments(d) == [ra_segment.file_name(2)]


@pytest.mark.parametrize("seed", [1, 2, 3, 15, 21])
def test_random_writes_overwrites_rollovers_and_restarts_match_a_plain_list(
    node: Node, tmp_path: Any, seed: int
) -> None:
    rng = random.Random(seed)
    with node.attached():
        stack = Stack(str(tmp_path)).start(segment_max_entries=3)
        log = open_log(stack)
        ref: list[Any] = [DUMMY_ENTRY]
        term = 1
        for _ in range(40):
            op = rng.choice(["append", "append", "overwrite", "roll", "reopen", "restart"])
            if op == "append":
                for _ in range(rng.randint(1, 4)):
                    e = (len(ref), term, ("cmd", len(ref), term))
                    log.append(e)
                    ref.append(e)
            elif op == "overwrite":
                term += 1
                first = rng.randint(1, len(ref))
                new = es(first, first + rng.randint(0, 3), term)
                log.write(new)
                ref[first:] = new
            elif op == "roll":
                stack.rollover()
            elif op == "reopen":
                log = open_log(stack)
            else:
                restart_node(stack)
                log = open_log(stack)
            pump(log, UID, lambda lg=log: written_up(lg))
            drain_events(log, UID, quiet_ms=5)
            assert log.fold(0, 10_000) == ref, op
        stack.rollover()
        drain_events(log, UID)
        assert log.mem_size() == 1
        assert open_log(stack).fold(0, 10_000) == ref
        stack.stop_all()


# --- snapshots on disk ------------------------------------------------------------------------


def test_a_snapshot_is_fsynced_truncates_segments_and_is_recovered(
    node: Node, tmp_path: Any
) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segment_max_entries=4)
        log = open_log(stack, min_snapshot_interval=2, fsync=stack.fsync)
        log.write(es(1, 12))
        pump(log, UID, lambda: written_up(log))
        stack.rollover()
        pump(log, UID, lambda: log.mem_size() == 1)
        (eff,) = log.update_release_cursor(9, CLUSTER, 0, {"total": 45})
        before = stack.fsync.calls
        _, evt = run_bg_work(log, eff)
        assert stack.fsync.calls > before  # a snapshot is durable before it is reported
        assert os.listdir(os.path.join(stack.server_dir(UID), "snapshots")) == [
            snapshot_store.dir_name(9, 1)]
        log.handle_event(evt)
        # the segment holding 1..4 and 5..8 went; 9..12 is still needed
        assert [r[1] for r in log.segment_refs()] == [(9, 12)]
        assert ra_segment.list_segments(stack.server_dir(UID)) == [r[0] for r in log.segment_refs()]
        assert stack.ets.smallest_live_index(UID) == 10
        again = open_log(stack)
        assert again.recovery_snapshot() == ({"index": 9, "term": 1, "cluster": CLUSTER,
                                              "machine_version": 0}, {"total": 45})
        assert again.first_index() == 10 and again.fold(0, 100) == es(10, 12)
        assert again.last_written() == (12, 1)
        stack.stop_all()


def test_checkpoints_are_written_without_fsync_and_promoted_with_one(tmp_path: Any) -> None:
    fsync = CountingFsync()
    log = DiskLog.open(str(tmp_path / UID), UID, min_checkpoint_interval=1, fsync=fsync)
    log.write(es(1, 8))
    log.handle_event(("written", 1, [(1, 8)]))
    (eff,) = log.checkpoint(5, CLUSTER, 0, "c5")
    log.handle_event(run_bg_work(log, eff)[1])
    assert fsync.calls == 0
    again = DiskLog.open(str(tmp_path / UID), UID)
    assert again.checkpoints() == [({"index": 5, "term": 1, "cluster": CLUSTER,
                                     "machine_version": 0}, "c5")]
    assert again.recovery_snapshot() == again.checkpoints()[0] and again.first_index() == 0
    (eff,) = log.promote_checkpoint(6)
    log.handle_event(run_bg_work(log, eff)[1])
    assert fsync.calls >= 1
    assert os.listdir(tmp_path / UID / "checkpoints") == []
    again = DiskLog.open(str(tmp_path / UID), UID)
    # (6..8 never went through a WAL here, so only the snapshot is durable)
    assert again.snapshot_index_term() == (5, 1) and again.first_index() == 6
    assert again.last_index_term() == (5, 1) and again.fold(0, 10) == []


def test_a_newer_snapshot_replaces_the_older_one_on_disk(tmp_path: Any) -> None:
    d = str(tmp_path / UID)
    log = DiskLog.open(d, UID, min_snapshot_interval=1)
    log.write(es(1, 8))
    log.handle_event(("written", 1, [(1, 8)]))
    for idx in (3, 6):
        (eff,) = log.update_release_cursor(idx, CLUSTER, 0, idx)
        log.handle_event(run_bg_work(log, eff)[1])
    assert os.listdir(os.path.join(d, "snapshots")) == [snapshot_store.dir_name(6, 1)]


def test_an_invalid_snapshot_is_deleted_and_the_older_one_used(tmp_path: Any) -> None:
    d = str(tmp_path / UID)
    os.makedirs(d)
    good = {"index": 3, "term": 1, "cluster": {}, "machine_version": 0}
    snapshot_store.write(d, snapshot_store.SNAPSHOTS, good, "good", sync=False)
    bad = snapshot_store.write(d, snapshot_store.SNAPSHOTS, {**good, "index": 5}, "bad",
                               sync=False)
    with open(os.path.join(bad, snapshot_store.FILE), "r+b") as f:
        f.seek(20)
        f.write(b"\x00\x01\x02")
    log = DiskLog.open(d, UID)
    assert log.current_snapshot() == (good, "good")
    assert os.listdir(os.path.join(d, "snapshots")) == [snapshot_store.dir_name(3, 1)]


def test_an_installed_snapshot_is_durable_and_replaces_the_log(node: Node, tmp_path: Any) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segment_max_entries=4)
        log = open_log(stack)
        log.write(es(1, 6))
        pump(log, UID, lambda: written_up(log))
        stack.rollover()
        pump(log, UID, lambda: log.mem_size() == 1)
        log.install_snapshot({"index": 50, "term": 4, "cluster": CLUSTER,
                              "machine_version": 0}, "s50")
        assert ra_segment.list_segments(stack.server_dir(UID)) == []
        log.write(es(51, 52, 4))
        flush_to_wal(log, UID)
        pump(log, UID, lambda: written_up(log))
        again = open_log(stack)
        assert again.current_snapshot()[1] == "s50" and again.fold(0, 100) == es(51, 52, 4)
        stack.stop_all()


# --- the meta row ----------------------------------------------------------------------------


def test_the_vote_is_stored_synchronously_and_the_rest_lazily(tmp_path: Any) -> None:
    fsync = CountingFsync()
    meta = LogMeta(str(tmp_path), fsync)
    assert (meta.fetch("current_term"), meta.fetch("voted_for"), meta.fetch("last_applied")) \
        == (0, None, 0)
    meta.store("last_applied", 7)
    assert fsync.calls == 0 and LogMeta(str(tmp_path)).fetch("last_applied") == 0
    meta.update_term_and_voted_for(3, ("s1", "n1"))
    assert fsync.calls == 1
    reread = LogMeta(str(tmp_path))
    assert (reread.fetch("current_term"), reread.fetch("voted_for"),
            reread.fetch("last_applied")) == (3, ("s1", "n1"), 7)
    meta.sync()
    assert fsync.calls == 1  # nothing was pending
    with pytest.raises(KeyError):
        meta.store("colour", "blue")


def test_a_disk_log_keeps_its_meta_in_its_directory(tmp_path: Any) -> None:
    log = DiskLog.open(str(tmp_path / UID), UID)
    log.meta.store("last_applied", 4)
    log.close()
    assert DiskLog.open(str(tmp_path / UID), UID).meta.fetch("last_applied") == 4


# --- the pure core on a DiskLog ----------------------------------------------------------------


@pytest.fixture
def sim_on_disk(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> list[DiskLog]:
    """Make `ra.sim.Sim` build `DiskLog`s instead of `MemoryLog`s."""
    made: list[DiskLog] = []

    def factory(**opts: Any) -> DiskLog:
        uid = f"s{len(made) + 1}"
        log = DiskLog.open(str(tmp_path / uid), uid, **opts)
        made.append(log)
        return log

    monkeypatch.setattr(ra_sim, "MemoryLog", factory)
    return made


def test_the_simulated_cluster_runs_on_disk_logs(sim_on_disk: list[DiskLog]) -> None:
    sim = ra_sim.Sim(seed=11)
    assert len(sim_on_disk) == 3
    sim.trigger_election(sim.ids[0])
    assert sim.run_until_leader() is not None
    for i in range(1, 21):
        sim.command(("add", i), i)
    sim.run_for(2_000)
    assert {s.state.machine_state for s in sim.servers.values()} == {210}
    sim.check_log_matching()
    for log in sim_on_disk:
        # the simulation's WAL is make-believe: only the dummy entry is on disk
        assert DiskLog.open(log.dir, log.uid).fold(0, 100) == [DUMMY_ENTRY]


@pytest.mark.parametrize("seed", [4, 9])
def test_a_follower_catches_up_by_snapshot_on_disk_logs(
    sim_on_disk: list[DiskLog], seed: int
) -> None:
    sim = ra_sim.Sim(seed=seed, machine=ra_sim.SnapshottingCounter(every=5),
                     min_snapshot_interval=8, snapshot_chunk_size=4)
    sim.trigger_election(sim.ids[0])
    lead = sim.run_until_leader()
    assert lead is not None
    lagging = next(sid for sid in sim.ids if sid != lead)
    sim.partition([sid[1] for sid in sim.ids if sid != lagging], [lagging[1]])
    for i in range(1, 61):
        sim.command(("add", i), i, to=lead)
        sim.run_for(20)
    sim.run_for(2_000)
    sim.heal()
    sim.run_for(15_000)
    assert any(peer == lagging for peer, _ in sim.installs)
    assert {s.state.machine_state for s in sim.servers.values()} == {sum(range(1, 61))}
    sim.check_log_matching()
    # the follower's installed snapshot is on disk
    log = sim.servers[lagging].state.log
    assert DiskLog.open(log.dir, log.uid).snapshot_index_term() == log.snapshot_index_term()
