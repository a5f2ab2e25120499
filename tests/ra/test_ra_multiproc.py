"""Ra across real node processes: failover, membership and the ``local`` rule.

Three Ra nodes run as OS processes on loopback, each durable in its own data
dir; this test process is the client node. Nodes die by SIGKILL, so nothing
but what is on disk survives them.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import cloudpickle
import pytest

import actors
from ra import api
from tests.ra.ra_multiproc_support import (
    LedgerMachine,
    ProcCluster,
    Publisher,
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

# Closures defined here run on the node processes, which cannot import this module.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[ProcCluster]:
    with proc_cluster(tmp_path) as cluster:
        yield cluster


def test_killing_the_leaders_node_loses_no_confirmed_command(procs: ProcCluster) -> None:
    ids = server_ids(procs)
    start_cluster(ids, LedgerMachine(snapshot_every=100))
    leader = leader_of(ids)
    pub = Publisher(ids, leader)
    for seq in range(500):
        pub.send(seq)
    while not pub.applied:
        pub.receive_some()
    # the leader's node dies with the second half of the pipeline in flight
    for seq in range(500, 1000):
        pub.send(seq)
    procs.kill(procs.node_of(leader))

    survivors = [sid for sid in ids if sid != leader]
    pub.servers = survivors
    pub.drain()
    assert sorted(pub.applied) == list(range(1000))
    assert leader_of(survivors) in survivors
    wait_until(lambda: caught_up(survivors), what="the survivors to apply the same index")
    (_, state_a), (_, state_b) = (ledger(sid) for sid in survivors)
    assert state_a == state_b
    check_ledger(state_a, pub)


def test_members_are_added_and_removed_under_load(procs: ProcCluster) -> None:
    ids = server_ids(procs)
    s1, s2, s3 = ids
    start_cluster(ids, LedgerMachine(snapshot_every=100))
    pub = Publisher(ids, leader_of(ids))
    r4 = procs.add_node()
    s4 = ("s4", r4.name)
    for seq in range(300):
        pub.send(seq)

    # a fourth member joins while commands are in flight
    config = {"id": s4, "uid": api.new_uid("ledger"), "cluster_name": "ledger",
              "initial_members": ids, "machine": LedgerMachine(snapshot_every=100),
              "tick_timeout": 100, "broadcast_time": 30}
    assert api.start_server("default", config) == "ok"
    assert api.add_member(ids, s4, 5000)[0] == "ok"
    for seq in range(300, 600):
        pub.send(seq)

    # the leader leaves while commands are in flight
    leader = leader_of(ids)
    # one membership change at a time: it is permitted once the join is committed
    removed = wait_until(lambda: _changed(api.remove_member(ids, leader, 5000)),
                         what="the removal to be permitted")
    assert removed[0] == "ok", removed
    remaining = [sid for sid in (s1, s2, s3, s4) if sid != leader]
    pub.servers = remaining
    for seq in range(600, 900):
        pub.send(seq)
    pub.drain()

    assert sorted(pub.applied) == list(range(900))
    found = wait_until(lambda: _members_without(remaining, leader), what="the new membership")
    assert sorted(found[1]) == sorted(remaining)
    assert found[2] in remaining
    wait_until(lambda: caught_up(remaining), what="the members to apply the same index")
    states = [ledger(sid)[1] for sid in remaining]
    assert states[0] == states[1] == states[2]
    check_ledger(states[0], pub)


def _changed(result: tuple[object, ...]) -> object:
    """A membership change's result, or None to retry while another is in progress."""
    return None if result == ("error", "cluster_change_not_permitted") else result


def _members_without(sids: list[tuple[str, str]], gone: tuple[str, str]) -> object:
    result = api.members(sids, 1000)
    return result if result[0] == "ok" and gone not in result[1] else None


def test_local_send_msg_runs_on_the_follower_on_the_targets_node(procs: ProcCluster) -> None:
    ids = server_ids(procs)
    start_cluster(ids, LedgerMachine())
    leader = leader_of(ids)
    follower = next(sid for sid in ids if sid != leader)
    me = actors.self()

    def relay() -> None:
        actors.send(me, ("relayed", actors.receive()))

    target = actors.spawn(relay, node=follower[1])
    # the follower local to the target is down: the leader must not stand in for it
    assert api.stop_server("default", follower) == "ok"
    assert api.process_command(leader, ("send_local", target, "hello"))[0] == "ok"
    committed = overview(leader)["commit_index"]
    assert api.restart_server("default", follower) == "ok"
    # once it catches up, the follower applies the entry and sends on its own node
    assert actors.receive(10_000) == ("relayed", "hello")
    wait_until(lambda: overview(follower)["last_applied"] >= committed,
               what="the follower to catch up")
    assert actors.receive(0) is actors.TIMEOUT


def test_local_send_msg_without_a_local_member_runs_on_the_leader(procs: ProcCluster) -> None:
    ids = server_ids(procs)
    start_cluster(ids, LedgerMachine())
    leader = leader_of(ids)
    me = actors.self()  # the client node runs no member
    assert api.process_command(leader, ("send_local", me, "hi"))[0] == "ok"
    assert actors.receive(10_000) == "hi"
    wait_until(lambda: caught_up(ids), what="every member to apply the entry")
    assert actors.receive(0) is actors.TIMEOUT
