"""The WAL, the in-memory WAL and the segment writer as gen_batch_servers: they
take Ra's casts, stop through their terminate, batch a whole mailbox from the
first batch on, and close their file when killed."""

from __future__ import annotations

import os
from typing import Any

import actors
from actors import Node, gen_batch_server
from ra import segment_writer as ra_sw
from ra import seq as ra_seq
from ra import wal as ra_wal
from ra import wal_file, wal_memory
from ra.memory_disk import MemoryDisk
from tests.ra.ra_disk_support import Stack, entries, next_msg, relay, write

UID = "U1"


def open_files_under(directory: str) -> list[str]:
    """What this OS process holds open below `directory`."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(directory + os.sep):
            out.append(target)
    return out


def test_the_wal_rolls_over_on_a_cast_as_ra_sends_it(node: Node, tmp_path: Any) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segments=False)
        write(stack.ets, UID, actors.self(), entries(1, 3))
        assert next_msg()[1][0] == "written"
        gen_batch_server.cast(ra_wal.WAL_NAME, "rollover")
        stack.sync()
        assert stack.wal_files() == [wal_file.file_name(1), wal_file.file_name(2)]
        stack.stop_all()


def test_the_segment_writer_flushes_mem_tables_sent_as_a_cast(
    node: Node, tmp_path: Any
) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segments=False)
        write(stack.ets, UID, actors.self(), entries(1, 3))
        assert next_msg()[1][0] == "written"
        stack.rollover()  # no segment writer was named: the closed file is kept
        ok, stack.sw_pid = ra_sw.start_link(ra_sw.SegmentWriterConfig(
            data_dir=stack.root, log_ets=stack.ets, fsync=stack.fsync, name=None))
        assert ok == "ok"
        closed = os.path.join(stack.wal_dir, wal_file.file_name(1))
        ranges = {UID: [(1, ra_seq.from_list([1, 2, 3]))]}
        gen_batch_server.cast(stack.sw_pid, ("mem_tables", ranges, closed))
        assert gen_batch_server.call(stack.sw_pid, "await") == "ok"
        assert next_msg()[1][0] == "segments"
        assert not os.path.exists(closed)
        assert [r[1] for r in gen_batch_server.call(stack.sw_pid, ("my_segments", UID))] == \
            [(1, 3)]
        stack.stop_all()


def test_the_memory_wal_stops_when_asked(node: Node) -> None:
    with node.attached():
        ok, pid = wal_memory.start_link(MemoryDisk(), name="mem_wal")
        assert ok == "ok"
        actors.unlink(pid)
        assert gen_batch_server.stop(pid, "normal", 2000) == "ok"
        assert actors.whereis("mem_wal") is None


def test_the_memory_wal_answers_in_the_batch_that_wrote(node: Node) -> None:
    with node.attached():
        ok, pid = wal_memory.start_link(MemoryDisk(), name="mem_wal")
        assert ok == "ok"
        actors.send(pid, ("append", UID, actors.self(), None, 0, entries(1, 4)))
        assert gen_batch_server.call(pid, ("last_writer_seq", UID)) == 4
        assert next_msg() == ("ra_log_event", ("written", 1, [(1, 4)]))
        actors.unlink(pid)
        actors.exit(pid, "kill")


def test_a_mailbox_larger_than_upstream_s_first_batch_is_still_one_fsync(
    node: Node, tmp_path: Any
) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segments=False)
        me = actors.self()
        pids = [actors.spawn_link(relay, me, n) for n in range(100)]
        before = stack.fsync.calls
        for n, pid in enumerate(pids):
            write(stack.ets, f"uid{n}", pid, entries(1, 1))
        assert len([next_msg() for _ in pids]) == 100
        assert stack.fsync.calls - before == 1
        stack.stop_all()


def test_a_stopped_or_killed_wal_leaves_no_file_open(node: Node, tmp_path: Any) -> None:
    with node.attached():
        stack = Stack(str(tmp_path)).start(segments=False)
        assert len(open_files_under(stack.wal_dir)) == 1
        assert gen_batch_server.stop(stack.wal_pid) == "ok"
        assert open_files_under(stack.wal_dir) == []
        stack.start(segments=False)
        stack.kill_wal()
        # the killed process unwinds on the hub: give it its turns
        for _ in range(100):
            if not open_files_under(stack.wal_dir):
                break
            actors.sleep(10)
        assert open_files_under(stack.wal_dir) == []
