"""Machine 8's disconnected consumers: ``noconnection``, ``nodeup`` and the per-consumer timer.

Before 4.3 a consumer on a node that became unreachable lost its messages at
once (they were returned, counted as failed, and redelivered elsewhere). In
machine 8 only the process named by the ``noconnection`` is suspected: it keeps
its messages, gets nothing new, and a timer ``{consumer_disconnected_timeout,
Key}`` (the queue's ``consumer_disconnected_timeout``, 60 s by default) is
armed. If the node comes back first the consumer resumes where it was; if the
timer fires its messages are returned (not counted as failed), and a single
active consumer hands over to the next one.

A status is paired with the one it returns to: ``("suspected_down", "up")``,
``("timeout", "quiescing")``. Effects are listed in upstream's order, which is
observable in machine 8.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from fifo.consumers import (
    activate_next_consumer,
    active_effects,
    find_consumer,
    mark_enqueuers,
    return_all,
    sort_waiting,
    update_or_remove_con,
)
from fifo.effects import monitor_node, monitor_process, send_msg
from fifo.records import Consumer, RabbitFifoState, erl_sorted
from ra.effect_types import Effect

__all__ = [
    "disconnected_timeout",
    "noconnection",
    "nodeup",
    "suspected_pids_for",
    "update_consumer_status",
]

Meta = Mapping[str, Any]


def _is_suspected(c: Consumer) -> bool:
    return isinstance(c.status, tuple) and c.status[0] == "suspected_down"


def update_consumer_status(target: str, c: Consumer) -> None:
    """Pair or unpair a status (``update_consumer_status``).

    ``up`` restores the inner status, or ``("timeout", Inner)`` while timed-out
    ids wait for the client. Upstream turns a second ``suspected_down`` into the
    bare atom, which neither the timer nor ``nodeup`` recognises any more and so
    strands the consumer; warren keeps the pair instead.
    """
    st = c.status
    if target in ("suspected_down", "timeout"):
        if isinstance(st, str):
            c.status = (target, st)
        elif target == "suspected_down" and st[0] == "timeout":
            c.status = ("suspected_down", st[1])
        return
    if target == "up" and isinstance(st, tuple):
        c.status = ("timeout", st[1]) if c.timed_out_msg_ids else st[1]  # type: ignore[assignment]
        return
    c.status = target  # type: ignore[assignment]


def _waiting_with_status(match: Any, s: RabbitFifoState,
                         target: str) -> list[tuple[Hashable, Consumer]]:
    """``update_waiting_consumer_status``: by pid or by node; cancelled entries dropped."""
    out = []
    for key, c in s.waiting_consumers:
        if c.status == "cancelled":
            continue
        if c.cfg.pid == match or c.cfg.pid.node == match:
            update_consumer_status(target, c)
        out.append((key, c))
    return sort_waiting(out)


def noconnection(meta: Meta, pid: Any, s: RabbitFifoState) -> list[Effect]:
    """``{down, Pid, noconnection}``: suspect this process only; it keeps its messages."""
    effects: list[Effect] = []
    timeout = s.cfg.consumer_disconnected_timeout
    assert timeout is not None  # a machine-8 state always has one
    for key in erl_sorted(s.consumers):
        c = s.consumers[key]
        if c.cfg.pid != pid:
            continue
        update_consumer_status("suspected_down", c)
        effects[:0] = [*active_effects(s, c, False, "suspected_down"),
                       ("timer", ("consumer_disconnected_timeout", key), timeout)]
    enq = s.enqueuers.get(pid)
    if enq is not None:
        enq.status = "suspected_down"
    s.waiting_consumers = _waiting_with_status(pid, s, "suspected_down")
    s.last_active = meta["system_time"]
    return [monitor_node(pid.node), *effects]


def suspected_pids_for(node: Any, s: RabbitFifoState) -> list[Any]:
    """Suspected consumers, enqueuers and waiting consumers on `node`, upstream's order."""
    cons = [s.consumers[k].cfg.pid for k in erl_sorted(s.consumers)
            if _is_suspected(s.consumers[k]) and s.consumers[k].cfg.pid.node == node]
    enqs = [p for p in erl_sorted(s.enqueuers)
            if s.enqueuers[p].status == "suspected_down" and p.node == node]
    waiting = [c.cfg.pid for _, c in s.waiting_consumers
               if _is_suspected(c) and c.cfg.pid.node == node]
    return [*reversed(waiting), *reversed(enqs), *reversed(cons)]


def nodeup(meta: Meta, node: Any, s: RabbitFifoState) -> list[Effect]:
    """``{nodeup, Node}``: re-monitor only the suspected processes and restore them."""
    effects: list[Effect] = []
    for p in suspected_pids_for(node, s):
        effects += [monitor_process(p), send_msg(p, "leader_change", "ra_event")]
    mark_enqueuers(node, s, "up")
    competing = s.cfg.consumer_strategy == "competing"
    for key in erl_sorted(s.consumers):
        c = s.consumers.get(key)
        if c is None or not _is_suspected(c) or c.cfg.pid.node != node:
            continue
        update_consumer_status("up", c)
        new: list[Effect] = [("timer", ("consumer_disconnected_timeout", key), "infinity")]
        if competing:
            new.extend(active_effects(s, c, True, c.status))
        effects[:0] = new
        update_or_remove_con(meta, key, c, s)
    s.waiting_consumers = _waiting_with_status(node, s, "up")
    activate_next_consumer(s, effects)
    return effects


def disconnected_timeout(meta: Meta, key: Any, s: RabbitFifoState) -> list[Effect] | None:
    """``{timeout, {consumer_disconnected_timeout, Key}}``; ``None`` when nothing to do.

    The consumer's messages are returned (not as failed deliveries). A single
    active consumer also leaves the active slot for the end of the waiting list
    (unless it was cancelled) and the next consumer is activated.
    """
    found = find_consumer(key, s)
    if found is None or not _is_suspected(found[1]):
        return None
    ckey, c = found
    inner = c.status[1]
    effects: list[Effect] = []
    return_all(meta, s, effects, ckey, c, False)
    if s.cfg.consumer_strategy == "competing":
        update_or_remove_con(meta, ckey, c, s)
        return effects
    held = s.consumers.pop(ckey, None)
    if held is not None and inner != "cancelled":
        held.status = ("suspected_down", "up")
        s.waiting_consumers = [*s.waiting_consumers, (ckey, held)]
    s.last_active = meta["system_time"]
    activate_next_consumer(s, effects)
    return effects
