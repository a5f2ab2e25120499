"""A three-node Ra cluster of real server processes: election, redirects,
pipelining with batched ``applied`` events, queries, restart and recovery."""

from __future__ import annotations

import actors
from ra import api
from tests.ra.ra_proc_support import (
    SERVER_CONFIG,
    Cluster,
    PipelineClient,
    SeqMachine,
    leader_of,
    overview,
    wait_until,
)


def start(c: Cluster, machine: object | None = None) -> tuple[str, str]:
    result = api.start_cluster("default", "q1", machine or SeqMachine(), c.ids,
                               server_config=SERVER_CONFIG)
    assert result[0] == "ok" and sorted(result[1]) == c.ids and result[2] == [], result
    # the local member is started first and told to elect itself
    assert result[1][0][1] == actors.node()
    return leader_of(c.ids)


def test_start_cluster_elects_one_leader_all_members_agree(cluster: Cluster) -> None:
    with cluster.nodes[0].attached():
        leader = start(cluster)
        assert leader == cluster.ids[0]  # the first started member is told to elect itself
        for sid in cluster.ids:
            assert api.members(sid) == ("ok", cluster.ids, leader)
        states = sorted(api.ping(sid)[1] for sid in cluster.ids)
        assert states == ["follower", "follower", "leader"]


def test_process_command_via_follower_is_redirected_to_the_leader(cluster: Cluster) -> None:
    with cluster.nodes[1].attached():
        leader = start(cluster)
        follower = next(sid for sid in cluster.ids if sid != leader)
        assert api.process_command(follower, ("push", 7)) == ("ok", ("pushed", 7), leader)
        assert api.process_command(leader, ("push", 7)) == ("ok", ("duplicate", 7), leader)
        assert api.process_command(leader, ("bogus",)) == (
            "ok", ("error", "unknown_command"), leader)


def test_1000_pipelined_commands_apply_once_in_order_in_batches(cluster: Cluster) -> None:
    with cluster.nodes[0].attached():
        leader = start(cluster)
        client = PipelineClient(cluster.ids, leader)
        for seq in range(1000):
            client.send(seq)
        client.drain()
        assert client.applied == list(range(1000))
        # notifications are batched per apply batch, not one per command
        assert client.events < 1000
        assert client.rejections == []
        _, (_, result), _ = api.local_query(leader, lambda s: s[1])
        assert result == tuple(range(1000))
        for sid in cluster.ids:
            wait_until(lambda sid=sid: overview(sid)["last_applied"] == overview(leader)[
                "last_applied"], what=f"{sid} applies everything")
            assert overview(sid)["machine"] == (999, tuple(range(1000)))


def test_pipelining_to_a_follower_is_rejected_with_a_leader_hint(cluster: Cluster) -> None:
    with cluster.nodes[0].attached():
        leader = start(cluster)
        follower = next(sid for sid in cluster.ids if sid != leader)
        api.pipeline_command(follower, ("push", 1), "c1")
        msg = actors.receive(5000)
        assert msg == ("ra_event", follower, ("rejected", ("not_leader", leader, "c1")))
        api.pipeline_command(leader, ("push", 1), "c1")
        assert actors.receive(5000) == ("ra_event", leader, ("applied", [("c1", ("pushed", 1))]))


def test_queries_local_leader_and_consistent(cluster: Cluster) -> None:
    with cluster.nodes[2].attached():
        leader = start(cluster)
        assert api.process_command(leader, ("push", 3))[0] == "ok"
        assert api.consistent_query(cluster.ids[2], lambda s: s[0]) == ("ok", 3, leader)
        ok, ((applied, term), value), who = api.leader_query(cluster.ids[1], lambda s: s[0])
        assert (ok, value, who) == ("ok", 3, leader)
        assert applied >= 2 and term >= 1
        res = api.local_query(cluster.ids[2], lambda s: 1 // 0)
        assert res[0] == "error"
        assert api.ping(cluster.ids[0])[0] == "pong"


def test_restarted_server_recovers_its_state_from_its_log(cluster: Cluster) -> None:
    with cluster.nodes[0].attached():
        leader = start(cluster)
        follower = next(sid for sid in cluster.ids if sid != leader)
        for seq in range(20):
            assert api.process_command(leader, ("push", seq))[0] == "ok"
        wait_until(lambda: overview(follower)["last_applied"] == overview(leader)["last_applied"])
        assert api.stop_server("default", follower) == "ok"
        assert api.ping(follower, 500) == ("error", "noproc")
        assert api.restart_server("default", follower) == "ok"
        # replayed from its own log before it hears from the leader again
        wait_until(lambda: overview(follower)["machine"] == (19, tuple(range(20))),
                   what="recovered machine state")
        assert api.process_command(follower, ("push", 20)) == ("ok", ("pushed", 20), leader)
        wait_until(lambda: overview(follower)["machine"][0] == 20)


def test_starting_a_server_twice_or_an_old_uid_is_refused(cluster: Cluster) -> None:
    with cluster.nodes[0].attached():
        start(cluster)
        sid = cluster.ids[1]
        ov = overview(sid)
        conf = {"id": sid, "uid": ov["uid"], "cluster_name": "q1",
                "initial_members": cluster.ids, "machine": SeqMachine()}
        res = api.start_server("default", conf)
        assert res[0] == "error" and res[1][0] == "already_started"
        assert api.stop_server("default", sid) == "ok"
        assert api.start_server("default", conf) == ("error", "not_new")
        assert api.restart_server("default", sid) == "ok"
