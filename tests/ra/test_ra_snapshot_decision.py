"""When a release cursor or a checkpoint hint turns into a write, and what becomes
of writes that finish after the log moved on (Ra's ``ra_log:should_snapshot``,
``ra_log:promote_checkpoint`` and ``ra_snapshot:take_extra_checkpoints``)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from actors import Node
from ra import snapshot_store
from ra.disk_log import DiskLog, run_bg_work
from ra.log import DEFAULT_MIN_SNAPSHOT_INTERVAL, MemoryLog
from ra.log_base import CHECKPOINT_MAX_DIFF, thin_checkpoints
from tests.ra.ra_disk_support import Stack, pump

UID = "U1"
CLUSTER: dict[Any, dict[str, Any]] = {("s1", "n1"): {}}


def es(first: int, last: int, term: int = 1) -> list[tuple[int, int, Any]]:
    return [(i, term, ("cmd", i)) for i in range(first, last + 1)]


def meta(idx: int, term: int = 1) -> dict[str, Any]:
    return {"index": idx, "term": term, "cluster": CLUSTER, "machine_version": 0}


def disk_log(path: Any, **opts: Any) -> DiskLog:
    log = DiskLog.open(str(path), UID, **opts)
    log.write(es(1, 12))
    log.handle_event(("written", 1, [(1, 12)]))
    log.take_wal_writes()
    return log


def names(path: Any, kind_dir: str) -> list[str]:
    return sorted(os.listdir(os.path.join(str(path), kind_dir)))


# --- the snapshot decision ------------------------------------------------------------


def test_the_default_interval_is_4096_entries_past_the_snapshot() -> None:
    log = MemoryLog(es(1, 4097))
    log.take_wal_writes()
    assert DEFAULT_MIN_SNAPSHOT_INTERVAL == 4096
    assert not log.should_snapshot(4096)
    assert log.should_snapshot(4097)


def test_a_release_cursor_past_the_first_segment_index_snapshots_within_the_interval(
        node: Node, tmp_path: Any) -> None:
    """Entries in segments: a snapshot past their first index may free a segment file,
    so it is taken however few entries it covers; entries only in memory wait for
    the interval."""
    with node.attached():
        stack = Stack(str(tmp_path)).start(segment_max_entries=4)
        log = DiskLog.open(stack.server_dir(UID), UID, stack.ets)
        log.write(es(1, 12))
        pump(log, UID, lambda: log.last_written() == (12, 1))
        assert log.first_segment_index() is None
        assert log.update_release_cursor(9, CLUSTER, 0, "s9") == []
        stack.rollover()
        pump(log, UID, lambda: log.mem_size() == 1)
        assert log.first_segment_index() == 1
        assert log.update_release_cursor(1, CLUSTER, 0, "s1") == []  # not past it
        (eff,) = log.update_release_cursor(9, CLUSTER, 0, "s9")
        log.handle_event(run_bg_work(log, eff)[1])
        assert log.snapshot_index_term() == (9, 1)
        # the segment 9..12 still holds entries after the snapshot: a release cursor
        # past its first index snapshots again
        assert log.first_segment_index() == 9
        assert log.update_release_cursor(10, CLUSTER, 0, "s10") != []
        stack.stop_all()


def test_the_in_memory_log_has_no_segments_and_keeps_to_the_interval() -> None:
    log = MemoryLog(es(1, 12), min_snapshot_interval=20)
    log.take_wal_writes()
    assert log.first_segment_index() is None
    assert log.update_release_cursor(9, CLUSTER, 0, "s9") == []


# --- writes that finish late ------------------------------------------------------------


def test_a_snapshot_written_after_a_newer_one_was_installed_is_deleted(tmp_path: Any) -> None:
    log = disk_log(tmp_path, min_snapshot_interval=1)
    (eff,) = log.update_release_cursor(6, CLUSTER, 0, "s6")
    _, evt = run_bg_work(log, eff)
    log.install_snapshot(meta(10), "installed")
    log.handle_event(evt)
    assert log.current_snapshot() == (meta(10), "installed")
    assert names(tmp_path, "snapshots") == [snapshot_store.dir_name(10, 1)]


def test_a_checkpoint_written_below_an_installed_snapshot_is_deleted(tmp_path: Any) -> None:
    log = disk_log(tmp_path, min_checkpoint_interval=1)
    (eff,) = log.checkpoint(5, CLUSTER, 0, "c5")
    _, evt = run_bg_work(log, eff)
    log.install_snapshot(meta(10), "installed")
    log.handle_event(evt)
    assert log.checkpoints() == []
    assert names(tmp_path, "checkpoints") == []


def test_a_checkpoint_being_written_does_not_hold_back_a_promotion(tmp_path: Any) -> None:
    log = disk_log(tmp_path, min_checkpoint_interval=1)
    (eff,) = log.checkpoint(4, CLUSTER, 0, "c4")
    log.handle_event(run_bg_work(log, eff)[1])
    (writing,) = log.checkpoint(8, CLUSTER, 0, "c8")
    (promotion,) = log.promote_checkpoint(6)
    assert promotion[1] == ("promote_checkpoint", (4, 1))
    # while a snapshot is pending nothing else starts
    assert log.checkpoint(11, CLUSTER, 0, "c11") == []
    assert log.promote_checkpoint(10) == []
    log.handle_event(run_bg_work(log, writing)[1])
    log.handle_event(run_bg_work(log, promotion)[1])
    assert log.snapshot_index_term() == (4, 1) and log.first_index() == 5
    assert [c[1] for c in log.checkpoints()] == ["c8"] and log.pending_snapshot() is None
    assert names(tmp_path, "checkpoints") == [snapshot_store.dir_name(8, 1)]
    again = DiskLog.open(str(tmp_path), UID)
    assert again.recovery_snapshot() == (meta(8), "c8")


def test_a_repeated_checkpoint_event_leaves_the_held_one_and_the_one_being_written(
        tmp_path: Any) -> None:
    log = disk_log(tmp_path, min_checkpoint_interval=1)
    (eff,) = log.checkpoint(4, CLUSTER, 0, "c4")
    _, evt4 = run_bg_work(log, eff)
    log.handle_event(evt4)
    (writing,) = log.checkpoint(8, CLUSTER, 0, "c8")
    log.handle_event(evt4)
    log.handle_event(run_bg_work(log, writing)[1])
    assert [c[1] for c in log.checkpoints()] == ["c4", "c8"]
    assert names(tmp_path, "checkpoints") == [snapshot_store.dir_name(4, 1),
                                              snapshot_store.dir_name(8, 1)]


# --- how many checkpoints are kept ---------------------------------------------------------


def ckpts(*idxs: int) -> list[Any]:
    return [(meta(i), i) for i in idxs]


@pytest.mark.parametrize(("held", "max_checkpoints", "gone", "kept"), [
    # at or under the limit: nothing goes
    ((3, 6), 2, [], [3, 6]),
    # the oldest checkpoint between two that are close together goes, not the oldest
    ((3, 6, 9), 2, [6], [3, 9]),
    ((3, 6, 9, 12), 3, [6], [3, 9, 12]),
    # one at a time
    ((1, 2, 3, 4, 5), 2, [2], [1, 3, 4, 5]),
    # gaps wider than the spacing: the first close triple is further on
    ((1, CHECKPOINT_MAX_DIFF + 1, CHECKPOINT_MAX_DIFF + 2, CHECKPOINT_MAX_DIFF + 3), 3,
     [CHECKPOINT_MAX_DIFF + 2], [1, CHECKPOINT_MAX_DIFF + 1, CHECKPOINT_MAX_DIFF + 3]),
    # no close triple: more than max_checkpoints are kept
    ((1, CHECKPOINT_MAX_DIFF, 2 * CHECKPOINT_MAX_DIFF), 2, [],
     [1, CHECKPOINT_MAX_DIFF, 2 * CHECKPOINT_MAX_DIFF]),
    # twice the limit held: the spacing doubles
    ((1, CHECKPOINT_MAX_DIFF, 2 * CHECKPOINT_MAX_DIFF, 3 * CHECKPOINT_MAX_DIFF), 2,
     [CHECKPOINT_MAX_DIFF], [1, 2 * CHECKPOINT_MAX_DIFF, 3 * CHECKPOINT_MAX_DIFF]),
])
def test_checkpoints_over_the_limit_are_thinned_as_ra_thins_them(
        held: tuple[int, ...], max_checkpoints: int, gone: list[int], kept: list[int]) -> None:
    held_list = ckpts(*held)
    assert [c[1] for c in thin_checkpoints(held_list, max_checkpoints)] == gone
    assert [c[1] for c in held_list] == kept


def test_a_new_checkpoint_over_max_checkpoints_thins_the_list_on_disk(tmp_path: Any) -> None:
    log = disk_log(tmp_path, min_checkpoint_interval=0, max_checkpoints=2)
    for idx in (3, 6, 9):
        (eff,) = log.checkpoint(idx, CLUSTER, 0, idx)
        log.handle_event(run_bg_work(log, eff)[1])
    assert [c[1] for c in log.checkpoints()] == [3, 9]
    assert names(tmp_path, "checkpoints") == [snapshot_store.dir_name(3, 1),
                                              snapshot_store.dir_name(9, 1)]


def test_recovery_keeps_every_checkpoint_newer_than_the_snapshot(tmp_path: Any) -> None:
    d = str(tmp_path)
    os.makedirs(d, exist_ok=True)
    snapshot_store.write(d, snapshot_store.SNAPSHOTS, meta(2), "s2", sync=False)
    for idx in (1, 4, 6, 8):
        snapshot_store.write(d, snapshot_store.CHECKPOINTS, meta(idx), idx, sync=False)
    log = DiskLog.open(d, UID, max_checkpoints=2)
    assert [c[1] for c in log.checkpoints()] == [4, 6, 8]
    assert names(d, "checkpoints") == [snapshot_store.dir_name(i, 1) for i in (4, 6, 8)]
