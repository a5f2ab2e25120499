"""Read-only views of the state: ``overview/1`` and the ``query_*`` functions of ``rabbit_fifo``.

Queries run on any member and never change the state.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from fifo import dlx
from fifo.consumers import active_consumer, consumer_id, find_consumer
from fifo.delivery import messages_ready, messages_total
from fifo.msg import Msg, msg_idx, unpack
from fifo.pq import PriorityQ
from fifo.records import Consumer, RabbitFifoState, erl_sorted, is_suspected

__all__ = [
    "all_nodes",
    "get_checked_out",
    "is_expired",
    "live_indexes",
    "num_checked_out",
    "overview",
    "query_consumer_count",
    "query_consumers",
    "query_messages_checked_out",
    "query_messages_ready",
    "query_messages_total",
    "query_notify_decorators_info",
    "query_peek",
    "query_processes",
    "query_single_active_consumer",
    "query_stat",
    "query_waiting_consumers",
    "ra_seq",
    "smallest_raft_index",
]


def num_checked_out(s: RabbitFifoState) -> int:
    return sum(len(c.checked_out) for c in s.consumers.values())


query_messages_checked_out = num_checked_out
query_messages_ready = messages_ready
query_messages_total = messages_total


def query_stat(s: RabbitFifoState) -> tuple[int, int]:
    return (messages_ready(s), len(s.consumers))


def query_processes(s: RabbitFifoState) -> list[Any]:
    pids = dict.fromkeys(s.enqueuers)
    pids.update(dict.fromkeys(c.cfg.pid for c in s.consumers.values()))
    return erl_sorted(pids)


def query_waiting_consumers(s: RabbitFifoState) -> list[tuple[Hashable, Consumer]]:
    return list(s.waiting_consumers)


def query_consumer_count(s: RabbitFifoState) -> int:
    # v8 counts only consumers with an atom status (not suspected, not timed out)
    up = sum(1 for c in s.consumers.values()
             if c.status != "suspected_down" and not isinstance(c.status, tuple))
    return up + len(s.waiting_consumers)


def query_single_active_consumer(s: RabbitFifoState) -> Any:
    if s.cfg.consumer_strategy != "single_active":
        return "disabled"
    active = active_consumer(s.consumers)
    if active is None:
        return ("error", "no_value")
    return ("value", consumer_id(active[1]))


def query_consumers(s: RabbitFifoState) -> dict[Hashable, tuple[Any, ...]]:
    """Consumer metrics rows, cancelled consumers excluded."""
    sac = s.cfg.consumer_strategy == "single_active"
    active_id = query_single_active_consumer(s) if sac else None

    def activity(c: Consumer) -> tuple[bool, Any]:
        if sac:
            if active_id == ("value", consumer_id(c)):
                return (True, "single_active")
            return (False, "waiting")
        if is_suspected(c.status):
            return (False, "suspected_down")
        return (True, c.status)  # v8 shows ("timeout", S) as it is, as upstream does

    def row(c: Consumer) -> tuple[Any, ...]:
        meta = c.cfg.meta
        active, status = activity(c)
        return (c.cfg.pid, c.cfg.tag, meta.get("ack"), meta.get("prefetch"), active, status,
                meta.get("args", []), meta.get("username"))

    out: dict[Hashable, tuple[Any, ...]] = {}
    for key in erl_sorted(s.consumers):
        c = s.consumers[key]
        if c.status != "cancelled":
            out[key] = row(c)
    for key, c in s.waiting_consumers:
        if c.status != "cancelled":
            out[key] = row(c)
    return out


def query_peek(pos: int, s: RabbitFifoState) -> Any:
    """The message at 1-based position `pos` in delivery order."""
    if pos <= 0:
        raise ValueError("position must be positive")
    i = 0
    for m in s.returns:
        i += 1
        if i == pos:
            return ("ok", unpack(m))
    for m in s.messages.drain_order():
        i += 1
        if i == pos:
            return ("ok", unpack(m))
    return ("error", "no_message_at_pos")


def query_notify_decorators_info(s: RabbitFifoState) -> tuple[Any, bool]:
    max_p: Any = "empty"
    for c in s.consumers.values():
        if c.credit > 0 and c.status == "up" and (max_p == "empty" or c.cfg.priority > max_p):
            max_p = c.cfg.priority
    return (max_p, messages_ready(s) == 0)


def get_checked_out(key: Any, first: int, last: int,
                    s: RabbitFifoState) -> list[tuple[int, tuple[int, Any]]]:
    found = find_consumer(key, s)
    if found is None:
        return []
    checked: dict[int, Msg] = found[1].checked_out
    return [(i, unpack(checked[i])) for i in range(first, last + 1) if i in checked]


def smallest_raft_index(s: RabbitFifoState) -> int | None:
    """Smallest raft index still referenced by the state (log truncation point)."""
    candidates = [
        i for i in (dlx.smallest_raft_index(s.dlx), s.messages.get_lowest_index(),
                    s.ra_indexes.smallest()) if i is not None
    ]
    return min(candidates) if candidates else None


def live_indexes(s: RabbitFifoState) -> list[int]:
    """Raft indexes of every message the state still refers to, ascending (v8).

    Ready messages of every level, returns, checked-out messages, dead letters
    waiting or with the worker, and delayed messages: the log entries a
    snapshot must keep below its index.
    """
    msgs: list[Msg] = [*s.returns, *s.messages.drain_order(), *s.delayed.values()]
    for c in s.consumers.values():
        msgs.extend(c.checked_out.values())
    msgs.extend(m for _r, m in s.dlx.discards)
    if s.dlx.consumer is not None:
        msgs.extend(m for _r, m in s.dlx.consumer.checked_out.values())
    return sorted(msg_idx(m) for m in msgs)


def ra_seq(indexes: list[int]) -> list[Any]:
    """Upstream's ``ra_seq`` of ascending `indexes`: highest first, runs of three or
    more as ``(first, last)``, shorter runs as single indexes."""
    out: list[Any] = []
    i = 0
    while i < len(indexes):
        j = i
        while j + 1 < len(indexes) and indexes[j + 1] == indexes[j] + 1:
            j += 1
        first, last = indexes[i], indexes[j]
        out[:0] = [(first, last)] if last - first >= 2 else list(reversed(indexes[i:j + 1]))
        i = j + 1
    return out


def all_nodes(s: RabbitFifoState) -> list[Any]:
    nodes = dict.fromkeys(c.cfg.pid.node for c in s.consumers.values())
    nodes.update(dict.fromkeys(p.node for p in s.enqueuers))
    nodes.update(dict.fromkeys(c.cfg.pid.node for _, c in s.waiting_consumers))
    return erl_sorted(nodes)


def is_expired(ts: int, s: RabbitFifoState) -> bool:
    """Queue TTL: idle for longer than ``expires`` with no live consumer (``tick/2``)."""
    if s.last_active is None or s.cfg.expires is None:
        return False
    live = any(not is_suspected(c.status) for c in s.consumers.values())
    return ts > s.last_active + s.cfg.expires and not live


def overview(s: RabbitFifoState) -> dict[str, Any]:
    cfg = s.cfg
    conf = {
        "name": cfg.name,
        "resource": cfg.resource,
        "dead_lettering_enabled": cfg.dead_letter_handler is not None,
        "dead_letter_handler": cfg.dead_letter_handler,
        "overflow_strategy": cfg.overflow_strategy,
        "max_length": cfg.max_length,
        "max_bytes": cfg.max_bytes,
        "consumer_strategy": cfg.consumer_strategy,
        "expires": cfg.expires,
        "msg_ttl": cfg.msg_ttl,
        "delivery_limit": cfg.delivery_limit,
    }
    q = s.messages.overview()
    if isinstance(s.messages, PriorityQ):
        levels = {
            "num_active_priorities": q["num_active_priorities"],
            "messages_by_priority": q["detail"],
        }
    else:
        levels = {
            "num_ready_messages_high": q["num_hi"],
            "num_ready_messages_normal": q["num_no"],
        }
    ov: dict[str, Any] = {
        "type": "rabbit_fifo",
        "config": conf,
        "num_consumers": len(s.consumers),
        "num_active_consumers": query_consumer_count(s),
        "num_checked_out": num_checked_out(s),
        "num_enqueuers": len(s.enqueuers),
        "num_ready_messages": messages_ready(s),
        **levels,
        "num_ready_messages_return": len(s.returns),
        "num_messages": messages_total(s),
        "num_release_cursors": 0,
        "enqueue_message_bytes": s.msg_bytes_enqueue,
        "checkout_message_bytes": s.msg_bytes_checkout,
        "release_cursors": [],
        "in_memory_message_bytes": 0,
        "num_in_memory_ready_messages": 0,
        "release_cursor_enqueue_counter": s.enqueue_count,
        "smallest_raft_index": smallest_raft_index(s),
        "smallest_raft_index_overview": {
            "message": s.messages.get_lowest_index(),
            "checked_out": s.ra_indexes.smallest(),
            "dlx": dlx.smallest_raft_index(s.dlx),
        },
    }
    if isinstance(s.messages, PriorityQ):
        ov["num_delayed_messages"] = len(s.delayed)
        ov["next_delayed_at"] = s.delayed.next_at()
        ov["last_delayed_at"] = s.delayed.last_at()
        conf["consumer_disconnected_timeout"] = cfg.consumer_disconnected_timeout
        conf["delayed_retry"] = cfg.delayed_retry
    if isinstance(s.messages, PriorityQ):
        # v8 has no release cursors nor in-memory counts
        for key in ("num_release_cursors", "release_cursors", "in_memory_message_bytes",
                    "num_in_memory_ready_messages", "release_cursor_enqueue_counter",
                    "smallest_raft_index_overview"):
            del ov[key]
    ov.update(dlx.overview(s.dlx))
    active = active_consumer(s.consumers)
    if active is not None:  # upstream reports it for competing queues too
        ov["single_active_consumer_id"] = consumer_id(active[1])
        ov["single_active_consumer_key"] = active[0]
        ov["single_active_num_waiting_consumers"] = len(s.waiting_consumers)
    return ov
