"""A leader does not send a snapshot to a member whose code cannot run it.

As Ra's snapshot sender does, the leader first asks the lagging member what
machine version its code supports; a snapshot taken at a higher version is
not sent. Once the member is restarted with newer code, the next offer goes
through and it catches up. (Under the ``quorum`` upgrade strategy a cluster
may run a version that one member's code does not support yet.)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gevent
import pytest

from ra import api
from ra import system as ra_system
from ra.machine import Machine
from tests.ra.ra_proc_support import (
    SERVER_CONFIG,
    Cluster,
    leader_of,
    make_cluster,
    overview,
    wait_until,
)
from tests.ra.test_ra_version import VersionedMachine

SYSTEM = "upgrades"


def releasing(module: Machine) -> Machine:
    """Wrap one version's code so that it releases the log every ten indexes."""

    class Releasing(Machine):
        def init(self, config: dict[str, Any]) -> Any:
            return module.init(config)

        def apply(self, meta: dict[str, Any], command: Any, state: Any) -> tuple[Any, ...]:
            new_state, reply = module.apply(meta, command, state)[:2]
            if meta["index"] % 10 == 0:
                return (new_state, reply, [("release_cursor", meta["index"], new_state)])
            return (new_state, reply)

    return Releasing()


class SnapshottingVersioned(VersionedMachine):
    """`VersionedMachine` whose code of every version snapshots every ten indexes."""

    def __init__(self, latest: int) -> None:
        super().__init__(latest)
        self.modules = {v: releasing(m) for v, m in self.modules.items()}


@pytest.fixture
def quorum_cluster() -> Iterator[Cluster]:
    c = make_cluster()
    try:
        for node in c.nodes:
            with node.attached():
                assert ra_system.start({"name": SYSTEM,
                                        "machine_upgrade_strategy": "quorum"})[0] == "ok"
        yield c
    finally:
        for node in c.nodes:
            node.stop()


def config(sid: Any, ids: list[Any], latest: int) -> dict[str, Any]:
    return {**SERVER_CONFIG, "id": sid, "uid": f"VG{sid[0]}", "cluster_name": "vg",
            "initial_members": ids, "machine": SnapshottingVersioned(latest),
            "log_init_args": {"min_snapshot_interval": 20}}


def test_a_snapshot_above_the_members_code_version_waits_for_newer_code(
    quorum_cluster: Cluster,
) -> None:
    ids = quorum_cluster.ids
    s1, s2, s3 = ids
    with quorum_cluster.nodes[0].attached():
        for sid, latest in ((s1, 2), (s2, 2), (s3, 1)):
            assert api.start_server(SYSTEM, config(sid, ids, latest)) == "ok"
        assert api.trigger_election(s1) == "ok"
        wait_until(lambda: leader_of(ids) == s1, what="s1 leads")
        # quorum strategy: the leader's noop moves the cluster to version 2 at once
        wait_until(lambda: overview(s1)["effective_machine_version"] == 2, what="version 2")
        assert api.stop_server(SYSTEM, s3) == "ok"
        for i in range(100):
            assert api.process_command(s1, ("put", i), 5000)[0] == "ok"
        leader_snap = wait_until(lambda: (overview(s1)["snapshot_index"] or 0) >= 50 and
                                 overview(s1)["snapshot_index"], what="leader snapshot")

        # s3 comes back with code that only supports version 1: no snapshot for it
        assert api.restart_server(SYSTEM, s3) == "ok"
        wait_until(lambda: overview(s3)["raft_state"] == "follower", what="s3 follows")
        gevent.sleep(1.0)  # ten leader ticks, each of which would offer the snapshot
        assert overview(s3)["snapshot_index"] is None
        assert overview(s3)["machine_version"] == 1
        assert overview(s1)["raft_state"] == "leader"

        # restarted with code that supports version 2, it is sent the snapshot
        assert api.stop_server(SYSTEM, s3) == "ok"
        assert api.restart_server(SYSTEM, s3, {"machine": SnapshottingVersioned(2)}) == "ok"
        wait_until(lambda: (overview(s3)["snapshot_index"] or 0) >= leader_snap,
                   what="s3 installs the snapshot")
        target = overview(s1)["last_applied"]
        wait_until(lambda: overview(s3)["last_applied"] >= target, what="s3 catches up")
        assert overview(s3)["machine"] == overview(s1)["machine"]
