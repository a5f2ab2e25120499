"""Live indexes (Ra's log v3): a snapshot keeps the log entries its machine still
needs below it. They stay readable from memory and segments, across restarts;
segment files go only once they hold no live entry, and a major compaction
rewrites the files below the snapshot to hold nothing but live entries."""

from __future__ import annotations

import os
from typing import Any

from actors import Node
from ra import segment as ra_segment
from ra import snapshot_store
from ra.disk_log import DiskLog, run_bg_work
from ra.log import MemoryLog
from ra.log_ets import LogEts
from tests.ra.ra_disk_support import Stack, drain_events, flush_to_wal, next_msg, pump

UID = "U1"
CLUSTER: dict[Any, Any] = {("s1", "n1"): {}}


def es(first: int, last: int, term: int = 1) -> list[tuple[int, int, Any]]:
    return [(i, term, ("cmd", i, term)) for i in range(first, last + 1)]


def open_log(stack: Stack, **opts: Any) -> DiskLog:
    return DiskLog.open(stack.server_dir(UID), UID, stack.ets, **opts)


def written_up(log: DiskLog) -> bool:
    return log.last_written() == log.last_index_term()


def snapshot(log: Any, idx: int, live: list[int]) -> None:
    """Take and adopt a snapshot at `idx` whose machine keeps `live`."""
    (eff,) = log.update_release_cursor(idx, CLUSTER, 0, ("state", idx), live)
    log.handle_event(run_bg_work(log, eff)[1])
    assert log.snapshot_index_term()[0] == idx


def seg_ranges(log: DiskLog) -> list[tuple[int, int]]:
    return [r for _, r in log.segment_refs()]


def on_segments(stack: Stack, log: DiskLog, first: int, last: int) -> None:
    """Write ``first..last`` and move them into segments (4 entries a file)."""
    for e in es(first, last):
        log.append(e)
    pump(log, UID, lambda: written_up(log))
    stack.rollover()
    pump(log, UID, lambda: log.mem_size() <= 1)


def test_entries_at_live_indexes_stay_readable_below_the_snapshot_and_after_restart(
    node: Node, tmp_path: Any
) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segment_max_entries=4)
        log = open_log(stack, min_snapshot_interval=1)
        on_segments(stack, log, 1, 12)
        assert seg_ranges(log) == [(1, 4), (5, 8), (9, 12)]
        snapshot(log, 10, [2, 6])
        assert log.first_index() == 11 and log.live_indexes() == [2, 6]
        # minor compaction: no file goes while it holds a live entry
        assert seg_ranges(log) == [(1, 4), (5, 8), (9, 12)]
        assert log.fetch(2) == (2, 1, ("cmd", 2, 1)) and log.fetch(6) == (6, 1, ("cmd", 6, 1))
        assert log.fetch(3) is None and log.fetch(10) is None
        assert log.sparse_read([6, 3, 2, 11]) == [(6, 1, ("cmd", 6, 1)), (2, 1, ("cmd", 2, 1)),
                                                  (11, 1, ("cmd", 11, 1))]
        # the WAL and the segment writer keep everything from the smallest live index
        assert stack.ets.smallest_live_index(UID) == 2
        on_segments(stack, log, 13, 16)
        snapshot(log, 14, [6])
        # 1..4 holds no live entry any more; 13..16 is above the snapshot
        assert seg_ranges(log) == [(5, 8), (13, 16)]
        assert log.sparse_read([2, 6, 15]) == [(6, 1, ("cmd", 6, 1)), (15, 1, ("cmd", 15, 1))]
        # restart: the range is the snapshot's successor on, the gaps are allowed
        stack.stop_all()
        stack.ets = LogEts()
        stack.start(segment_max_entries=4)
        again = open_log(stack)
        assert again.snapshot_index_term() == (14, 1) and again.live_indexes() == [6]
        assert again.first_index() == 15 and again.last_index_term() == (16, 1)
        assert again.fetch(6) == (6, 1, ("cmd", 6, 1)) and again.fetch(5) is None
        assert again.fold(15, 16) == es(15, 16)
        stack.stop_all()


def test_live_entries_still_in_memory_survive_a_snapshot_and_reach_segments(
    node: Node, tmp_path: Any
) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segment_max_entries=4)
        log = open_log(stack, min_snapshot_interval=1)
        for e in es(1, 8):
            log.append(e)
        pump(log, UID, lambda: written_up(log))
        snapshot(log, 6, [3])
        assert log.fetch(3) == (3, 1, ("cmd", 3, 1))
        # a node restart before any flush: the WAL rebuilds the tables, the log
        # keeps the live row and recovers across the gap below its snapshot
        stack.stop_all()
        stack.ets = LogEts()
        stack.start(segment_max_entries=4)
        log = open_log(stack, min_snapshot_interval=1)
        assert log.fetch(3) == (3, 1, ("cmd", 3, 1)) and log.fetch(4) is None
        assert log.first_index() == 7 and log.last_index_term() == (8, 1)
        stack.rollover()
        drain_events(log, UID)
        assert log.mem_size() == 0 and log.fetch(3) == (3, 1, ("cmd", 3, 1))
        assert seg_ranges(log)[0][0] <= 3
        stack.stop_all()


def test_a_major_compaction_rewrites_files_below_the_snapshot_to_their_live_entries(
    node: Node, tmp_path: Any
) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segment_max_entries=4)
        log = open_log(stack, min_snapshot_interval=1)
        on_segments(stack, log, 1, 12)
        snapshot(log, 10, [2, 6, 7])
        files = [os.path.join(stack.server_dir(UID), n) for n, _ in log.segment_refs()]
        log.handle_event("major_compaction")  # ra.api.trigger_compaction
        assert log.major_compactions == 1
        # the two files below the snapshot became one holding the live entries only
        assert ra_segment.read_index(files[0]).indexes() == [2, 6, 7]
        assert not os.path.exists(files[1])
        assert ra_segment.read_index(files[2]).indexes() == list(range(9, 13))  # above
        assert seg_ranges(log) == [(2, 7), (9, 12)]
        assert log.sparse_read([2, 6, 7]) == [(2, 1, ("cmd", 2, 1)), (6, 1, ("cmd", 6, 1)),
                                              (7, 1, ("cmd", 7, 1))]
        again = open_log(stack)
        assert again.sparse_read([2, 7]) == [(2, 1, ("cmd", 2, 1)), (7, 1, ("cmd", 7, 1))]
        assert again.fold(11, 12) == es(11, 12)
        stack.stop_all()


def test_every_num_minors_minor_compactions_run_a_major_one(node: Node, tmp_path: Any) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segment_max_entries=4)
        log = open_log(stack, min_snapshot_interval=1, num_minors=2)
        on_segments(stack, log, 1, 12)
        snapshot(log, 9, [2])
        assert log.major_compactions == 0
        snapshot(log, 10, [2])
        assert log.major_compactions == 1 and log.minor_compactions == 0
        path = os.path.join(stack.server_dir(UID), log.segment_refs()[0][0])
        assert ra_segment.read_index(path).indexes() == [2]
        stack.stop_all()


def test_a_snapshot_keeps_its_live_indexes_on_disk(tmp_path: Any) -> None:
    d = str(tmp_path / UID)
    log = DiskLog.open(d, UID, min_snapshot_interval=1)
    log.write(es(1, 8))
    log.handle_event(("written", 1, [(1, 8)]))
    (eff,) = log.update_release_cursor(6, CLUSTER, 0, "s6", [1, 4])
    assert eff[1][:2] == ("write_snapshot", "snapshot") and eff[1][3:] == ("s6", [1, 4])
    log.handle_event(run_bg_work(log, eff)[1])
    assert snapshot_store.live_of(d, snapshot_store.SNAPSHOTS, 6, 1) == [1, 4]
    # (the entries never went through a WAL here: only the snapshot is on disk)
    assert DiskLog.open(d, UID).live_indexes() == [1, 4]


def test_the_memory_log_keeps_live_entries_below_its_snapshot() -> None:
    log = MemoryLog(min_snapshot_interval=1)
    for e in es(1, 8):
        log.append(e)
    log.handle_event(("written", 1, [(1, 8)]))
    snapshot(log, 6, [2, 5])
    assert log.first_index() == 7
    assert log.sparse_read([5, 2, 3]) == [(5, 1, ("cmd", 5, 1)), (2, 1, ("cmd", 2, 1))]
    assert log.fetch_term(5) is None  # live entries are below the log's range


def test_a_follower_writes_live_entries_sparsely_and_installs_the_snapshot_above_them() -> None:
    log = MemoryLog()
    log.write(es(1, 4))
    log.handle_event(("written", 1, [(1, 4)]))
    log.set_last_index(3)  # init: drop what lies above last_applied
    log.write_sparse((5, 2, ("cmd", 5, 2)))
    log.write_sparse((9, 2, ("cmd", 9, 2)))
    log.install_snapshot({"index": 12, "term": 2, "cluster": CLUSTER, "machine_version": 0},
                         "s12", [2, 5, 9])
    assert log.sparse_read([2, 5, 9]) == [(2, 1, ("cmd", 2, 1)), (5, 2, ("cmd", 5, 2)),
                                          (9, 2, ("cmd", 9, 2))]
    assert log.last_written() == (12, 2)
    log.handle_event(("written", 2, [9, 5]))
    assert log.pending() == []


def test_an_aborted_install_undoes_the_sparse_writes(node: Node, tmp_path: Any) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segment_max_entries=4)
        log = open_log(stack)
        log.write(es(1, 4))
        pump(log, UID, lambda: written_up(log))
        log.set_last_index(3)
        log.write_sparse((7, 2, ("cmd", 7, 2)))
        log.set_last_index(3)  # the receive timed out
        assert log.last_index_term() == (3, 1) and log.fetch(7) is None
        log.write(es(4, 5, 3))
        pump(log, UID, lambda: written_up(log))
        assert log.fold(1, 10) == [*es(1, 3), *es(4, 5, 3)]
        stack.stop_all()


def test_the_first_write_after_installing_a_snapshot_with_live_entries_needs_no_resend(
    node: Node, tmp_path: Any
) -> None:
    # as Ra's previous_wal_index: a log with nothing above its snapshot names no
    # previous index, so the WAL takes the write although the smallest live index
    # lies below the snapshot
    with node.attached():
        stack = Stack(str(tmp_path)).start(segment_max_entries=4)
        log = open_log(stack)
        log.write(es(1, 4))
        pump(log, UID, lambda: written_up(log))
        log.set_last_index(2)
        log.write_sparse((6, 2, ("cmd", 6, 2)))
        pump(log, UID, lambda: log.pending() == [])
        log.install_snapshot({"index": 8, "term": 2, "cluster": CLUSTER, "machine_version": 0},
                             "s8", [1, 6])
        log.write(es(9, 10, 2))
        flush_to_wal(log, UID)
        msg = next_msg()
        assert msg == ("ra_log_event", ("written", 2, [10, 9])), msg
        log.handle_event(msg[1])
        assert log.last_written() == (10, 2)
        assert log.sparse_read([1, 6, 9]) == [(1, 1, ("cmd", 1, 1)), (6, 2, ("cmd", 6, 2)),
                                              (9, 2, ("cmd", 9, 2))]
        stack.stop_all()
