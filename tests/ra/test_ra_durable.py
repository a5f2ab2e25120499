"""Durable Ra across real node processes: what a SIGKILLed node brings back.

Each node keeps its WAL, segments, snapshots and meta in its own data dir
(`ra.system.disk_system_config`). A node process is killed with SIGKILL and
started again on the same name and data dir; ``restart_server`` recovers its
member from those files alone, and the cluster brings it up to date.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ra import api
from ra.snapshot_store import SNAPSHOTS
from tests.ra.ra_multiproc_support import (
    LedgerMachine,
    ProcCluster,
    Publisher,
    RaNode,
    ServerId,
    caught_up,
    check_ledger,
    leader_of,
    ledger,
    overview,
    proc_cluster,
    server_ids,
    start_cluster,
    wait_until,
)


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[ProcCluster]:
    with proc_cluster(tmp_path) as cluster:
        yield cluster


def _files(node: RaNode, uid: str) -> dict[str, list[str]]:
    """What the node's data dir holds for one server, by kind."""
    server_dir = os.path.join(node.data_dir, uid)
    snap_dir = os.path.join(server_dir, SNAPSHOTS)
    return {
        "wal": [n for n in os.listdir(os.path.join(node.data_dir, "wal")) if n.endswith(".wal")],
        "segments": [n for n in os.listdir(server_dir) if n.endswith(".segment")],
        "snapshots": os.listdir(snap_dir) if os.path.isdir(snap_dir) else [],
    }


def _publish(pub: Publisher, seqs: range) -> None:
    for seq in seqs:
        pub.send(seq)
    pub.drain()


def _restart(procs: ProcCluster, sid: ServerId) -> None:
    procs.boot(procs.node_of(sid))
    assert api.restart_server("default", sid) == "ok"


def test_a_killed_leader_recovers_from_wal_segments_and_snapshot_and_catches_up(
        procs: ProcCluster) -> None:
    ids = server_ids(procs)
    # snapshots at 300 and 600; the WAL rolls over every ~80 commands
    start_cluster(ids, LedgerMachine(snapshot_every=300))
    leader = leader_of(ids)
    pub = Publisher(ids, leader)
    for start in range(0, 800, 100):
        _publish(pub, range(start, start + 100))
    uid = overview(leader)["uid"]
    # the segment writer flushes a rolled-over WAL file in the background: wait
    # until the leader's entries sit in all three kinds of file before the kill
    wait_until(lambda: all(_files(procs.node_of(leader), uid).values()),
               what="WAL, segments and a snapshot on the leader's disk")
    before = overview(leader)
    procs.kill(procs.node_of(leader))
    on_disk = _files(procs.node_of(leader), uid)
    assert on_disk["wal"] and on_disk["segments"] and on_disk["snapshots"], on_disk

    # the survivors go on without it
    pub.servers = [sid for sid in ids if sid != leader]
    _publish(pub, range(800, 1000))
    _restart(procs, leader)
    recovered = overview(leader)
    # what was durable before the kill is back, whatever the new leader has sent since
    assert recovered["snapshot_index"] >= before["snapshot_index"] > 0
    assert recovered["last_index"] >= before["last_written_index"]
    assert recovered["current_term"] >= before["current_term"]

    wait_until(lambda: caught_up(ids), what="the restarted member to catch up")
    states = [ledger(sid)[1] for sid in ids]
    assert states[0] == states[1] == states[2]
    check_ledger(states[0], pub)
    assert sorted(pub.applied) == list(range(1000))


def _truncated_at(sids: list[ServerId]) -> int:
    """The lowest snapshot index among `sids` (0 without a snapshot)."""
    return min(overview(sid)["snapshot_index"] or 0 for sid in sids)


def test_a_follower_that_missed_the_truncated_log_gets_a_snapshot(procs: ProcCluster) -> None:
    ids = server_ids(procs)
    start_cluster(ids, LedgerMachine(snapshot_every=50))
    leader = leader_of(ids)
    follower = next(sid for sid in ids if sid != leader)
    pub = Publisher(ids, leader)
    _publish(pub, range(100))
    gone_at = overview(follower)["last_index"]
    procs.kill(procs.node_of(follower))

    pub.servers = [sid for sid in ids if sid != follower]
    seq = 100
    # commit until both survivors' snapshots cover more than the follower ever had
    while _truncated_at(pub.servers) <= gone_at:
        _publish(pub, range(seq, seq + 50))
        seq += 50
    truncated_at = _truncated_at(pub.servers)

    _restart(procs, follower)
    wait_until(lambda: caught_up(ids), what="the follower to catch up")
    # entries up to the survivors' snapshots exist nowhere: only a snapshot brings them
    assert truncated_at > gone_at
    assert overview(follower)["last_applied"] > truncated_at
    # the follower was sent the survivors' snapshot: its own snapshot is at least that one
    assert overview(follower)["snapshot_index"] >= truncated_at
    states = [ledger(sid)[1] for sid in ids]
    assert states[0] == states[1] == states[2]
    check_ledger(states[0], pub)


def test_every_confirmed_command_survives_killing_every_node(procs: ProcCluster) -> None:
    ids = server_ids(procs)
    start_cluster(ids, LedgerMachine(snapshot_every=100))
    pub = Publisher(ids, leader_of(ids))
    for seq in range(500):
        pub.send(seq)
    while len(pub.applied) < 100:
        pub.receive_some()
    for node in procs.nodes:
        procs.kill(node)
    confirmed = dict(pub.applied)

    for sid in ids:
        _restart(procs, sid)
    leader_of(ids)
    wait_until(lambda: caught_up(ids), what="the members to agree after the restart")
    states = [ledger(sid)[1] for sid in ids]
    assert states[0] == states[1] == states[2]
    pub.applied = confirmed
    check_ledger(states[0], pub)
    # a confirmed command keeps the log index it was confirmed at
    at = {seq: idx for idx, seq in states[0]}
    assert all(reply == ("put", at[seq]) for seq, reply in confirmed.items())
