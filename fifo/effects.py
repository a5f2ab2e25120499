"""Constructors for the effects the machine returns, as `ra.effect_types` records.

Each record equals the Erlang-shaped tuple, so a trace of them reads like
RabbitMQ's; atoms are strings, ``undefined`` is ``None``.
"""

from __future__ import annotations

from typing import Any

from ra.effect_types import ModCall, Monitor, SendMsg, SendMsgOpts

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


def send_msg(pid: Any, msg: Any, opts: Any = None) -> SendMsg | SendMsgOpts:
    if opts is None:
        return SendMsg("send_msg", pid, msg)
    return SendMsgOpts("send_msg", pid, msg, opts)


def monitor_process(pid: Any) -> Monitor:
    return Monitor("monitor", "process", pid)


def monitor_node(node: Any) -> Monitor:
    return Monitor("monitor", "node", node)


def mod_call(mod: str, fun: str, args: list[Any]) -> ModCall:
    return ModCall("mod_call", mod, fun, args)


def dead_lettered(reason: str, kind: str, n: int) -> ModCall:
    return mod_call("rabbit_global_counters", "messages_dead_lettered",
                    [reason, "rabbit_quorum_queue", kind, n])


def cancel_consumer_handler(qname: Any, consumer_id: tuple[Any, Any]) -> ModCall:
    return mod_call("rabbit_quorum_queue", "cancel_consumer_handler", [qname, consumer_id])


def update_consumer_handler(
    qname: Any, tag: Any, pid: Any, meta: Any, active: bool, activity_status: str
) -> ModCall:
    return mod_call(
        "rabbit_quorum_queue",
        "update_consumer_handler",
        [qname, (tag, pid), False, meta.get("ack"), meta.get("prefetch"), active,
         activity_status, meta.get("args", [])],
    )
