"""``applied`` events a leader cannot send are kept and sent on a later tick.

Ra sends ``ra_event``s with noconnect: a client whose node is not connected
at that moment would lose them. Like Ra's ``pending_notifys``, the leader
keeps those correlations, in order, and tries again on every tick (and ahead
of that client's next ones), so a client that reconnects hears about every
command that was applied meanwhile.
"""

from __future__ import annotations

from typing import Any

import actors
from ra import api
from ra.types import USR
from tests.ra.ra_proc_support import (
    SERVER_CONFIG,
    Cluster,
    SeqMachine,
    leader_of,
    overview,
    wait_until,
)


def collect(report_to: Any, n: int) -> None:
    """The client: gathers ``applied`` correlations, then reports them."""
    got: list[Any] = []
    while len(got) < n:
        match actors.receive():
            case ("ra_event", from_, ("applied", replies)):
                got.extend((from_, corr) for corr, _ in replies)
    actors.send(report_to, ("collected", got))


def test_applied_events_for_a_disconnected_client_arrive_once_it_is_back(
    four: Cluster,
) -> None:
    ids = four.ids
    client_node = four.nodes[3]
    with four.nodes[0].attached():
        result = api.start_cluster("default", "pending", SeqMachine(), ids,
                                   server_config=SERVER_CONFIG)
        assert result[0] == "ok", result
        leader = leader_of(ids)
        assert leader[1] == four.nodes[0].name
        # the client's node is cut off from the cluster's nodes
        four.network.faults.partition([client_node.name], [n.name for n in four.nodes[:3]])
        client = client_node.spawn(collect, (actors.self(), 5))
        for seq in range(5):
            actors.send(leader, ("$gen_cast", ("command", "normal", (
                USR, ("push", seq), ("notify", seq, client)))))
        # they commit and apply while the client's node is not connected
        wait_until(lambda: overview(leader)["machine"][0] == 4, what="all five applied")
        assert actors.receive(300) is actors.TIMEOUT
        four.network.faults.heal()
        assert actors.get_node().ping(client_node.name) == "pong"
        msg = actors.receive(5_000)
        assert msg == ("collected", [(leader, seq) for seq in range(5)])
