"""Mem tables owned by the log, and the WAL write protocol around them.

A server's unflushed entries live once, in its mem tables; an index is never
written twice into one table (an overwrite opens a successor); the WAL checks
each write against the index the writer wrote before it, says which table each
entry went into, and hands a closed file over as the tables it wrote, newest
first, floored at the server's smallest live index."""

from __future__ import annotations

import gc
import os
import types
from typing import Any

import pytest

import actors
from actors import Node, gen_server
from ra import log_ets
from ra import segment as ra_segment
from ra import wal as ra_wal
from ra.disk_log import DiskLog
from ra.disk_store import DiskStore
from ra.log_ets import LogEts, MemTable
from ra.types import DUMMY_ENTRY
from tests.ra.ra_disk_support import (
    Stack,
    drain_events,
    held,
    next_msg,
    pump,
    write,
    written,
)

UID = "U1"


def es(first: int, last: int, term: int = 1) -> list[tuple[int, int, Any]]:
    return [(i, term, ("cmd", i, term)) for i in range(first, last + 1)]


def start_wal_handing_to_me(stack: Stack) -> None:
    """A WAL whose closed files come to the test process as ``mem_tables`` messages."""
    cfg = ra_wal.WalConfig(dir=stack.wal_dir, log_ets=stack.ets, fsync=stack.fsync, seed=1,
                           segment_writer=actors.self())
    result = ra_wal.start_link(cfg)
    assert result[0] == "ok", result
    stack.wal_pid = result[1]


def open_log(stack: Stack) -> DiskLog:
    return DiskLog.open(stack.server_dir(UID), UID, stack.ets)


# --- the mem table ----------------------------------------------------------------------


def test_an_index_is_never_written_twice_into_one_table() -> None:
    table = MemTable(1, UID)
    assert all(table.insert(e) for e in es(1, 5))
    assert not table.insert(es(3, 3, term=2)[0])  # ``{error, overwriting}``
    assert table.get(3) == es(3, 3)[0]


def test_a_successor_shadows_its_predecessor_from_its_first_index() -> None:
    ets = LogEts()
    old = ets.mem_table_please(UID)
    for e in es(1, 6):
        old.insert(e)
    new = ets.new_mem_table_please(UID)
    for e in es(4, 5, term=2):
        new.insert(e)
    assert new.prev is old and ets.mem_table_please(UID) is new
    assert [new.lookup(i) for i in range(1, 6)] == es(1, 3) + es(4, 5, term=2)
    assert new.lookup(6) is None  # the old 6 is not the log's: shadowed, not read


def test_flushed_rows_leave_the_table_and_emptied_predecessors_are_deleted() -> None:
    ets = LogEts()
    old = ets.mem_table_please(UID)
    for e in es(1, 6):
        old.insert(e)
    new = ets.new_mem_table_please(UID)
    for e in es(4, 8, term=2):
        new.insert(e)
    ets.record_flushed(UID, old.tid, [(1, 6)])
    assert new.prev is None and ets.table(old.tid) is None
    assert held(ets, UID) == es(4, 8, term=2)
    ets.record_flushed(UID, new.tid, [(4, 6)])
    assert held(ets, UID) == es(7, 8, term=2) and len(new) == 2


# --- the WAL's sequence checks -----------------------------------------------------------


def test_a_gap_is_detected_against_the_previous_index_the_write_names(
    node: Node, tmp_path: Any
) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segments=False)
        me = actors.self()
        write(stack.ets, UID, me, es(1, 3))
        assert next_msg() == written(1, [(1, 3)])
        # the next index, but the writer says it wrote 5 before it: 4 and 5 went missing
        write(stack.ets, UID, me, es(4, 4), prev_idx=5)
        assert next_msg() == ("ra_log_event", ("resend_write", 4))
        write(stack.ets, UID, me, es(4, 6), prev_idx=3)
        assert next_msg() == written(1, [(4, 6)])
        stack.stop_all()


def test_a_sparse_write_is_accepted_when_its_previous_index_was_written(
    node: Node, tmp_path: Any
) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segments=False)
        me = actors.self()
        write(stack.ets, UID, me, es(1, 3))
        next_msg()
        # 4..9 are skipped on purpose (a live index kept below a snapshot): not a gap
        write(stack.ets, UID, me, es(10, 11), prev_idx=3)
        assert next_msg() == written(1, [11, 10])
        assert gen_server.call(ra_wal.WAL_NAME, ("last_writer_seq", UID)) == 11
        assert [e[0] for e in held(stack.ets, UID)] == [1, 2, 3, 10, 11]
        stack.stop_all()


def test_written_events_go_out_per_table_and_term_older_first(node: Node, tmp_path: Any) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segments=False)
        me = actors.self()
        # sent without yielding: the WAL takes all three in one batch
        write(stack.ets, UID, me, es(1, 4, term=1))
        write(stack.ets, UID, me, es(3, 3, term=1), prev_idx=4)  # a new table, same term
        write(stack.ets, UID, me, es(4, 4, term=2), prev_idx=3)
        assert [next_msg() for _ in range(3)] == [
            written(1, [(1, 4)]), written(1, [3]), written(2, [4])]
        stack.stop_all()


# --- hand-off of a closed file ----------------------------------------------------------


def test_an_overwrite_is_handed_over_as_two_tables_newest_first(
    node: Node, tmp_path: Any
) -> None:
    with node.attached():
        stack = Stack(str(tmp_path))
        start_wal_handing_to_me(stack)
        me = actors.self()
        old = write(stack.ets, UID, me, es(1, 6))
        new = write(stack.ets, UID, me, es(4, 5, term=2), prev_idx=6)
        next_msg()
        next_msg()
        assert gen_server.call(ra_wal.WAL_NAME, "rollover") == "ok"
        msg = next_msg()
        assert msg[:2] == ("mem_tables", {UID: [(new, [5, 4]), (old, [(1, 6)])]})
        stack.stop_all()


def test_a_hand_off_is_floored_at_the_smallest_live_index(node: Node, tmp_path: Any) -> None:
    with node.attached():
        stack = Stack(str(tmp_path))
        start_wal_handing_to_me(stack)
        tid = write(stack.ets, UID, actors.self(), es(1, 10))
        next_msg()
        stack.ets.set_snapshot_index(UID, 6)  # a snapshot at 6 since the write
        assert gen_server.call(ra_wal.WAL_NAME, "rollover") == "ok"
        assert next_msg()[:2] == ("mem_tables", {UID: [(tid, [(7, 10)])]})
        stack.stop_all()


def test_recovery_opens_a_successor_table_at_each_overwrite(node: Node, tmp_path: Any) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segments=False)
        me = actors.self()
        write(stack.ets, UID, me, es(1, 6))
        write(stack.ets, UID, me, es(4, 5, term=2), prev_idx=6)
        next_msg()
        next_msg()
        stack.stop_all()
        stack.ets = LogEts()  # a node restart: the tables are gone
        start_wal_handing_to_me(stack)
        new, old = stack.ets.mem_table_please(UID).chain()
        assert [(new.start, new.last), (old.start, old.last)] == [(4, 5), (1, 6)]
        assert held(stack.ets, UID) == es(1, 3) + es(4, 5, term=2)
        assert next_msg()[:2] == ("mem_tables", {UID: [(new.tid, [5, 4]),
                                                       (old.tid, [(1, 6)])]})
        stack.stop_all()


def test_a_restarted_wal_leaves_the_servers_tables_and_finds_its_ranges_in_them(
    node: Node, tmp_path: Any
) -> None:
    with node.attached():
        stack = Stack(str(tmp_path))
        start_wal_handing_to_me(stack)
        tid = write(stack.ets, UID, actors.self(), es(1, 4))
        next_msg()
        table = stack.ets.table(tid)
        stack.kill_wal()
        start_wal_handing_to_me(stack)
        assert table is not None and stack.ets.table(tid) is table and len(table) == 4
        assert next_msg()[:2] == ("mem_tables", {UID: [(tid, [(1, 4)])]})
        stack.stop_all()


def test_a_writer_s_last_index_outlives_the_flush_of_the_files_that_held_it(
    node: Node, tmp_path: Any
) -> None:
    """The recovered files are flushed and deleted: a second restart must still know
    what the writer wrote last (Ra persists its writers when it opens a file)."""
    with node.attached():
        stack = Stack(str(tmp_path)).start()
        write(stack.ets, UID, actors.self(), es(1, 3))
        next_msg()
        for _ in range(2):
            stack.stop_all()
            stack.ets = LogEts()
            stack.start()
            stack.sync()
        assert gen_server.call(ra_wal.WAL_NAME, ("last_writer_seq", UID)) == 3
        stack.stop_all()


# --- the log owns its tables ---------------------------------------------------------------


def test_the_mem_table_is_the_only_holder_of_an_unflushed_entry(
    node: Node, tmp_path: Any
) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start()
        log = open_log(stack)
        log.write(es(1, 10))
        pump(log, UID, lambda: log.last_written() == (10, 1))
        (table,) = log.mem_tables()
        entry = log.fetch(5)
        holders = [r for r in gc.get_referrers(entry) if not isinstance(r, types.FrameType)]
        assert len(holders) == 1 and holders[0] is table._slots
        stack.stop_all()


def test_an_overwrite_opens_a_successor_and_a_flush_releases_the_rows(
    node: Node, tmp_path: Any
) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segment_max_entries=4)
        log = open_log(stack)
        log.write(es(1, 6))
        pump(log, UID, lambda: log.last_written() == (6, 1))
        log.write(es(4, 5, term=2))
        pump(log, UID, lambda: log.last_written() == (5, 2))
        assert [(t.start, t.last) for t in log.mem_tables()] == [(4, 5), (1, 6)]
        assert log.fold(0, 10) == [DUMMY_ENTRY, *es(1, 3), *es(4, 5, term=2)]
        stack.rollover()
        drain_events(log, UID)
        (table,) = log.mem_tables()
        assert len(table) == 0 and log.mem_size() == 1  # the dummy only
        assert log.fold(0, 10) == [DUMMY_ENTRY, *es(1, 3), *es(4, 5, term=2)]
        assert open_log(stack).fold(0, 10) == log.fold(0, 10)
        stack.stop_all()


def test_a_snapshot_deletes_the_rows_it_covers(node: Node, tmp_path: Any) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start()
        log = open_log(stack)
        log.write(es(1, 10))
        pump(log, UID, lambda: log.last_written() == (10, 1))
        meta = {"index": 7, "term": 1, "cluster": {}, "machine_version": 0}
        log.install_snapshot(meta, "state")
        log.write(es(8, 9, term=2))
        assert held(stack.ets, UID) == es(8, 9, term=2)
        assert os.path.isdir(stack.server_dir(UID))
        stack.stop_all()


def test_deleting_a_server_deletes_every_table_of_it(tmp_path: Any) -> None:
    store = DiskStore(str(tmp_path))
    ets = store.log_ets
    old = ets.mem_table_please(UID)
    old.insert(es(1, 1)[0])
    new = ets.new_mem_table_please(UID)
    store.forget(UID)
    assert ets.table(old.tid) is None and ets.table(new.tid) is None
    assert UID not in ets.mem_tables


def test_a_full_table_is_succeeded_by_a_new_one(
    node: Node, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the row limit a table takes no more (``limit_reached``): the write goes on
    in a successor, one WAL write per table."""
    monkeypatch.setattr(log_ets, "MAX_MEM_TABLE_ENTRIES", 3)
    with node.attached():
        stack = Stack(str(tmp_path)).start()
        log = open_log(stack)
        log.write(es(1, 6))
        writes = log.take_wal_appends()
        tables = log.mem_tables()
        assert [(t.start, t.last) for t in tables] == [(5, 6), (1, 4)]
        assert [(tid, prev, [e[0] for e in batch]) for tid, prev, batch in writes] == [
            (tables[1].tid, 0, [1, 2, 3, 4]), (tables[0].tid, 4, [5, 6])]
        assert log.fold(1, 6) == es(1, 6)
        stack.stop_all()


def test_a_segment_that_overtakes_the_written_event_confirms_what_it_holds(
    tmp_path: Any
) -> None:
    d = str(tmp_path / UID)
    log = DiskLog.open(d, UID, LogEts())
    log.write(es(1, 4))
    (tid, _prev, _batch), = log.take_wal_appends()
    assert log.last_written() == (0, 0) and log.pending() == [(1, 4)]
    ref = ra_segment.write(d, 1, es(1, 4))  # flushed before the WAL's event came
    log.handle_event(("segments", [(tid, [(1, 4)])], [ref]))
    assert log.last_written() == (4, 1) and log.pending() == []
    log.handle_event(("written", 1, [(1, 4)]))  # late, and harmless
    assert log.last_written() == (4, 1) and log.pending() == []


def test_a_segment_of_overwritten_entries_confirms_nothing(tmp_path: Any) -> None:
    d = str(tmp_path / UID)
    log = DiskLog.open(d, UID, LogEts())
    log.write(es(1, 4, term=2))
    log.take_wal_appends()
    ref = ra_segment.write(d, 1, es(1, 4, term=1))  # the older term's flush
    log.handle_event(("segments", [], [ref]))
    assert log.last_written() == (0, 0)
