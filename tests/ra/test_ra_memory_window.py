"""A durable member's backlog is on disk, not in memory: with ``wal_max_entries`` the
node's WAL rolls over by entries, the segment writer flushes each file, and the
node's memtables keep only the entries of the current file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from actors import Node
from ra import api, segment
from ra import system as ra_system
from ra.directory import lookup
from ra.machine import Machine
from tests.ra.ra_proc_support import wait_until

WINDOW = 50
COMMANDS = 600


class Counter(Machine):
    def init(self, config: dict[str, Any]) -> Any:
        return 0

    def apply(self, meta: dict[str, Any], command: Any, state: Any) -> tuple[Any, ...]:
        return (state + 1, state + 1)


def test_a_long_backlog_leaves_only_the_current_wal_files_entries_in_memory(
        node: Node, tmp_path: Path) -> None:
    with node.attached():
        config = ra_system.disk_system_config(str(tmp_path), wal_max_entries=WINDOW)
        assert ra_system.start(config)[0] == "ok"
        sid = ("q", node.name)
        assert api.start_cluster("default", "q", Counter(), [sid], 5000)[0] == "ok"
        for n in range(COMMANDS):
            assert api.process_command(sid, ("add", n), 5000)[0] == "ok"
        uid = api.member_overview(sid)["uid"]
        handle = lookup(node, "default")
        assert handle is not None
        ets = handle.disk.log_ets
        # one command at a time: each WAL file holds WINDOW entries, then is flushed
        wait_until(lambda: ets.mem_table(uid).chain_size() <= WINDOW,
                   what="the flushed files to leave memory")
        on_disk = segment.list_segments(os.path.join(str(tmp_path), uid))
        assert len(on_disk) >= COMMANDS // WINDOW - 1
        assert api.local_query(sid, lambda state: state, 5000)[1][1] == COMMANDS
