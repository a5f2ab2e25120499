"""The brokers running in this OS process, by node name.

Operator commands and peer rpcs run as plain functions on a node
(`broker.ctl_ops`, `broker.limits.count_here`) and reach that node's broker
through this table. It sits below `broker.node`, which registers a broker here
once its tree is up, so the modules it calls back into can find the broker
without importing the node that imports them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import actors

if TYPE_CHECKING:
    from broker.node import BrokerNode

__all__ = ["RUNNING", "broker_of"]

RUNNING: dict[str, BrokerNode] = {}


def broker_of(node_name: str | None = None) -> BrokerNode:
    """The broker of the calling process's node (or of `node_name`)."""
    return RUNNING[node_name or actors.node()]
