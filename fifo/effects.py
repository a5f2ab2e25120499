"""Constructors for the Erlang-shaped effects the machine returns (ra.md §10).

Effects are plain tuples so that a trace of them reads like RabbitMQ's; atoms
are strings, ``undefined`` is ``None``.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "DELIVERY_SEND_MSG_OPTS",
    "SELF",
    "cancel_consumer_handler",
    "dead_lettered",
    "mod_call",
    "monitor_node",
    "monitor_process",
    "send_msg",
    "update_consumer_handler",
]

DELIVERY_SEND_MSG_OPTS = ["local", "ra_event"]

SELF = "$ra_server_self"
"""Stands for the executing Ra server's pid (upstream ``self()``) in effects
the pure machine cannot resolve; callbacks accept ``self_pid`` to replace it."""


def send_msg(pid: Any, msg: Any, opts: Any = None) -> tuple[Any, ...]:
    if opts is None:
        return ("send_msg", pid, msg)
    return ("send_msg", pid, msg, opts)


def monitor_process(pid: Any) -> tuple[str, str, Any]:
    return ("monitor", "process", pid)


def monitor_node(node: Any) -> tuple[str, str, Any]:
    return ("monitor", "node", node)


def mod_call(mod: str, fun: str, args: list[Any]) -> tuple[str, str, str, list[Any]]:
    return ("mod_call", mod, fun, args)


def dead_lettered(reason: str, kind: str, n: int) -> tuple[str, str, str, list[Any]]:
    return mod_call("rabbit_global_counters", "messages_dead_lettered",
                    [reason, "rabbit_quorum_queue", kind, n])


def cancel_consumer_handler(qname: Any, consumer_id: tuple[Any, Any]) -> tuple[Any, ...]:
    return mod_call("rabbit_quorum_queue", "cancel_consumer_handler", [qname, consumer_id])


def update_consumer_handler(
    qname: Any, tag: Any, pid: Any, meta: Any, active: bool, activity_status: str
) -> tuple[Any, ...]:
    return mod_call(
        "rabbit_quorum_queue",
        "update_consumer_handler",
        [qname, (tag, pid), False, meta.get("ack"), meta.get("prefetch"), active,
         activity_status, meta.get("args", [])],
    )
