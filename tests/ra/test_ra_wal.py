"""The WAL writer process: batching, written events, gap
detection, overwrites, rollover, recovery."""

from __future__ import annotations

import os
from typing import Any

import pytest

import actors
from actors import Node, gen_server, trace
from ra import wal as ra_wal
from ra import wal_file
from ra.log_base import WalDown
from tests.ra.ra_disk_support import (
    Stack,
    entries,
    held,
    next_msg,
    nothing_more,
    relay,
    write,
    written,
)

UID = "U1"


def view(stack: Stack, uid: str = UID) -> list[Any]:
    """What the mem tables of `uid` hold, per index the newest table's row."""
    return held(stack.ets, uid)


# --- batching -----------------------------------------------------------------


def test_the_wal_counts_its_batches_and_their_entries(node: Node, tmp_path: Any) -> None:
    """What a node's metrics read: batches synced and the entries they held, so the
    mean batch size is one over the other."""
    with node.attached():
        stack = Stack(str(tmp_path)).start(segments=False)
        me = actors.self()
        pids = [actors.spawn_link(relay, me, n) for n in range(3)]
        before = gen_server.call(ra_wal.WAL_NAME, "sync_stats")
        for n, pid in enumerate(pids):  # queued before the WAL runs again: one batch
            write(stack.ets, f"uid{n}", pid, entries(1, 4))
        for _ in pids:
            next_msg()
        after = gen_server.call(ra_wal.WAL_NAME, "sync_stats")
        assert after["syncs"] - before["syncs"] == 1
        assert after["entries"] - before["entries"] == 12
        stack.stop_all()


@pytest.mark.parametrize("writers", [3, 30])
def test_a_mailbox_of_many_writers_is_one_write_and_one_fsync(
    node: Node, tmp_path: Any, writers: int
) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segments=False)
        me = actors.self()
        pids = [actors.spawn_link(relay, me, n) for n in range(writers)]
        before = stack.fsync.calls
        # all appends are queued before the WAL runs again: one batch
        for n, pid in enumerate(pids):
            write(stack.ets, f"uid{n}", pid, entries(1, 3 + n % 2))
        got = sorted((next_msg() for _ in pids), key=lambda m: m[0])
        assert stack.fsync.calls - before == 1
        assert got == [(n, written(1, [(1, 3 + n % 2)])) for n in range(writers)]
        assert nothing_more()
        stack.stop_all()


def test_each_batch_records_a_trace_point(node: Node, tmp_path: Any) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []
    previous = trace.set_sink(lambda kind, fields: seen.append((kind, fields)))
    try:
        with node.attached():
            stack = Stack(str(tmp_path)).start(segments=False)
            me = actors.self()
            write(stack.ets, "a", me, entries(1, 4))
            write(stack.ets, "b", me, entries(1, 2))
            next_msg()
            next_msg()
            stack.stop_all()
    finally:
        trace.set_sink(previous)
    batches = [f for k, f in seen if k == "ra_wal_batch"]
    assert len(batches) == 1
    (b,) = batches
    assert (b["node"], b["entries"], b["writers"]) == (node.name, 6, 2)
    assert b["bytes"] > 0 and b["fsync_ms"] >= 0


def test_fsync_happens_before_any_written_event(node: Node, tmp_path: Any) -> None:
    """A writer hears ``written`` only for what a sync already covered."""
    with node.attached():
        stack = Stack(str(tmp_path)).start(segments=False)
        for n in range(5):
            write(stack.ets, UID, actors.self(), entries(n * 2 + 1, n * 2 + 2))
            next_msg()
            assert stack.fsync.calls == n + 1
        stack.stop_all()


# --- written events, per writer and per term --------------------------------------


def test_written_events_are_per_writer_and_per_term_in_order(node: Node, tmp_path: Any) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segments=False)
        me = actors.self()
        w1 = actors.spawn_link(relay, me, "w1")
        w2 = actors.spawn_link(relay, me, "w2")
        write(stack.ets, "a", w1, entries(1, 3, term=1))
        write(stack.ets, "b", w2, entries(1, 1, term=4))
        write(stack.ets, "a", w1, entries(4, 5, term=2))
        write(stack.ets, "b", w2, entries(2, 2, term=4))
        got = [next_msg() for _ in range(3)]
        assert [m for m in got if m[0] == "w1"] == [
            ("w1", written(1, [(1, 3)])),
            ("w1", written(2, [5, 4])),
        ]
        assert [m for m in got if m[0] == "w2"] == [("w2", written(4, [2, 1]))]
        assert nothing_more()
        stack.stop_all()


def test_the_last_writer_seq_is_known(node: Node, tmp_path: Any) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segments=False)
        assert gen_server.call(ra_wal.WAL_NAME, ("last_writer_seq", UID)) is None
        write(stack.ets, UID, actors.self(), entries(1, 7))
        next_msg()
        assert gen_server.call(ra_wal.WAL_NAME, ("last_writer_seq", UID)) == 7
        stack.stop_all()


def test_append_without_a_wal_is_wal_down(node: Node) -> None:
    with node.attached(), pytest.raises(WalDown):
        ra_wal.append(ra_wal.WAL_NAME, UID, actors.self(), 1, 0, entries(1, 1))


# --- sequence checks ------------------------------------------------------------


def test_a_gap_asks_for_a_resend_once_and_drops_until_it_comes(
    node: Node, tmp_path: Any
) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segments=False)
        me = actors.self()
        write(stack.ets, UID, me, entries(1, 3))
        assert next_msg() == written(1, [(1, 3)])
        write(stack.ets, UID, me, entries(5, 6))
        assert next_msg() == ("ra_log_event", ("resend_write", 4))
        # out of sequence: dropped without another resend request
        write(stack.ets, UID, me, entries(7, 7))
        assert nothing_more()
        write(stack.ets, UID, me, entries(4, 7))
        assert next_msg() == written(1, [(4, 7)])
        assert [e[0] for e in view(stack)] == [1, 2, 3, 4, 5, 6, 7]
        stack.stop_all()


def test_an_overwrite_truncates_the_suffix(node: Node, tmp_path: Any) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segments=False)
        me = actors.self()
        write(stack.ets, UID, me, entries(1, 5, term=1))
        assert next_msg() == written(1, [(1, 5)])
        write(stack.ets, UID, me, entries(3, 4, term=2))
        assert next_msg() == written(2, [4, 3])
        assert view(stack) == entries(1, 2, 1) + entries(3, 4, 2)
        stack.stop_all()


def test_an_overwrite_inside_one_batch_is_reported_as_two_runs(
    node: Node, tmp_path: Any
) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segments=False)
        me = actors.self()
        write(stack.ets, UID, me, entries(1, 4, term=1))
        write(stack.ets, UID, me, entries(2, 2, term=1))
        assert [next_msg(), next_msg()] == [written(1, [(1, 4)]), written(1, [2])]
        assert view(stack) == entries(1, 2, 1)
        stack.stop_all()


def test_writes_below_the_snapshot_are_dropped_and_the_jump_above_it_accepted(
    node: Node, tmp_path: Any
) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segments=False)
        me = actors.self()
        write(stack.ets, UID, me, entries(1, 3))
        next_msg()
        stack.ets.set_snapshot_index(UID, 100)  # a snapshot at 100 was installed
        write(stack.ets, UID, me, entries(99, 102))
        assert next_msg() == written(1, [102, 101])
        write(stack.ets, UID, me, entries(50, 60))
        assert nothing_more()
        stack.stop_all()


# --- rollover -------------------------------------------------------------------------


def test_rollover_hands_files_to_segments_and_deletes_them(node: Node, tmp_path: Any) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(wal_max_size_bytes=1, segment_max_entries=4)
        me = actors.self()
        tids = []
        for n in range(3):
            tids.append(write(stack.ets, UID, me, entries(n * 5 + 1, n * 5 + 5)))
            stack.sync()
        got = [next_msg() for _ in range(6)]
        assert [m for m in got if m[1][0] == "written"] == [
            written(1, [(n * 5 + 1, n * 5 + 5)]) for n in range(3)]
        # every file became segments of at most 4 entries, each reported to the writer
        segs = [m[1] for m in got if m[1][0] == "segments"]
        assert [s[1] for s in segs] == [[(tids[n], [(n * 5 + 1, n * 5 + 5)])] for n in range(3)]
        refs = [r for s in segs for r in s[2]]
        assert [r[1] for r in refs] == [(1, 4), (5, 5), (6, 9), (10, 10), (11, 14), (15, 15)]
        assert sorted(os.listdir(stack.server_dir(UID))) == sorted(r[0] for r in refs)
        # only the fresh current file is left; the rows stay in the mem table until
        # the server handles the ``segments`` event (this process plays the server)
        assert len(stack.wal_files()) == 1
        assert len(view(stack)) == 15
        for _, tid_seqs, _refs in segs:
            for tid, seq in reversed(tid_seqs):
                stack.ets.record_flushed(UID, tid, seq)
        assert view(stack) == []
        stack.stop_all()


def test_the_size_limit_rolls_over_after_the_batch_that_crosses_it(
    node: Node, tmp_path: Any
) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segments=False, wal_max_size_bytes=2000)
        me = actors.self()
        files = [stack.wal_files()]
        for n in range(80):
            write(stack.ets, UID, me, entries(n + 1, n + 1))
            next_msg()
            files.append(stack.wal_files())
        assert len(files[-1]) > 2  # rolled over at least twice
        sizes = [os.path.getsize(os.path.join(stack.wal_dir, n)) for n in files[-1][:-1]]
        # over the limit by one batch at most: the first file's limit is random in
        # (max/2, max], every later file's is the max, as in Ra
        assert 1000 < sizes[0] < 2000 + 200
        assert all(2000 < size < 2000 + 200 for size in sizes[1:])
        stack.stop_all()


# --- recovery --------------------------------------------------------------------------


def test_a_killed_wal_recovers_every_written_entry(node: Node, tmp_path: Any) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segments=False)
        me = actors.self()
        write(stack.ets, UID, me, entries(1, 5, term=1))
        write(stack.ets, "other", me, entries(1, 2, term=3))
        next_msg()
        next_msg()
        write(stack.ets, UID, me, entries(4, 6, term=2))
        next_msg()
        stack.kill_wal()
        stack.ets.reset_mem_tables()
        stack.start(segments=False)
        assert view(stack) == entries(1, 3, 1) + entries(4, 6, 2)
        assert view(stack, "other") == entries(1, 2, 3)
        # the writer state came back too: a gap is still a gap
        write(stack.ets, UID, me, entries(9, 9, term=2))
        assert next_msg() == ("ra_log_event", ("resend_write", 7))
        stack.stop_all()


def test_recovery_skips_the_entries_of_servers_no_longer_registered(
        node: Node, tmp_path: Any) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start()
        me = actors.self()
        write(stack.ets, UID, me, entries(1, 3))
        write(stack.ets, "gone", me, entries(1, 2))
        next_msg()
        next_msg()
        stack.kill_wal()
        stack.ets.reset_mem_tables()
        # "gone" was deleted while the WAL was down: its entries are left in the file
        cfg_registered = {UID}
        stack.stop_all()
        stack.start(registered=cfg_registered.__contains__)
        stack.sync()
        assert not os.path.exists(stack.server_dir("gone"))
        assert os.path.isdir(stack.server_dir(UID))  # the registered one was flushed
        assert gen_server.call(ra_wal.WAL_NAME, ("last_writer_seq", "gone")) is None
        assert gen_server.call(ra_wal.WAL_NAME, ("last_writer_seq", UID)) == 3
        stack.stop_all()


def test_recovery_flushes_recovered_files_to_segments(node: Node, tmp_path: Any) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segments=False)
        write(stack.ets, UID, actors.self(), entries(1, 5))
        next_msg()
        (old,) = stack.wal_files()
        stack.stop_all()
        stack.ets = type(stack.ets)()  # a node restart: the tables are gone
        stack.start()
        stack.sync()
        assert old not in stack.wal_files()
        assert os.listdir(stack.server_dir(UID)) == ["0000000000000001.segment"]
        stack.stop_all()


@pytest.mark.parametrize("cut", [1, 7, 30])
def test_a_torn_tail_recovers_exactly_the_fsynced_prefix(
    node: Node, tmp_path: Any, cut: int
) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segments=False)
        me = actors.self()
        for n in range(3):
            write(stack.ets, UID, me, entries(n * 3 + 1, n * 3 + 3))
            next_msg()
        (name,) = stack.wal_files()
        stack.kill_wal()
        path = os.path.join(stack.wal_dir, name)
        # the last batch was being written when the node stopped: cut it short
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) - cut)
        stack.ets = type(stack.ets)()
        stack.start(segments=False)
        assert view(stack) == entries(1, 6)
        stack.stop_all()


def test_garbage_after_the_last_record_is_a_torn_tail(tmp_path: Any) -> None:
    path = str(tmp_path / wal_file.file_name(1))
    with open(path, "wb") as f:
        f.write(wal_file.HEADER)
        f.write(wal_file.encode([(UID, entries(1, 2))]))
        good = f.tell()
        rec = wal_file.encode([(UID, entries(3, 4))])
        f.write(rec[:8] + b"\xff" * (len(rec) - 8))  # length intact, payload garbage
    got = wal_file.read(path)
    assert got.batches == [[(UID, entries(1, 2))]]
    assert got.torn and got.valid_bytes == good


def test_a_bad_record_before_good_ones_is_refused(tmp_path: Any) -> None:
    path = str(tmp_path / wal_file.file_name(1))
    first = wal_file.encode([(UID, entries(1, 2))])
    with open(path, "wb") as f:
        f.write(wal_file.HEADER)
        f.write(first[:-1] + bytes([first[-1] ^ 0xFF]))
        f.write(wal_file.encode([(UID, entries(3, 4))]))
    with pytest.raises(wal_file.WalCorrupt):
        wal_file.read(path)


def test_a_wal_that_cannot_recover_does_not_start(node: Node, tmp_path: Any) -> None:
    wal_dir = tmp_path / "wal"
    wal_dir.mkdir()
    (wal_dir / wal_file.file_name(1)).write_bytes(b"not a wal file at all")
    with node.attached():
        actors.process_flag("trap_exit", True)
        result = ra_wal.start_link(ra_wal.WalConfig(dir=str(wal_dir), segment_writer=None))
        assert result[0] == "error"
        assert actors.whereis(ra_wal.WAL_NAME) is None


def test_small_batches_sync_on_the_hub_big_slow_or_delayed_ones_on_the_pool(
    node: Node, tmp_path: Any,
) -> None:
    """Handing a small batch to a pool thread costs more than its sync: few entries
    are synced where the WAL runs, unless the disk has been slow or a delay is
    injected (that must never stall the node); big batches always use the pool."""
    with node.attached():
        wal = ra_wal.Wal(ra_wal.WalConfig(dir=str(tmp_path)))
        assert wal._inline(1, 0) and wal._inline(16, 0)
        assert not wal._inline(17, 0)
        assert not wal._inline(1, 5)
        wal.sync_ms_recent.extend([ra_wal.INLINE_SYNC_MAX_MS] * 3)
        assert not wal._inline(1, 0)
        never = ra_wal.Wal(ra_wal.WalConfig(dir=str(tmp_path), inline_sync_max_entries=0))
        assert not never._inline(1, 0)


def test_one_stall_of_the_disk_does_not_move_small_batches_off_the_hub(
    node: Node, tmp_path: Any,
) -> None:
    """The rule looks at the median of the recent syncs: a shared disk stalls for
    several ms now and then, and one such sync must not send every later batch
    through the pool; a disk that is slow most of the time does."""
    with node.attached():
        wal = ra_wal.Wal(ra_wal.WalConfig(dir=str(tmp_path)))
        wal.sync_ms_recent.extend([0.2] * 10 + [40.0])
        assert wal._inline(1, 0)
        wal.sync_ms_recent.extend([40.0] * 10)
        assert not wal._inline(1, 0)
        wal.sync_ms_recent.extend([0.2] * ra_wal.SYNC_HISTORY)
        assert wal._inline(1, 0)


def test_a_batch_records_the_time_of_its_write_and_sync(node: Node, tmp_path: Any) -> None:
    with node.attached():
        wal = ra_wal.Wal(ra_wal.WalConfig(dir=str(tmp_path)))
        wal.recover()
        wal.handle_batch([("append", UID, actors.self(), 1, 0, entries(1, 3))])
        assert len(wal.sync_ms_recent) == 1 and wal.sync_ms_recent[0] > 0.0


# --- pre-allocation (``wal_pre_allocate``) -------------------------------------------


def test_a_pre_allocated_file_is_as_long_as_its_limit_and_recovers_its_records(
    node: Node, tmp_path: Any
) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segments=False, wal_pre_allocate=True,
                                           wal_max_size_bytes=1 << 20)
        me = actors.self()
        for n in range(3):
            write(stack.ets, UID, me, entries(n * 2 + 1, n * 2 + 2))
            next_msg()
        (name,) = stack.wal_files()
        path = os.path.join(stack.wal_dir, name)
        # the first file's limit is random in (max/2, max]: the file is that long at once
        assert (1 << 19) < os.path.getsize(path) <= 1 << 20
        read = wal_file.read(path)
        assert not read.torn and read.valid_bytes < 1000
        assert [e for batch in read.batches for _, es in batch for e in es] == entries(1, 6)
        stack.kill_wal()
        stack.ets = type(stack.ets)()
        stack.start(segments=False, wal_pre_allocate=True, wal_max_size_bytes=1 << 20)
        assert view(stack) == entries(1, 6)
        # the recovered writer continues in a new file, after the old records
        write(stack.ets, UID, me, entries(7, 7))
        assert next_msg() == written(1, [7])
        stack.stop_all()


def test_a_torn_record_before_the_pre_allocated_zeros_is_a_torn_tail(tmp_path: Any) -> None:
    path = str(tmp_path / wal_file.file_name(1))
    good = wal_file.encode([(UID, entries(1, 2))])
    torn = wal_file.encode([(UID, entries(3, 4))])
    with open(path, "wb") as f:
        f.write(wal_file.HEADER + good)
        f.write(torn[:8] + b"\xff" * (len(torn) - 8))  # length intact, payload garbage
        f.write(bytes(4096))  # the reserved rest of the file
    got = wal_file.read(path)
    assert got.batches == [[(UID, entries(1, 2))]]
    assert got.torn and got.valid_bytes == len(wal_file.HEADER) + len(good)


def test_without_pre_allocation_the_file_grows_with_its_records(
    node: Node, tmp_path: Any
) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segments=False, wal_max_size_bytes=1 << 20)
        write(stack.ets, UID, actors.self(), entries(1, 2))
        next_msg()
        (name,) = stack.wal_files()
        size = os.path.getsize(os.path.join(stack.wal_dir, name))
        assert size == len(wal_file.HEADER) + len(wal_file.encode([(UID, entries(1, 2))]))
        stack.stop_all()


@pytest.mark.parametrize("counted", [False, True])
def test_where_the_file_system_cannot_pre_allocate_the_wal_syncs_with_fsync(
    node: Node, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, counted: bool
) -> None:
    def unsupported(fd: int, offset: int, length: int) -> None:
        raise OSError(95, "Operation not supported")

    monkeypatch.setattr(os, "posix_fallocate", unsupported)
    from ra.disk_store import SyncCounter

    counter = SyncCounter(os.fdatasync) if counted else None
    with node.attached():
        wal = ra_wal.Wal(ra_wal.WalConfig(dir=str(tmp_path), wal_pre_allocate=True,
                                          fsync=counter, segment_writer=None))
        wal.recover()
        try:
            assert not wal.pre_allocate
            if counted:
                assert wal.fsync is counter and counter.sync is os.fsync
            else:
                assert wal.fsync is os.fsync
        finally:
            os.close(wal.fd)
