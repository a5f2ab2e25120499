"""A snapshot with live indexes reaches a lagging member whole: the leader sends
``init``, then the live entries the member lacks in ``pre`` chunks, then the
snapshot. The member can read every live entry afterwards, also once it leads
and sends its own snapshot on, and after a restart.

Three durable members (one disk data dir per node) on the in-memory network;
the machine keeps each key's raft index and never its value, which it reads
back from the log, as rabbit_fifo keeps message bodies."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ra import api, segment
from ra import aux as ra_aux
from ra import system as ra_system
from ra.machine import Machine
from tests.ra.ra_proc_support import Cluster, make_cluster, overview, wait_until

SYSTEM = "disk"
SERVER_CONFIG = {"tick_timeout": 100, "log_init_args": {"min_snapshot_interval": 4}}
#: what stays live: two keys the lagging member applied, three it never saw
KEPT = ["k1", "k3", "k12", "k21", "k30"]


class KeepMachine(Machine):
    """``{key: raft index}``; the value of a key is the log entry at its index.

    Its live indexes are the indexes of the keys it holds; it releases the log
    every fifth index."""

    def init(self, config: dict[str, Any]) -> Any:
        return {}

    def apply(self, meta: dict[str, Any], command: Any, state: Any) -> tuple[Any, ...]:
        idx = meta["index"]
        match command:
            case ("put", key, _value):
                state = {**state, key: idx}
            case ("del", key):
                state = {k: v for k, v in state.items() if k != key}
        return (state, "ok", [("release_cursor", idx, state)] if idx % 5 == 0 else [])

    def live_indexes(self, state: Any) -> list[int]:
        return sorted(state.values())

    def init_aux(self, name: str) -> Any:
        return None

    def handle_aux(self, ra_state: str, kind: Any, cmd: Any, aux: Any,
                   int_state: Any) -> tuple[Any, ...]:
        if isinstance(cmd, tuple) and cmd[0] == "get":
            idx = ra_aux.machine_state(int_state).get(cmd[1])
            found = None if idx is None else ra_aux.log_fetch(idx, int_state)
            return ("reply", None if found is None else found[2], aux, int_state)
        return ("no_reply", aux, int_state)


@pytest.fixture
def disk_cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = make_cluster()
    try:
        for n in c.nodes:
            with n.attached():
                config = ra_system.disk_system_config(
                    str(tmp_path / n.name.split("@")[0]), name=SYSTEM,
                    wal_max_entries=16, segment_max_entries=8)
                assert ra_system.start(config)[0] == "ok"
        yield c
    finally:
        for n in c.nodes:
            n.stop()


def _put(ids: list[Any], *cmd: Any) -> None:
    result = api.process_command(ids, cmd, 5000)
    assert result[0] == "ok", result


def _get(sid: Any, key: str) -> Any:
    return api.aux_command(sid, ("get", key), 5000)


def _values(sid: Any) -> dict[str, Any]:
    return {key: _get(sid, key) for key in KEPT}


def _caught_up(sid: Any, leader: Any) -> bool:
    return bool(overview(sid)["last_applied"] >= overview(leader)["commit_index"])


def test_a_lagging_member_gets_the_live_entries_it_lacks_and_serves_them_as_leader(
        disk_cluster: Cluster, tmp_path: Path) -> None:
    c = disk_cluster
    s1, s2, s3 = c.ids
    expected = {key: f"value of {key}" for key in KEPT}
    with c.nodes[0].attached():
        assert api.start_cluster(SYSTEM, "kv", KeepMachine(), c.ids, 5000,
                                 SERVER_CONFIG)[0] == "ok"
        for n in range(5):
            _put(c.ids, "put", f"k{n}", f"value of k{n}")
        wait_until(lambda: overview(s3)["last_applied"] >= 6, what="s3 to apply k0..k4")
        assert api.stop_server(SYSTEM, s3) == "ok"
        live = [s1, s2]
        for n in range(5, 40):
            _put(live, "put", f"k{n}", f"value of k{n}")
        for n in range(40):
            if f"k{n}" not in KEPT:
                _put(live, "del", f"k{n}")
        leader = api.members(live, 2000)[2]
        snap = overview(leader)["snapshot_index"]
        assert snap is not None and snap > 40  # every kept key's entry is below it
        assert _values(leader) == expected

        # s3 lagged behind the snapshot: it gets init, pre chunks, then the snapshot
        assert api.restart_server(SYSTEM, s3) == "ok"
        wait_until(lambda: _caught_up(s3, leader), what="s3 to install the snapshot")
        assert overview(s3)["snapshot_index"] is not None
        assert _values(s3) == expected

        # s3 leads, snapshots on, and streams its own snapshot to a member it left behind
        assert api.transfer_leadership(leader, s3) == "ok"
        wait_until(lambda: api.members(c.ids, 2000)[2] == s3, what="s3 to lead")
        other = s1 if leader == s2 else s2
        left_behind = overview(leader)["last_index"]
        assert api.stop_server(SYSTEM, leader) == "ok"
        for n in range(40, 60):
            _put([s3, other], "put", f"k{n}", "later")
            _put([s3, other], "del", f"k{n}")
        assert overview(s3)["snapshot_index"] > left_behind
        assert _values(s3) == expected
        assert api.restart_server(SYSTEM, leader) == "ok"
        wait_until(lambda: _caught_up(leader, s3), what="the old leader to catch up")
        assert overview(leader)["snapshot_index"] > left_behind  # s3's snapshot
        assert _values(leader) == expected

        # and a restart of s3 recovers the live entries from its own disk
        assert api.stop_server(SYSTEM, s3) == "ok"
        assert api.restart_server(SYSTEM, s3) == "ok"
        wait_until(lambda: _caught_up(s3, api.members(c.ids, 2000)[2]),
                   what="s3 to recover")
        assert _values(s3) == expected

        # a major compaction on request leaves only live entries below the snapshot
        s3_dir = tmp_path / c.node_of(s3).name.split("@")[0] / overview(s3)["uid"]
        assert api.trigger_compaction(s3) == "ok"
        wait_until(lambda: any(segment.read_index(str(p)).idxs is not None
                               for p in s3_dir.glob("*.segment")),
                   what="a sparse segment")
        assert _values(s3) == expected
