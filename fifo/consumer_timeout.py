"""Machine 8's consumer (ack) timeout, enforced inside the queue.

Before 4.3 the channel closed itself when a delivery stayed unacknowledged for
longer than ``consumer_timeout``. In machine 8 every checked-out message
carries a lock expiration (delivery time plus the consumer's ``timeout``); the
leader arms ``{timer, evaluate_consumer_timeout, T, {abs, true}}`` for the
earliest one, and when it fires every expired message is returned (not as a
failed delivery), the consumer is told with ``{released, QName, CTag, Ids,
timeout}`` and gets nothing more until the client has settled, returned,
discarded or modified every one of those ids. A single active consumer that
timed out with nothing left checked out gives way to the next one.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from fifo.consumers import (
    activate_next_consumer,
    active_effects,
    add_waiting,
    return_one,
)
from fifo.disconnect import update_consumer_status
from fifo.effects import send_msg
from fifo.records import Consumer, RabbitFifoState, erl_sorted
from ra.effect_types import Effect

__all__ = [
    "evaluate",
    "maybe_untimeout",
    "next_consumer_timeout",
    "settle_waiting",
    "timer_effect",
]

Meta = Mapping[str, Any]


def next_consumer_timeout(s: RabbitFifoState) -> int | None:
    """The earliest lock expiration of any checked-out message (``None``: infinity)."""
    times = [t for c in s.consumers.values() for t in c.lock_expirations.values()]
    return min(times) if times else None


def maybe_untimeout(c: Consumer, msg_ids: Any) -> None:
    """The client answered for timed-out ids; once all are answered the consumer resumes."""
    if not (isinstance(c.status, tuple) and c.status[0] == "timeout"):
        return
    left = [i for i in c.timed_out_msg_ids if i not in set(msg_ids)]
    if left:
        c.timed_out_msg_ids = left
    else:
        c.status = c.status[1]  # type: ignore[assignment]
        c.timed_out_msg_ids = []


def evaluate(meta: Meta, s: RabbitFifoState) -> list[Effect]:
    """``{timeout, evaluate_consumer_timeout}``: release every expired lock."""
    now = meta["system_time"]
    effects: list[Effect] = []
    for key in erl_sorted(s.consumers):
        c = s.consumers.get(key)
        if c is None:
            continue
        ids = sorted(i for i, t in c.lock_expirations.items()
                     if now >= t and i in c.checked_out)
        if not ids:
            continue
        c.timed_out_msg_ids = sorted([*c.timed_out_msg_ids, *ids])
        update_consumer_status("timeout", c)
        effects.insert(0, send_msg(c.cfg.pid, ("released", s.cfg.resource, c.cfg.tag, ids,
                                               "timeout"), "ra_event"))
        for msg_id in ids:
            if msg_id in c.checked_out:
                return_one(meta, msg_id, c.checked_out[msg_id], False, {}, s, effects, key)
    if s.cfg.consumer_strategy == "single_active":
        for key in erl_sorted(s.consumers):
            c = s.consumers[key]
            if isinstance(c.status, tuple) and not c.checked_out:
                del s.consumers[key]
                s.waiting_consumers = add_waiting((key, c), s.waiting_consumers)
                effects[:0] = active_effects(s, c, False, "waiting")
    s.next_consumer_timeout = next_consumer_timeout(s)
    activate_next_consumer(s, effects)
    return effects


def settle_waiting(key: Any, msg_ids: Any, s: RabbitFifoState) -> bool | None:
    """A waiting consumer answering for its timed-out ids (``handle_waiting_timedout_consumers``).

    Returns ``None`` when `key` names no timed-out waiting consumer, ``True``
    when it has answered for every id (it may be activated), ``False`` otherwise.
    """
    if s.cfg.consumer_strategy != "single_active":
        return None
    found: tuple[Hashable, Consumer] | None = None
    for k, c in s.waiting_consumers:
        if k == key or (isinstance(key, tuple) and (c.cfg.tag, c.cfg.pid) == key):
            found = (k, c)
            break
    if found is None:
        return None
    k, c = found
    if not (isinstance(c.status, tuple) and c.status[0] == "timeout"):
        return None
    maybe_untimeout(c, msg_ids)
    s.waiting_consumers = add_waiting((k, c), s.waiting_consumers)
    return not c.timed_out_msg_ids


def timer_effect(s: RabbitFifoState, armed: int | None) -> Effect | None:
    """The leader's timer for the earliest lock, when it is earlier than the one armed."""
    t = s.next_consumer_timeout
    if t is None or (armed is not None and t >= armed):
        return None
    return ("timer", "evaluate_consumer_timeout", t, {"abs": True})
