"""The health checks: alarms (cluster-wide and this node's) and quorum-critical queues.

A passing check answers 200 ``{"status":"ok"}``, a failing one 503
``{"status":"failed","reason":...}`` with what failed, as RabbitMQ's do.
"""

from __future__ import annotations

from typing import Any

from broker import ctl_ops
from broker.node import BrokerNode
from management.calls import in_node

__all__ = ["alarms", "quorum_critical"]

Answer = tuple[int, dict[str, Any]]


def alarms(broker: BrokerNode, local: bool) -> Answer:
    found = in_node(broker.node, ctl_ops.alarms)
    if local:
        found = [a for a in found if a.get("node") == broker.node.name]
    if not found:
        return 200, {"status": "ok"}
    where = "the node" if local else "the cluster"
    return 503, {"status": "failed", "reason": f"There are alarms in effect in {where}",
                 "alarms": found}


def quorum_critical(broker: BrokerNode) -> Answer:
    """Quorum queues with a member here that would lose their majority without it."""
    me = broker.node.name
    if len(broker.config.all_nodes) == 1:
        return 200, {"status": "ok", "reason": "single node cluster"}
    up = {me, *broker.up_nodes}
    critical = []
    for vhost in broker.view.state.vhosts:
        for r in broker.registry.list(vhost):
            members = [n for _s, n in r.servers]
            if me not in members or len(members) < 2:
                continue
            online_without_me = sum(1 for n in members if n in up and n != me)
            if online_without_me < len(members) // 2 + 1:
                critical.append({"name": r.name, "readable_name": f"queue '{r.name}' in "
                                 f"vhost '{vhost}'", "node": me, "replicas": members,
                                 "virtual_host": vhost})
    if not critical:
        return 200, {"status": "ok"}
    return 503, {"status": "failed", "reason": "There are quorum queues that would lose "
                 "their quorum if the target node is shut down", "queues": critical}
