"""Single-server membership changes through the client API, under load."""

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


def test_add_then_remove_member_while_pipelining(four: Cluster) -> None:
    s1, s2, s3 = four.ids
    s4 = ("s4", four.nodes[3].name)
    machine = SeqMachine()
    with four.nodes[0].attached():
        assert api.start_cluster("default", "m", machine, four.ids,
                                 server_config=SERVER_CONFIG)[0] == "ok"
        assert api.process_command(s1, ("push", 0))[0] == "ok"
        client = PipelineClient([s1, s2, s3], s1)
        for seq in range(1, 201):
            client.send(seq)
        conf = {**SERVER_CONFIG, "id": s4, "uid": api.new_uid("m"), "cluster_name": "m",
                "initial_members": [s1, s2, s3, s4], "machine": machine}
        assert api.start_server("default", conf) == "ok"
        ok, (idx, term), leader = api.add_member(s2, s4)  # via a follower: redirected
        assert (ok, leader) == ("ok", s1) and idx > 1 and term >= 1
        for seq in range(201, 401):
            client.send(seq)
        wait_until(lambda: api.members(s1)[1] == [s1, s2, s3, s4], what="s4 joined")
        wait_until(lambda: api.remove_member(s1, s2)[0] == "ok", what="s2 removal appended")
        for seq in range(401, 601):
            client.send(seq)
        client.drain()
        wait_until(lambda: api.members(s1)[1] == [s1, s3, s4], what="s2 left")
        expected = (600, tuple(range(601)))
        wait_until(lambda: overview(s4)["machine"] == expected, what="s4 holds the whole log")
        assert api.stop_server("default", s2) == "ok"
        # three voters left, two of them up is a quorum
        assert api.process_command(s4, ("push", 601)) == ("ok", ("pushed", 601), s1)


def test_membership_errors(four: Cluster) -> None:
    s1, s2, s3 = four.ids
    with four.nodes[0].attached():
        assert api.start_cluster("default", "m", SeqMachine(), four.ids,
                                 server_config=SERVER_CONFIG)[0] == "ok"
        assert leader_of(four.ids) == s1
        assert api.process_command(s1, ("push", 0))[0] == "ok"
        assert api.add_member(s1, s2) == ("error", "already_member")
        assert api.remove_member(s1, ("nobody", s1[1])) == ("error", "not_member")
        # cut the leader off: the first change is appended but cannot commit,
        # so a second one is refused until it does
        four.network.faults.partition([s1[1]], [s2[1], s3[1], four.nodes[3].name])
        first = api.add_member(s1, ("s4", four.nodes[3].name))
        assert first[0] == "ok"
        assert api.add_member(s1, ("s5", four.nodes[3].name)) == (
            "error", "cluster_change_not_permitted")


def test_member_overview_shows_each_peers_voter_status(four: Cluster) -> None:
    s1, s2, s3 = four.ids
    s4 = ("s4", four.nodes[3].name)
    machine = SeqMachine()
    with four.nodes[0].attached():
        assert api.start_cluster("default", "m", machine, four.ids,
                                 server_config=SERVER_CONFIG)[0] == "ok"
        assert api.process_command(s1, ("push", 0))[0] == "ok"
        uid = api.new_uid("m")
        conf = {**SERVER_CONFIG, "id": s4, "uid": uid, "cluster_name": "m",
                "initial_members": [s1, s2, s3], "machine": machine,
                "membership": "non_voter"}
        assert api.start_server("default", conf) == "ok"
        new = {"id": s4, "membership": "non_voter", "uid": uid}
        assert api.add_member(s1, new)[0] == "ok"
        wait_until(lambda: s4 in overview(s1)["cluster"], what="s4 in the leader's cluster")
        peers = overview(s1)["cluster"]
        assert peers[s4]["membership"] == "non_voter"
        assert peers[s4]["voter_status"] == {"membership": "non_voter", "uid": uid}
        # a member without a voter status is a voter
        assert (peers[s2]["membership"], peers[s2]["voter_status"]) == ("voter", None)
        assert overview(s4)["membership"] == "non_voter"
