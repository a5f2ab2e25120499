"""Segment files and the segment writer."""

from __future__ import annotations

import itertools
import os
import random
import tracemalloc
from typing import Any

import pytest

import actors
from actors import Node, gen_server
from ra import durable
from ra import segment as ra_segment
from ra import segment_writer as ra_sw
from tests.ra.ra_disk_support import Stack, held, write

UID = "U1"


def entries(first: int, last: int, term: int = 1) -> list[tuple[int, int, Any]]:
    return [(i, term, {"n": i, "body": b"x" * (i % 7)}) for i in range(first, last + 1)]


# --- the file format ----------------------------------------------------------------


def test_a_segment_reads_back_entries_and_terms(tmp_path: Any) -> None:
    es = entries(10, 12, term=2) + entries(13, 20, term=3)
    ref = ra_segment.write(str(tmp_path), 1, es)
    assert ref == ("0000000000000001.segment", (10, 20))
    reader = ra_segment.SegmentReader()
    path = str(tmp_path / ref[0])
    assert reader.read(path, 10, 20) == es
    assert reader.read(path, 14, 15) == es[4:6]
    assert [reader.term(path, i) for i in (10, 12, 13, 20)] == [2, 2, 3, 3]
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


def test_a_segment_holds_only_a_contiguous_run() -> None:
    with pytest.raises(ValueError):
        ra_segment.encode(entries(1, 2) + entries(4, 4))


def test_a_damaged_entry_fails_its_checksum(tmp_path: Any) -> None:
    name, _ = ra_segment.write(str(tmp_path), 1, entries(1, 3))
    path = str(tmp_path / name)
    with open(path, "r+b") as f:
        f.seek(-1, os.SEEK_END)
        last = f.read(1)[0]
        f.seek(-1, os.SEEK_END)
        f.write(bytes([last ^ 0xFF]))
    reader = ra_segment.SegmentReader()
    assert reader.read(path, 1, 2) == entries(1, 2)
    with pytest.raises(ra_segment.SegmentCorrupt):
        reader.read(path, 3, 3)


def test_a_cached_segment_index_costs_about_its_size_on_disk(tmp_path: Any) -> None:
    # a reader keeps up to 16 indexes per server: as packed words, ~24 bytes an entry
    big = [(i, 7, ("cmd", i)) for i in range(100_001, 104_097)]
    name, _ = ra_segment.write(str(tmp_path), 1, big)
    tracemalloc.start()
    try:
        index = ra_segment.read_index(os.path.join(str(tmp_path), name))
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert (index.first, index.last, index.terms[-1]) == (100_001, 104_096, 7)
    assert held < 32 * len(big)


def test_runs_split_at_the_limit_and_at_jumps() -> None:
    es = entries(1, 5) + entries(9, 10)
    assert [[e[0] for e in c] for c in ra_sw.split_runs(es, 2)] == [[1, 2], [3, 4], [5], [9, 10]]


def test_runs_are_the_longest_contiguous_chunks_within_the_limit() -> None:
    rng = random.Random(3)
    for _ in range(200):
        idxs = sorted(rng.sample(range(1, 60), rng.randint(1, 40)))
        es = [(i, 1, ("cmd", i)) for i in idxs]
        limit = rng.randint(1, 8)
        chunks = ra_sw.split_runs(es, limit)
        assert [e for c in chunks for e in c] == es
        for chunk in chunks:
            assert 1 <= len(chunk) <= limit
            assert [e[0] for e in chunk] == list(range(chunk[0][0], chunk[-1][0] + 1))
        for before, after in itertools.pairwise(chunks):
            # a chunk ends early only at a gap
            assert len(before) == limit or after[0][0] != before[-1][0] + 1


# --- the segment writer -----------------------------------------------------------------


def write_and_roll(stack: Stack, uid: str, es: list[Any]) -> None:
    write(stack.ets, uid, actors.self(), es)
    msg = actors.receive(2000)
    assert msg[1][0] == "written"
    stack.rollover()


def segments_event(timeout: int = 2000) -> Any:
    msg = actors.receive(timeout, match=lambda m: m[0] == "ra_log_event" and m[1][0] == "segments")
    assert msg is not actors.TIMEOUT
    return msg[1]


def test_a_flush_writes_segments_of_at_most_max_entries(node: Node, tmp_path: Any) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segment_max_entries=4)
        write_and_roll(stack, UID, entries(1, 10))
        evt = segments_event()
        assert evt == ("segments", [(1, [(1, 10)])], [
            ("0000000000000001.segment", (1, 4)),
            ("0000000000000002.segment", (5, 8)),
            ("0000000000000003.segment", (9, 10)),
        ])
        reader = ra_segment.SegmentReader()
        got = [e for name, (lo, hi) in evt[2]
               for e in reader.read(os.path.join(stack.server_dir(UID), name), lo, hi)]
        assert got == entries(1, 10)
        assert gen_server.call(ra_sw.SEGMENT_WRITER_NAME, ("my_segments", UID)) == evt[2]
        stack.stop_all()


def test_segments_are_fsynced_before_the_server_hears_of_them(node: Node, tmp_path: Any) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segment_max_entries=4)
        write(stack.ets, UID, actors.self(), entries(1, 10))
        actors.receive(2000)
        before = stack.fsync.calls
        stack.rollover()
        segments_event()
        # three segment files, plus the writers snapshot at rollover
        assert stack.fsync.calls - before == 3 + 1
        stack.stop_all()


def test_numbering_continues_after_a_restart(node: Node, tmp_path: Any) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start()
        write_and_roll(stack, UID, entries(1, 2))
        segments_event()
        stack.stop_all()
        stack.start()
        write_and_roll(stack, UID, entries(3, 4))
        assert segments_event()[2] == [("0000000000000002.segment", (3, 4))]
        stack.stop_all()


def test_indexes_below_the_snapshot_are_not_flushed(node: Node, tmp_path: Any) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start()
        write(stack.ets, UID, actors.self(), entries(1, 10))
        actors.receive(2000)
        stack.ets.set_snapshot_index(UID, 6)
        stack.rollover()
        assert segments_event() == ("segments", [(1, [(7, 10)])],
                                    [("0000000000000001.segment", (7, 10))])
        stack.stop_all()


def test_a_successor_table_shadows_the_older_one_from_its_first_index(
    node: Node, tmp_path: Any
) -> None:
    """An overwrite opens a new mem table; the file's hand-off names both, newest first,
    and the segment holds the older table's rows only below the newer one's first."""
    with node.attached():
        stack = Stack(str(tmp_path)).start(segment_max_entries=100)
        old = write(stack.ets, UID, actors.self(), entries(1, 6, term=1))
        new = write(stack.ets, UID, actors.self(), entries(4, 5, term=2), prev_idx=6)
        assert new != old
        actors.receive(2000)
        actors.receive(2000)
        stack.rollover()
        assert segments_event() == ("segments", [(new, [5, 4]), (old, [(1, 6)])],
                                    [("0000000000000001.segment", (1, 5))])
        path = os.path.join(stack.server_dir(UID), "0000000000000001.segment")
        assert ra_segment.SegmentReader().read(path, 1, 5) == \
            entries(1, 3, term=1) + entries(4, 5, term=2)
        stack.stop_all()


def test_a_server_that_is_not_running_still_gets_its_file_flushed(
    node: Node, tmp_path: Any
) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start()
        write(stack.ets, UID, actors.self(), entries(1, 3))
        actors.receive(2000)
        stack.ets.directory.pop(UID)  # its process is gone
        old = stack.wal_files()
        stack.rollover()
        assert os.listdir(stack.server_dir(UID)) == ["0000000000000001.segment"]
        assert held(stack.ets, UID) == []  # the segment writer deleted the rows itself
        assert not set(old) & set(stack.wal_files())
        assert actors.receive(100) is actors.TIMEOUT
        stack.stop_all()


def test_temporary_files_left_by_a_crash_are_removed(node: Node, tmp_path: Any) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start()
        os.makedirs(stack.server_dir(UID))
        stale = os.path.join(stack.server_dir(UID), "0000000000000001.segment.tmp")
        with open(stale, "wb") as f:
            f.write(b"half a segment")
        write_and_roll(stack, UID, entries(1, 2))
        assert os.listdir(stack.server_dir(UID)) == ["0000000000000001.segment"]
        stack.stop_all()


def test_the_segments_of_one_flush_share_one_directory_sync(
    node: Node, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every segment file is synced before its rename; the renames are made durable
    with one sync of the directory, before the server hears of them."""
    dir_syncs: list[str] = []
    real = durable.fsync_dir

    def counting(directory: str) -> None:
        dir_syncs.append(directory)
        real(directory)

    monkeypatch.setattr(durable, "fsync_dir", counting)
    with node.attached():
        stack = Stack(str(tmp_path)).start(segment_max_entries=4)
        write_and_roll(stack, UID, entries(1, 10))
        segments_event()
        dir_syncs.clear()
        stack.rollover()  # nothing new: the current file is empty
        assert dir_syncs == []
        write_and_roll(stack, UID, entries(11, 20))
        evt = segments_event()
        assert len(evt[2]) == 3
        assert dir_syncs.count(stack.server_dir(UID)) == 1
        stack.stop_all()
