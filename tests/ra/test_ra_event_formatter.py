"""``ra_event_formatter``: a server config that builds the messages clients get for
``ra_event``s (Ra's ``{M, F, A}``), here ``(fun, args)`` called as
``fun(from_id, (event_type, body), *args)``."""

from __future__ import annotations

from typing import Any

import pytest

import actors
from ra import api
from ra.event_formatter import BadFormatter, resolve, wrap
from tests.ra.ra_proc_support import (
    SERVER_CONFIG,
    Cluster,
    SeqMachine,
    leader_of,
    overview,
    wait_until,
)


def tagged(from_id: Any, evt: tuple[Any, Any], tag: str) -> Any:
    return (tag, from_id, evt)


def test_without_a_formatter_events_are_ra_events() -> None:
    assert wrap(None, ("s1", "n1"), "applied", [(1, "ok")]) == (
        "ra_event", ("s1", "n1"), ("applied", [(1, "ok")]))
    fmt = resolve((tagged, ["mine"]))
    assert wrap(fmt, ("s1", "n1"), "applied", [(1, "ok")]) == (
        "mine", ("s1", "n1"), ("applied", [(1, "ok")]))
    assert resolve(None) is None
    for bad in [tagged, ("tagged", []), (tagged, "mine")]:
        with pytest.raises(BadFormatter):
            resolve(bad)


def test_applied_and_rejected_events_reach_the_client_formatted(cluster: Cluster) -> None:
    config = {**SERVER_CONFIG, "ra_event_formatter": (tagged, ["q1_event"])}
    with cluster.nodes[0].attached():
        assert api.start_cluster("default", "q1", SeqMachine(), cluster.ids,
                                 server_config=config)[0] == "ok"
        leader = leader_of(cluster.ids)
        follower = next(sid for sid in cluster.ids if sid != leader)
        api.pipeline_command(leader, ("push", 1), correlation="c1", priority="normal")
        msg = actors.receive(5000, match=lambda m: m[0] in ("q1_event", "ra_event"))
        assert msg == ("q1_event", leader, ("applied", [("c1", ("pushed", 1))]))
        wait_until(lambda: overview(follower)["leader_id"] == leader, what="follower knows leader")
        api.pipeline_command(follower, ("push", 2), correlation="c2", priority="normal")
        msg = actors.receive(5000, match=lambda m: m[0] in ("q1_event", "ra_event"))
        assert msg == ("q1_event", follower, ("rejected", ("not_leader", leader, "c2")))
