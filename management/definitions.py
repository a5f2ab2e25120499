"""`/api/definitions`: export and import of users, vhosts, permissions, policies,
queues, exchanges and bindings in RabbitMQ's file format.

The export carries each user's password hash and hashing algorithm, as RabbitMQ's
does (only administrators may read it): an import restores users with their
passwords that way. Queues, exchanges and bindings are declared over AMQP as the
importing user.
"""

from __future__ import annotations

from typing import Any

from broker import ctl_ops
from broker.node import BrokerNode
from channel.access.passwords import DEFAULT_HASHING_ALGORITHM
from management import actions, objects
from management.amqp import AmqpTarget
from management.calls import in_node

__all__ = ["export", "load"]


def export(broker: BrokerNode) -> dict[str, Any]:
    state = broker.view.state
    names = list(state.vhosts)
    version = broker.release.server.version
    return {
        "rabbit_version": version, "rabbitmq_version": version,
        "product_name": "RabbitMQ", "product_version": version,
        "users": [{"name": u.name, "password_hash": u.password_hash,
                   "hashing_algorithm": u.hashing_algorithm or DEFAULT_HASHING_ALGORITHM,
                   "tags": list(u.tags), "limits": dict(u.limits)}
                  for _n, u in sorted(state.users.items())],
        "vhosts": [{"name": v, "limits": [], "metadata": {"description": "", "tags": []}}
                   for v in names],
        "permissions": objects.permissions(broker),
        "topic_permissions": [], "parameters": [], "global_parameters": [],
        "policies": objects.policies(broker, names),
        "queues": [{k: q[k] for k in ("name", "vhost", "durable", "auto_delete",
                                       "arguments")}
                   for q in objects.queues(broker, names)],
        "exchanges": [{k: x[k] for k in ("name", "vhost", "type", "durable", "auto_delete",
                                         "internal", "arguments")}
                      for x in objects.exchanges(broker, names)
                      if x["name"] and not x["name"].startswith("amq.")],
        "bindings": [{k: b[k] for k in ("source", "vhost", "destination", "destination_type",
                                        "routing_key", "arguments")}
                     for b in objects.bindings(broker, names) if b["source"]],
    }


def _users(broker: BrokerNode, users: list[dict[str, Any]]) -> None:
    known = broker.view.state.users
    for u in users:
        name, algo = u["name"], u.get("hashing_algorithm", DEFAULT_HASHING_ALGORITHM)
        if name in known:
            in_node(broker.node, ctl_ops.change_password_hash, name, u["password_hash"], algo)
        else:
            in_node(broker.node, ctl_ops.add_user, name, u["password_hash"], algo)
        tags = u.get("tags") or []
        tags = [t for t in tags.split(",") if t] if isinstance(tags, str) else list(tags)
        in_node(broker.node, ctl_ops.set_user_tags, name, tags)


def load(broker: BrokerNode, body: dict[str, Any], user: str, password: str) -> None:
    """Import what `body` holds, in RabbitMQ's order: users, permissions, policies,
    then queues, exchanges and bindings."""
    _users(broker, body.get("users") or [])
    for p in body.get("permissions") or []:
        in_node(broker.node, ctl_ops.set_permissions, p["vhost"], p["user"],
                p["configure"], p["write"], p["read"])
    for p in body.get("policies") or []:
        in_node(broker.node, ctl_ops.set_policy, p["vhost"], p["name"], p["pattern"],
                dict(p["definition"]), int(p.get("priority", 0)), p.get("apply-to", "all"))

    def target(vhost: str) -> AmqpTarget:
        return AmqpTarget(broker.config.amqp_host, broker.amqp_port, vhost, user, password)

    for q in body.get("queues") or []:
        actions.declare_queue(target(q["vhost"]), q["name"], q)
    for x in body.get("exchanges") or []:
        actions.declare_exchange(target(x["vhost"]), x["name"], x)
    for b in body.get("bindings") or []:
        kind = "q" if b.get("destination_type") == "queue" else "e"
        actions.bind(target(b["vhost"]), b["source"], kind, b["destination"], b)
