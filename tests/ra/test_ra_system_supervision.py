"""The Ra system tree: who restarts what, and when a member stays down."""

from __future__ import annotations

from typing import Any

import actors
from ra import api
from supervision import supervisor
from tests.ra.ra_proc_support import (
    SERVER_CONFIG,
    Cluster,
    SeqMachine,
    leader_of,
    overview,
    wait_until,
)


def start(c: Cluster) -> None:
    assert api.start_cluster("default", "sup", SeqMachine(), c.ids,
                             server_config=SERVER_CONFIG)[0] == "ok"
    assert leader_of(c.ids) == c.ids[0]
    assert api.process_command(c.ids[0], ("push", 0))[0] == "ok"


def server_sups() -> list[Any]:
    return supervisor.which_children("ra_server_sup_sup")


def test_tree_shape_per_node(cluster: Cluster) -> None:
    with cluster.nodes[0].attached():
        start(cluster)
        for name in ("ra_systems_sup", "ra_system_sup_default", "ra_log_sup",
                     "ra_log_wal_sup", "ra_log_wal", "ra_server_sup_sup", "s1"):
            assert actors.whereis(name) is not None, name
        [(_, sup_pid, kind, _)] = server_sups()
        assert kind == "supervisor"
        [(child_id, pid, _, _)] = supervisor.which_children(sup_pid)
        assert (child_id, pid) == ("s1", actors.whereis("s1"))


def test_killed_server_is_restarted_and_rejoins(cluster: Cluster) -> None:
    s1, s2, _ = cluster.ids
    with cluster.nodes[0].attached():
        start(cluster)
    with cluster.nodes[1].attached():
        old = actors.whereis("s2")
        actors.exit(old, "kill")
        new = wait_until(lambda: actors.whereis("s2") not in (None, old), what="restart")
        assert new != old
        assert api.process_command(s2, ("push", 1)) == ("ok", ("pushed", 1), s1)
        wait_until(lambda: overview(s2)["machine"] == (1, (0, 1)), what="s2 rejoins")


def test_third_crash_within_five_seconds_keeps_the_member_down(cluster: Cluster) -> None:
    s1, s2, _ = cluster.ids
    with cluster.nodes[0].attached():
        start(cluster)
    with cluster.nodes[1].attached():
        for _ in range(2):
            old = actors.whereis("s2")
            actors.exit(old, "kill")
            wait_until(lambda old=old: actors.whereis("s2") not in (None, old))
        actors.exit(actors.whereis("s2"), "kill")
        wait_until(lambda: server_sups() == [], what="ra_server_sup gives up")
        assert actors.whereis("s2") is None
        # the cluster carries on with two of three
        assert api.process_command(s1, ("push", 1)) == ("ok", ("pushed", 1), s1)
        assert api.restart_server("default", s2) == "ok"
        wait_until(lambda: overview(s2)["machine"] == (1, (0, 1)), what="s2 back")


def test_wal_crash_restarts_only_the_wal(cluster: Cluster) -> None:
    s1, s2, _ = cluster.ids
    with cluster.nodes[0].attached():
        start(cluster)
    with cluster.nodes[1].attached():
        server = actors.whereis("s2")
        wal = actors.whereis("ra_log_wal")
        actors.exit(wal, "kill")
        wait_until(lambda: actors.whereis("ra_log_wal") not in (None, wal), what="new WAL")
        assert actors.whereis("s2") == server
        for seq in range(1, 11):
            assert api.process_command(s2, ("push", seq))[0] == "ok"
        wait_until(lambda: overview(s2)["last_written_index"] == overview(s1)["last_index"],
                   what="s2 writes through the new WAL")
