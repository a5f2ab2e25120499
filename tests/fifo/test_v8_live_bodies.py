"""A machine-8 queue on durable Ra members snapshots over the messages it holds:
their bodies stay in the log at the snapshot's live indexes and are read from
there, also after the member restarts, and a member that was down while the
others snapshotted gets them with the snapshot."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors import Node
from fifo.commands import make_enqueue
from fifo.ra_glue import start_queue
from ra import api
from ra import system as ra_system
from tests.fifo.helpers import QNAME
from tests.ra.ra_proc_support import TICK, Cluster, make_cluster, overview, wait_until
from transports.faults import FaultRules
from transports.memory import MemoryNetwork

SYSTEM = "disk"
MESSAGES = 30


@pytest.fixture
def one_node(tmp_path: Path) -> Iterator[Node]:
    """One node on an in-memory network running a durable Ra system."""
    network = MemoryNetwork(TICK, FaultRules(seed=1))
    node = Node("fifo_disk@127.0.0.1:1", transport=network.transport()).start()
    try:
        with node.attached():
            assert ra_system.start(ra_system.disk_system_config(
                str(tmp_path), name=SYSTEM, wal_max_entries=16, segment_max_entries=8))[0] == "ok"
        yield node
    finally:
        node.stop()


@pytest.fixture
def three_nodes(tmp_path: Path) -> Iterator[Cluster]:
    """Three nodes on an in-memory network, each running a durable Ra system."""
    c = make_cluster()
    try:
        for n in c.nodes:
            with n.attached():
                assert ra_system.start(ra_system.disk_system_config(
                    str(tmp_path / n.name.split("@")[0]), name=SYSTEM, wal_max_entries=16,
                    segment_max_entries=8))[0] == "ok"
        yield c
    finally:
        for n in c.nodes:
            n.stop()


def _peek(sid: Any, pos: int) -> Any:
    result = api.aux_command(sid, ("peek", pos), 5000)
    assert result[0] == "ok", result
    return result[1][1]


def test_bodies_below_a_v8_snapshot_are_read_from_its_live_entries(one_node: Node) -> None:
    node = one_node
    with node.attached():
        result = start_queue(SYSTEM, "q1", QNAME, [node.name], {}, machine_version=8,
                             server_config={"tick_timeout": 100,
                                            "log_init_args": {"min_snapshot_interval": 4}})
        assert result[0] == "ok", result
        (sid,) = result[1]
        for i in range(MESSAGES):
            assert api.process_command(sid, make_enqueue(None, None, f"m{i}".encode()),
                                       5000)[0] == "ok"
        last = overview(sid)["last_applied"]
        # a purge would force one too; this forces it over the queued messages
        api.cast_aux_command(sid, "force_checkpoint")
        wait_until(lambda: (overview(sid)["snapshot_index"] or 0) >= last,
                   what="a snapshot over every message")
        assert [_peek(sid, p) for p in range(1, MESSAGES + 1)] == [
            f"m{i}".encode() for i in range(MESSAGES)]
        assert api.stop_server(SYSTEM, sid) == "ok"
        assert api.restart_server(SYSTEM, sid) == "ok"
        wait_until(lambda: overview(sid)["last_applied"] >= last, what="the member to recover")
        assert [_peek(sid, p) for p in range(1, MESSAGES + 1)] == [
            f"m{i}".encode() for i in range(MESSAGES)]


def test_a_member_down_during_a_v8_snapshot_gets_the_bodies_with_it(
        three_nodes: Cluster) -> None:
    nodes = three_nodes.nodes
    with nodes[0].attached():
        result = start_queue(SYSTEM, "q1", QNAME, [n.name for n in nodes], {},
                             machine_version=8,
                             server_config={"tick_timeout": 100,
                                            "log_init_args": {"min_snapshot_interval": 4}})
        assert result[0] == "ok", result
        ids = result[1]
        for i in range(MESSAGES):
            assert api.process_command(ids, make_enqueue(None, None, f"m{i}".encode()),
                                       5000)[0] == "ok"
        late = ids[2]
        wait_until(lambda: overview(late)["last_applied"] >= MESSAGES, what="all to apply")
        assert api.stop_server(SYSTEM, late) == "ok"
        up = ids[:2]
        for i in range(MESSAGES, 2 * MESSAGES):
            assert api.process_command(up, make_enqueue(None, None, f"m{i}".encode()),
                                       5000)[0] == "ok"
        last = overview(ids[0])["last_applied"]
        for sid in up:
            api.cast_aux_command(sid, "force_checkpoint")
        wait_until(lambda: all((overview(sid)["snapshot_index"] or 0) >= last for sid in up),
                   what="both members to snapshot over every message")
        assert api.restart_server(SYSTEM, late) == "ok"
        wait_until(lambda: overview(late)["last_applied"] >= last, what="the late member")
        assert (overview(late)["snapshot_index"] or 0) >= last  # it installed the snapshot
        assert [_peek(late, p) for p in range(1, 2 * MESSAGES + 1)] == [
            f"m{i}".encode() for i in range(2 * MESSAGES)]
