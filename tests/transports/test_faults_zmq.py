"""A pause limited to some peers, on the ZeroMQ transport between OS processes.

The broker's `pause_node` hook pauses a node towards its cluster peers only,
so that the operator's client node can still reach it (and resume it). The
pytest process is the paused node; the children are bare node processes,
killed by the `cluster` fixture whatever happens.
"""

from __future__ import annotations

import sys

import cloudpickle

from actors import Pid, api
from tests.transports.test_zmq import Cluster, cluster, forwarder, recv
from transports.faults import FaultRules

cloudpickle.register_pickle_by_value(sys.modules[__name__])

__all__ = ["cluster"]


def relay(to: Pid) -> None:
    """Pass `(target, msg)` on to target, then tell `to` it was passed."""
    while True:
        target, msg = api.receive()
        api.send(target, msg)
        api.send(to, ("relayed", msg))


def test_a_node_paused_towards_a_peer_still_talks_to_the_others(cluster: Cluster) -> None:
    faults = FaultRules()
    a = cluster.local(faults=faults)
    peer, other = cluster.child(), cluster.child()
    with a.attached() as me:
        my = me.pid
        fwd = api.spawn(forwarder, my, node=peer.name)
        rel = api.spawn(relay, my, node=other.name)
        api.send(fwd, "before")
        assert recv() == ("fwd", fwd, "before")

        faults.pause(a.name, towards=[peer.name])
        for i in range(10):
            api.send(fwd, ("out", i))  # held on this side: the peer never sees them yet
        for i in range(10):
            # reaches the peer through the other node; its forwards wait here
            api.send(rel, (fwd, ("in", i)))
        assert [recv(match=lambda m: m[0] == "relayed")[1] for _ in range(10)] == [
            ("in", i) for i in range(10)]
        assert api.receive(300, match=lambda m: m[0] == "fwd") is api.TIMEOUT

        faults.resume(a.name)
        got = [recv()[2] for _ in range(20)]
        # nothing was lost and each direction kept its order
        assert [m for m in got if m[0] == "in"] == [("in", i) for i in range(10)]
        assert [m for m in got if m[0] == "out"] == [("out", i) for i in range(10)]
