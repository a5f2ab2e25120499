"""Each node runs its members on its own code (the system's ``machine_code``).

In Erlang a machine names a module and every node runs the module it has
loaded, so one cluster config runs different code on nodes of different
releases. A Ra system whose config has ``machine_code`` hands every member it
starts or restarts the machine that function returns: a member started from
another node, or restarted from its persisted config, runs this node's code. So a
node with older code keeps a cluster on the older version (strategy ``all``), and
refuses a new member whose cluster starts at a version its code lacks, as
``ra_server_sup_sup:validate_config`` does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from actors import Node
from ra import api
from ra import system as ra_system
from tests.ra.ra_proc_support import SERVER_CONFIG, TICK, Cluster, leader_of, overview
from tests.ra.test_ra_version import VersionedMachine
from transports.faults import FaultRules
from transports.memory import MemoryNetwork


def code_of(latest: int) -> Any:
    """A node whose code supports machine versions up to `latest`."""
    return lambda _machine: VersionedMachine(latest)


@pytest.fixture
def mixed() -> Iterator[Cluster]:
    """ra1 and ra2 run code up to version 2, ra3 only up to version 1."""
    network = MemoryNetwork(TICK, FaultRules(seed=1))
    nodes = [Node(f"ra{i}@127.0.0.1:{i}", transport=network.transport()).start()
             for i in range(1, 4)]
    try:
        for node, latest in zip(nodes, (2, 2, 1), strict=True):
            with node.attached():
                assert ra_system.start({"machine_code": code_of(latest)})[0] == "ok"
        yield Cluster(network, nodes, [(f"s{i}", nodes[i - 1].name) for i in range(1, 4)])
    finally:
        for node in nodes:
            node.stop()


def test_a_member_started_from_another_node_runs_its_own_nodes_code(mixed: Cluster) -> None:
    ids = mixed.ids
    config = {**SERVER_CONFIG, "initial_machine_version": 1}
    with mixed.nodes[0].attached():
        # the config names version-2 code; ra3 runs its own, which stops at 1
        assert api.start_cluster("default", "c", VersionedMachine(2), ids,
                                 server_config=config)[0] == "ok"
        leader_of(ids)
        assert [overview(sid)["machine_version"] for sid in ids] == [2, 2, 1]
        assert all(overview(sid)["effective_machine_version"] == 1 for sid in ids)
        # restarted from its persisted config, it still runs its node's code
        assert api.stop_server("default", ids[2]) == "ok"
        assert api.restart_server("default", ids[2]) == "ok"
        assert overview(ids[2])["machine_version"] == 1


def test_a_node_refuses_a_member_whose_cluster_starts_past_its_code(mixed: Cluster) -> None:
    ids = mixed.ids
    config = {**SERVER_CONFIG, "initial_machine_version": 2}
    with mixed.nodes[0].attached():
        outcome = api.start_cluster("default", "c2", VersionedMachine(2), ids,
                                    server_config=config)
        assert outcome == ("ok", ids[:2], ids[2:])
        assert api.start_server("default", {
            **config, "id": ids[2], "uid": api.new_uid("c2"), "cluster_name": "c2",
            "initial_members": ids, "machine": VersionedMachine(2)}) == (
            "error", "invalid_initial_machine_version")
