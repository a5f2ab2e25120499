"""JSON shapes of RabbitMQ's management API for what the broker holds.

Every function reads the node's copy of the metadata (`BrokerNode.view`) or calls
`broker.ctl_ops` (the functions `warren ctl` runs) in a process of the node, and
returns the rows with RabbitMQ's keys. Password hashes never appear here.
"""

from __future__ import annotations

from typing import Any

from broker import ctl_ops, ctl_queues
from broker.metadata import classic_queues
from broker.node import BrokerNode
from channel.access.auth import User
from management.calls import in_node

__all__ = ["bindings", "channel_names", "channels", "classic_consumer_row", "connections",
           "consumer_row", "exchange_exists", "exchanges", "node_row",
           "permissions", "policies", "queue_exists", "queue_row", "queues", "user_row",
           "vhosts"]

def vhosts(broker: BrokerNode, names: list[str]) -> list[dict[str, Any]]:
    rows = in_node(broker.node, ctl_queues.list_vhosts,
                   ("name", "default_queue_type", "description", "tags"))
    running = {n: "running" for n in _running(broker)}
    return [{"name": r["name"], "description": r["description"], "tags": r["tags"],
             "default_queue_type": r["default_queue_type"],
             "metadata": {"description": r["description"], "tags": r["tags"]},
             "tracing": False, "cluster_state": running}
            for r in rows if r["name"] in names]


def _running(broker: BrokerNode) -> list[str]:
    me = broker.node.name
    return sorted({me, *(n for n in broker.up_nodes if n in broker.config.all_nodes)})


def user_row(user: User) -> dict[str, Any]:
    return {"name": user.name, "tags": list(user.tags), "limits": dict(user.limits)}


def permissions(broker: BrokerNode) -> list[dict[str, Any]]:
    users = broker.view.state.users
    return [{"user": name, "vhost": vh, "configure": p.configure, "write": p.write,
             "read": p.read} for name, u in sorted(users.items())
            for vh, p in sorted(u.permissions.items())]


def node_row(broker: BrokerNode, name: str) -> dict[str, Any]:
    running = name in _running(broker)
    return {"name": name, "type": "disc", "running": running,
            "cluster_links": [], "partitions": [], "being_drained": False,
            "mem_alarm": False, "disk_free_alarm": False,
            "rates_mode": "basic", "uptime": 0,
            "applications": [{"name": "rabbit", "description": "RabbitMQ",
                              "version": broker.release.server.version}],
            "metrics_gc_queue_length": dict.fromkeys(_GC_QUEUES, 0)}


_GC_QUEUES = ("connection_closed", "channel_closed", "consumer_deleted", "exchange_deleted",
              "queue_deleted", "vhost_deleted", "node_node_deleted",
              "channel_consumer_deleted")


def queue_exists(broker: BrokerNode, vhost: str, name: str) -> bool:
    """Whether the vhost has the queue, of any type (the node's copy of the metadata)."""
    state = broker.view.state
    local = getattr(broker.backend, "queues", None)  # the node-local test backend
    return ((vhost, name) in state.queues or (vhost, name) in classic_queues(state)
            or (isinstance(local, dict) and (vhost, name) in local))


def exchange_exists(broker: BrokerNode, vhost: str, name: str) -> bool:
    vh = broker.view.state.topology.vhosts.get(vhost)
    return vh is not None and name in vh.exchanges


def _arguments(broker: BrokerNode, vhost: str, name: str) -> dict[str, Any]:
    state = broker.view.state
    record: Any = state.queues.get((vhost, name)) or classic_queues(state).get((vhost, name))
    return dict(record.arguments) if record is not None else {}


def queue_row(broker: BrokerNode, vhost: str, row: dict[str, Any]) -> dict[str, Any]:
    """A `list_queues` row in the API's keys (a count the queue did not give is 0)."""
    ready = row.get("messages_ready")
    out: dict[str, Any] = {
        "name": row["name"], "vhost": vhost, "type": row["type"],
        "durable": bool(row.get("durable", False)),
        "auto_delete": bool(row.get("auto_delete", False)),
        "exclusive": row.get("exclusive") is True, "arguments": _arguments(
            broker, vhost, row["name"]),
        "node": row["leader"], "state": row.get("state", "running"),
        "messages": row.get("messages") or 0,
        "messages_ready": (row.get("messages") if ready is None else ready) or 0,
        "messages_unacknowledged": row.get("messages_unacknowledged") or 0,
        "consumers": row.get("consumers") or 0, "policy": row.get("policy"),
        "effective_policy_definition": {}}
    if row["type"] == "quorum":
        out.update(leader=row["leader"], members=row["members"],
                   online=[m for m in row["members"] if m in _running(broker)])
    elif row["type"] == "classic":
        out.update(_classic_fields(broker, vhost, row["name"]))
    return out


def _classic_fields(broker: BrokerNode, vhost: str, name: str) -> dict[str, Any]:
    """What RabbitMQ adds to a classic queue's row: the tag of the consumer that holds
    it exclusively (null when none) and, for an exclusive queue, its owning connection."""
    consumers = in_node(broker.node, ctl_queues.classic_consumers, vhost, name)
    tags = [c["tag"] for c in consumers if c["exclusive"]]
    out: dict[str, Any] = {"exclusive_consumer_tag": tags[0] if tags else None}
    record = classic_queues(broker.view.state).get((vhost, name))
    if record is not None and record.owner is not None:
        out["owner_pid_details"] = {"name": str(record.owner)}
    return out


def queues(broker: BrokerNode, names: list[str]) -> list[dict[str, Any]]:
    rows = []
    for vhost in names:
        rows += [queue_row(broker, vhost, r) for r in in_node(broker.node,
                                                              ctl_ops.list_queues, vhost)]
    return rows


def exchanges(broker: BrokerNode, names: list[str]) -> list[dict[str, Any]]:
    vhs = broker.view.state.topology.vhosts
    return [{"name": x.name, "vhost": vhost, "type": x.type, "durable": x.durable,
             "auto_delete": x.auto_delete, "internal": x.internal,
             "arguments": dict(x.arguments), "user_who_performed_action": "rmq-internal"}
            for vhost in names if vhost in vhs
            for x in sorted(vhs[vhost].exchanges.values(), key=lambda x: x.name)]


def bindings(broker: BrokerNode, names: list[str]) -> list[dict[str, Any]]:
    """`warren ctl list_bindings`'s rows: each queue's binding to the default exchange
    first, as RabbitMQ lists them."""
    rows: list[dict[str, Any]] = []
    for vhost in names:
        rows += [_binding(vhost, r["source_name"], r["destination_kind"],
                          r["destination_name"], r["routing_key"], r["arguments"])
                 for r in in_node(broker.node, ctl_queues.list_bindings, vhost,
                                  _BINDING_COLUMNS)]
    return rows


_BINDING_COLUMNS = ("source_name", "destination_name", "destination_kind", "routing_key",
                    "arguments")


def _binding(vhost: str, source: str, kind: str, destination: str, key: str,
             arguments: Any) -> dict[str, Any]:
    return {"source": source, "vhost": vhost, "destination": destination,
            "destination_type": kind, "routing_key": key, "arguments": dict(arguments),
            "properties_key": props_key(key, dict(arguments))}


def props_key(key: str, arguments: dict[str, Any]) -> str:
    """RabbitMQ's binding id in URLs: the routing key, or ``~`` when it is empty
    (bindings with arguments get a hash suffix there; here they are listed only)."""
    return "~" if key == "" and not arguments else key.replace("%", "%25")


def policies(broker: BrokerNode, names: list[str]) -> list[dict[str, Any]]:
    rows = []
    for vhost in names:
        rows += in_node(broker.node, ctl_ops.list_policies, vhost)
    return rows


def consumer_row(vhost: str, queue: str, c: dict[str, Any],
                 channel_names: dict[str, str] | None = None) -> dict[str, Any]:
    """A `management.deliveries` row in the shape of RabbitMQ's `/api/consumers`."""
    name = (channel_names or {}).get(c["pid"], c["pid"])
    return {"consumer_tag": c["tag"], "queue": {"name": queue, "vhost": vhost},
            "channel_details": {"name": name, "node": c["consumer_node"]},
            "ack_required": c["ack"], "prefetch_count": c["prefetch"],
            "active": c["status"] == "up", "activity_status": c["status"],
            "exclusive": False, "priority": c["priority"], "arguments": {}}


def classic_consumer_row(vhost: str, queue: str, c: dict[str, Any],
                         channel_names: dict[str, str]) -> dict[str, Any]:
    """A `ctl_queues.classic_consumers` row in the shape of RabbitMQ's `/api/consumers`;
    the channel is named as `/api/channels` names it when it is on this node."""
    channel = c["channel"]
    return {"consumer_tag": c["tag"], "queue": {"name": queue, "vhost": vhost},
            "channel_details": {"name": channel_names.get(channel, channel)},
            "ack_required": c["ack_required"], "prefetch_count": c["prefetch"],
            "active": c["active"], "activity_status": "up" if c["active"] else "waiting",
            "exclusive": c["exclusive"], "priority": c["priority"],
            "arguments": c["arguments"]}


def channel_names(broker: BrokerNode) -> dict[str, str]:
    """This node's channel pids to the names `/api/channels` gives them."""
    return {r["pid"]: _channel_name(r) for r in in_node(broker.node, ctl_ops.list_channels)}


def _channel_name(r: dict[str, Any]) -> str:
    return f"{r['connection']} ({r['number']})"


def connections(broker: BrokerNode) -> list[dict[str, Any]]:
    out = []
    for r in in_node(broker.node, ctl_ops.list_connections):
        host, _, port = str(r["peer"]).rpartition(":") if r.get("peer") else ("", "", "")
        out.append({"name": r["pid"], "node": broker.node.name, "user": r["user"],
                    "vhost": r["vhost"], "state": r["state"] or "running",
                    "channels": r["channels"] or 0, "protocol": "AMQP 0-9-1",
                    "type": "network", "peer_host": host, "peer_port": port})
    return out


def channels(broker: BrokerNode) -> list[dict[str, Any]]:
    return [{"name": _channel_name(r), "number": r["number"],
             "node": broker.node.name, "connection_details": {"name": r["connection"]},
             "state": r["state"] or "running", "consumer_count": r["consumers"] or 0,
             "messages_unacknowledged": r["messages_unacknowledged"] or 0,
             "messages_unconfirmed": r["messages_unconfirmed"] or 0}
            for r in in_node(broker.node, ctl_ops.list_channels)]
