"""Cluster formation: form the metadata cluster once, join it ever after.

RabbitMQ with a fixed peer list (`cluster_formation.classic_config.nodes`)
boots each node the same way: if some peer already runs the cluster, join
it; otherwise wait for the peers and let exactly one node create it. Here the
one is the *seed*, the peer whose name sorts first, and it creates the
metadata Ra cluster with a member on every listed node at once (as Khepri's
first node does before the others join). Every other node waits until it can
see the cluster and then either finds its own member already started by the
seed, restarts its member (it is listed but not running: this node came back
after a crash), or starts one and asks the leader to add it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import actors
from broker.metadata import CLUSTER_NAME, LOG_INIT_ARGS, MetadataMachine
from ra import api
from ra import system as ra_system
from ra.directory import lookup
from ra.system import registered_servers_local

__all__ = ["FormationFailed", "form_or_join", "ping", "seed_of"]

log = logging.getLogger("warren.broker")
RETRY_MS = 200
#: every metadata member, new or restarted (a restart re-reads the config stored at
#: its first start, which older warrens wrote without these)
SERVER_CONFIG = {"log_init_args": LOG_INIT_ARGS}


class FormationFailed(RuntimeError):
    pass


def ping(peer: str, timeout_ms: int) -> str:
    """`net_adm:ping` that answers ``"pang"`` on a timeout instead of raising it."""
    import gevent

    try:
        return actors.get_node().ping(peer, timeout_ms)
    except gevent.Timeout:
        return "pang"


def seed_of(peers: list[str]) -> str:
    """The node that creates the cluster when nobody runs it yet."""
    return sorted(peers)[0]


def _system_running(system: str) -> bool:
    return lookup(actors.get_node(), system) is not None


def _peer_ready(peer: str, system: str) -> bool:
    if ping(peer, 1000) != "pong":
        return False
    return ra_system.rpc(peer, _system_running, system, timeout=2000) is True


def _running_cluster(peers: list[str]) -> Any:
    """`members` of the metadata cluster as some reachable peer sees it, or None."""
    for peer in peers:
        if ping(peer, 1000) != "pong":
            continue
        result = api.members((CLUSTER_NAME, peer), 2000)
        if result[0] == "ok":
            return result
    return None


def _join(me: str, system: str, members: list[Any], leader: Any) -> str:
    my_id = (CLUSTER_NAME, me)
    if actors.whereis(CLUSTER_NAME) is not None:
        return "member"
    config = {**SERVER_CONFIG, "id": my_id, "uid": api.new_uid(CLUSTER_NAME),
              "cluster_name": CLUSTER_NAME, "initial_members": list({*members, my_id}),
              "machine": MetadataMachine()}
    result = api.start_server(system, config)
    if result != "ok" and not (isinstance(result, tuple) and result[1] == "not_new"):
        raise FormationFailed(f"cannot start metadata member: {result!r}")
    if result != "ok":
        api.restart_server(system, my_id, SERVER_CONFIG)
    if my_id in members:
        return "rejoined"
    added = api.add_member(leader, my_id, 5000)
    if added[0] != "ok" and added != ("error", "already_member"):
        raise FormationFailed(f"cannot join the metadata cluster: {added!r}")
    return "joined"


def form_or_join(peers: list[str], system: str = "default", timeout_s: float = 60.0,
                 log_step: Callable[[str], None] | None = None) -> str:
    """Make this node a member of the metadata cluster.

    Returns how: ``"formed"``, ``"member"`` (started by the seed),
    ``"recovered"`` (restarted from this node's data dir), ``"rejoined"`` or
    ``"joined"``. Runs in a warren process on the node.
    """
    node = actors.get_node()
    me = node.name
    others = [p for p in peers if p != me]
    if actors.whereis(CLUSTER_NAME) is None and CLUSTER_NAME in registered_servers_local(system):
        # A restart on a data dir that holds a member: it comes back from its own log and
        # finds the others by itself, as a RabbitMQ node restarts its metadata member.
        result = api.restart_server(system, (CLUSTER_NAME, me), SERVER_CONFIG)
        if result == "ok":
            return "recovered"
        log.warning("metadata member not restarted: %r", result)
    deadline = node.clock.monotonic() + timeout_s
    while node.clock.monotonic() < deadline:
        if actors.whereis(CLUSTER_NAME) is not None and api.members(
                (CLUSTER_NAME, me), 2000)[0] == "ok":
            return "member"
        running = _running_cluster(others)
        if running is not None:
            _ok, members, leader = running
            return _join(me, system, list(members), leader)
        if me == seed_of([me, *others]) and all(_peer_ready(p, system) for p in others):
            ids = [(CLUSTER_NAME, n) for n in sorted([me, *others])]
            result = api.start_cluster(system, CLUSTER_NAME, MetadataMachine(), ids, 5000,
                                       SERVER_CONFIG)
            if result[0] == "ok":
                return "formed"  # members that did not start join later
            log.warning("metadata cluster not formed yet: %r", result)
        if log_step is not None:
            log_step("waiting for peers")
        actors.receive(RETRY_MS, match=lambda _m: False)  # sleep; leave the mailbox alone
    raise FormationFailed(f"metadata cluster not formed within {timeout_s}s; peers {others}")
