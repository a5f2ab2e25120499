"""A rolling upgrade of a three-member cluster (strategy ``all``).

Members run code supporting machine version 1 and are restarted one by one
with code supporting versions 1 and 2. The cluster keeps running version 1
until every member supports 2; then one noop switches every replica at the
same index, and each replica converts its state exactly once.
"""

from __future__ import annotations

from typing import Any

import pytest

from ra import api
from tests.ra.ra_proc_support import (
    SERVER_CONFIG,
    Cluster,
    leader_of,
    overview,
    wait_until,
)
from tests.ra.test_ra_version import VersionedMachine


def put(ids: list[Any], value: Any) -> Any:
    result = api.process_command(ids, ("put", value), 5000)
    assert result[0] == "ok", result
    return result[1]


def restart_with_new_code(sid: Any) -> None:
    """Stop a member and start it again running code that supports version 2
    (in warren the machine object is the code, so it comes with the restart)."""
    assert api.stop_server("default", sid) == "ok"
    assert api.restart_server("default", sid, {"machine": VersionedMachine(2)}) == "ok"


def all_applied(ids: list[Any]) -> None:
    """Wait until every member applied what the leader applied."""
    target = overview(leader_of(ids))["last_applied"]
    for sid in ids:
        wait_until(lambda sid=sid: overview(sid)["last_applied"] >= target,
                   what=f"{sid} applied up to {target}")


@pytest.mark.parametrize("last_one", ["leader", "follower"])
def test_rolling_upgrade_switches_every_replica_at_one_index_once_all_support_it(
    cluster: Cluster, last_one: str
) -> None:
    """`last_one` is the role of the member restarted last: the leader (a new
    leader asks every peer after its election) or a follower (the upgraded
    leader keeps asking it on every tick until it reports version 2)."""
    ids = cluster.ids
    config = {**SERVER_CONFIG, "initial_machine_version": 1}
    with cluster.nodes[0].attached():
        assert api.start_cluster("default", "vq", VersionedMachine(1), ids,
                                 server_config=config)[0] == "ok"
        assert put(ids, "a") == ("ok", "v1")

        upgraded: list[Any] = []
        while len(upgraded) < 2:
            leader = leader_of(ids)
            old = [sid for sid in ids if sid not in upgraded]
            pick = leader if last_one == "follower" and leader in old else (
                next(sid for sid in old if sid != leader))
            restart_with_new_code(pick)
            upgraded.append(pick)
            assert put(ids, ("after restart", pick)) == ("ok", "v1")
            all_applied(ids)
            # some member's code only knows version 1: the cluster stays there
            for member in ids:
                ov = overview(member)
                assert ov["effective_machine_version"] == 1, (member, ov)
                assert ov["machine"][1] == (), "no conversion ran"
            assert overview(pick)["machine_version"] == 2

        (last,) = [sid for sid in ids if sid not in upgraded]
        if last_one == "follower" and leader_of(ids) == last:
            assert api.transfer_leadership(last, upgraded[0]) == "ok"
            wait_until(lambda: leader_of(ids) == upgraded[0], what="an upgraded leader")
        assert (leader_of(ids) == last) == (last_one == "leader")
        restart_with_new_code(last)
        # every member supports 2: the leader learns it and announces the upgrade
        for sid in ids:
            wait_until(lambda sid=sid: overview(sid)["effective_machine_version"] == 2,
                       what=f"{sid} runs machine version 2")
        assert put(ids, "b") == ("ok", "v2")
        all_applied(ids)

        views = [overview(sid) for sid in ids]
        switch_points = {ov["machine_versions"][0] for ov in views}
        assert len(switch_points) == 1, switch_points
        (switch_idx, version), = switch_points
        assert version == 2
        assert all(ov["machine_versions"][1:] == [(0, 1)] for ov in views)
        states = [ov["machine"] for ov in views]
        assert states[0] == states[1] == states[2]
        items, conversions = states[0]
        # converted exactly once per replica, at the switch index
        assert [(old, new, idx) for old, new, idx, _ in conversions] == [(1, 2, switch_idx)]
        assert all(tag == "v2" for tag, _ in items)
        assert [value for _, value in items][-1] == "b"


def test_a_new_server_cannot_start_its_cluster_above_its_codes_version(cluster: Cluster) -> None:
    sid = cluster.ids[0]
    config = {"id": sid, "uid": "VQ0001", "cluster_name": "vq", "initial_members": [sid],
              "machine": VersionedMachine(1), "initial_machine_version": 2}
    with cluster.nodes[0].attached():
        assert api.start_server("default", config) == (
            "error", "invalid_initial_machine_version")
        # nothing was registered: the same uid can start once the config is valid
        assert api.start_server("default", {**config, "initial_machine_version": 1}) == "ok"
