"""Replicated cluster deletion on three nodes: `delete_cluster`
commits the delete entry; every member runs its ``eol`` effects, passes through
``terminating_leader`` / ``terminating_follower``, stops and deletes its data."""

from __future__ import annotations

from typing import Any

import actors
from ra import api
from ra.directory import lookup
from tests.ra.ra_proc_support import (
    SERVER_CONFIG,
    Cluster,
    SeqMachine,
    leader_of,
    wait_until,
)

WATCH = "state_watch"


class EolMachine(SeqMachine):
    """Every member reports each state it enters to the `WATCH` process of its
    own node; at end of life the leader also tells `watcher` the final state."""

    def __init__(self, watcher: Any) -> None:
        super().__init__()
        self.watcher = watcher

    def state_enter(self, ra_state: str, state: Any) -> list[Any]:
        report = ("send_msg", WATCH, ("entered", actors.node(), ra_state), ["local"])
        if ra_state == "eol":
            return [report, ("send_msg", self.watcher, ("eol", state), ["ra_event"])]
        return [report]


def forward_to(target: Any) -> None:
    actors.register(WATCH, actors.self())
    actors.send(target, ("watching", actors.node()))
    while True:
        actors.send(target, actors.receive())


def watch_states(c: Cluster) -> None:
    me = actors.self()
    for node in c.nodes:
        actors.spawn(forward_to, me, node=node.name)
        assert actors.receive(5000, match=lambda m: m[0] == "watching") == ("watching", node.name)


def start(c: Cluster, machine: Any) -> tuple[str, str]:
    result = api.start_cluster("default", "del", machine, c.ids, server_config=SERVER_CONFIG)
    assert result[0] == "ok", result
    return leader_of(c.ids)


def gone(c: Cluster, sid: tuple[str, str]) -> bool:
    """The member's process is down and the system holds nothing of it."""
    handle = lookup(c.node_of(sid), "default")
    assert handle is not None
    return (api.ping(sid, 1000) == ("error", "noproc")
            and handle.disk.uid_of(sid[0]) is None
            and sid[0] not in handle.directory)


def states_entered(node: str) -> list[str]:
    """The states the member on `node` reported, in order (drains the mailbox)."""
    out = []
    while True:
        msg = actors.receive(0, match=lambda m: m[0] == "entered" and m[1] == node)
        if msg is actors.TIMEOUT:
            return out
        out.append(msg[2])


def test_delete_cluster_ends_every_member_after_eol_effects(cluster: Cluster) -> None:
    with cluster.nodes[0].attached():
        watch_states(cluster)
        leader = start(cluster, EolMachine(actors.self()))
        for seq in range(5):
            assert api.process_command(leader, ("push", seq))[0] == "ok"
        assert api.delete_cluster(cluster.ids) == ("ok", leader)
        # the leader runs the machine's eol effects once, with the final state
        msg = actors.receive(5000, match=lambda m: m[0] == "ra_event")
        assert msg == ("ra_event", leader, ("machine", ("eol", (4, (0, 1, 2, 3, 4)))))
        for sid in cluster.ids:
            wait_until(lambda sid=sid: gone(cluster, sid), what=f"{sid} deleted")
        for node in cluster.nodes:
            assert "del" not in lookup(node, "default").leaderboard
        followers = [sid for sid in cluster.ids if sid != leader]
        for sid in followers:
            assert states_entered(sid[1])[-2:] == ["eol", "terminating_follower"]
        # the leader either stopped at once (every follower already had the entry)
        # or waited in terminating_leader
        assert states_entered(leader[1])[-2:] in (["leader", "eol"], ["eol", "terminating_leader"])
        # a deleted member cannot be restarted: nothing of it is registered
        assert api.restart_server("default", followers[0]) == ("error", "name_not_registered")


def test_leader_waits_in_terminating_leader_for_a_member_that_is_down(cluster: Cluster) -> None:
    with cluster.nodes[0].attached():
        watch_states(cluster)
        leader = start(cluster, EolMachine(actors.self()))
        down, up = [sid for sid in cluster.ids if sid != leader]
        assert api.process_command(leader, ("push", 1))[0] == "ok"
        assert api.stop_server("default", down) == "ok"
        assert api.delete_cluster(cluster.ids) == ("ok", leader)
        wait_until(lambda: gone(cluster, up), what="the running follower deleted")
        # the leader keeps the data the stopped member still needs
        assert api.ping(leader) == ("pong", "terminating_leader")
        assert lookup(cluster.node_of(leader), "default").disk.uid_of(leader[0]) is not None
        # commands are no longer taken
        api.pipeline_command(leader, ("push", 2), "late", "normal")
        # the stopped member comes back, applies the delete entry and goes, then the leader
        assert api.restart_server("default", down) == "ok"
        wait_until(lambda: gone(cluster, down), what="the restarted member deleted")
        wait_until(lambda: gone(cluster, leader), what="the leader deleted")
        assert states_entered(down[1])[-2:] == ["eol", "terminating_follower"]
        assert states_entered(leader[1])[-2:] == ["eol", "terminating_leader"]
        late = actors.receive(0, match=lambda m: m[0] == "ra_event" and m[2][0] == "applied")
        assert late is actors.TIMEOUT


def test_delete_cluster_without_a_quorum_fails_and_deletes_nothing(cluster: Cluster) -> None:
    with cluster.nodes[0].attached():
        leader = start(cluster, SeqMachine())
        others = [sid for sid in cluster.ids if sid != leader]
        for sid in others:
            assert api.stop_server("default", sid) == "ok"
        assert api.delete_cluster([leader], 500)[0] == "error"
        assert api.ping(leader)[0] == "pong"
        handle = lookup(cluster.node_of(leader), "default")
        assert handle.disk.uid_of(leader[0]) is not None
