"""Failures under load: losing the leader's node while pipelining, and a
follower cut off long enough that it can only catch up by snapshot."""

from __future__ import annotations

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


def test_leader_node_lost_while_pipelining_nothing_lost_nothing_doubled(cluster: Cluster) -> None:
    s1, s2, s3 = cluster.ids
    with cluster.nodes[0].attached():
        assert api.start_cluster("default", "q", SeqMachine(), cluster.ids,
                                 server_config=SERVER_CONFIG)[0] == "ok"
        assert leader_of(cluster.ids) == s1
        # move leadership away from the client's node so that node can be lost
        assert api.process_command(s1, ("push", 0)) == ("ok", ("pushed", 0), s1)
        wait_until(lambda: overview(s2)["last_applied"] == overview(s1)["last_applied"])
        assert api.transfer_leadership(s1, s2) == "ok"
        wait_until(lambda: api.members(s1, 1000)[2] == s2, what="s2 leads")

        client = PipelineClient(cluster.ids, s2)
        for seq in range(1, 300):
            client.send(seq)
        cluster.node_of(s2).stop()
        for seq in range(300, 600):
            client.send(seq)
        client.drain(timeout_s=30)

        survivors = [s1, s3]
        new_leader = leader_of(survivors)
        assert new_leader in survivors
        expected = (599, tuple(range(600)))
        for sid in survivors:
            wait_until(lambda sid=sid: overview(sid)["machine"] == expected,
                       what=f"{sid} holds every command exactly once, in order")


def test_partitioned_follower_catches_up_by_snapshot_install(cluster: Cluster) -> None:
    s1, s2, s3 = cluster.ids
    machine = SeqMachine(snapshot_every=10)
    config = {**SERVER_CONFIG, "log_init_args": {"min_snapshot_interval": 50}}
    with cluster.nodes[0].attached():
        assert api.start_cluster("default", "q", machine, cluster.ids,
                                 server_config=config)[0] == "ok"
        assert leader_of(cluster.ids) == s1
        assert api.process_command(s1, ("push", 0))[0] == "ok"
        wait_until(lambda: overview(s3)["last_applied"] >= 2)
        behind = overview(s3)["last_applied"]

        cluster.network.faults.partition([s1[1], s2[1]], [s3[1]])
        client = PipelineClient([s1, s2], s1)
        for seq in range(1, 201):
            client.send(seq)
        client.drain()
        leader_snap = wait_until(lambda: overview(s1)["snapshot_index"], what="leader snapshot")
        assert leader_snap > behind + 50

        cluster.network.faults.heal()
        expected = (200, tuple(range(201)))
        wait_until(lambda: overview(s3)["machine"] == expected, timeout_s=20,
                   what="s3 catches up")
        ov = overview(s3)
        # entries before the leader's snapshot were never sent: s3 installed it
        assert ov["snapshot_index"] is not None and ov["snapshot_index"] >= leader_snap
        assert api.process_command(s3, ("push", 201)) == ("ok", ("pushed", 201), s1)
