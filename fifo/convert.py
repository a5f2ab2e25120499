"""``{machine_version, 7, 8}``: turn a machine-7 state into a machine-8 one (``convert_v7_to_v8``).

Applied once per replica when the cluster's effective version goes from 7 to 8.
Every message is kept where it was: the two-level queue becomes the 32-level
one (``hi`` to level 9 and normal to level 4, each in its order), returns and
checked-out messages stay, and dead letters are untouched. Consumers get
machine 8's fields: the default consumer timeout, a lock expiration on every
checked-out message counted from the conversion, and ``suspected_down``
becomes ``{suspected_down, up}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from fifo.fifo_q import FifoQ
from fifo.pq import DEFAULT_PRIORITY, PriorityQ
from fifo.records import Consumer, RabbitFifoState
from fifo.versions import V8

__all__ = ["HI_PRIORITY", "convert_v7_to_v8"]

#: the level machine 7's high-priority messages land on
HI_PRIORITY = 9


def _messages(q: FifoQ) -> PriorityQ:
    pq = PriorityQ()
    for m in q.hi:
        pq.in_(HI_PRIORITY, m)
    for m in q.no:
        pq.in_(DEFAULT_PRIORITY, m)
    return pq


def _consumer(c: Consumer, lock: int) -> None:
    timeout = V8.default_consumer_timeout
    c.cfg = replace(c.cfg, timeout=timeout)
    c.lock_expirations = dict.fromkeys(c.checked_out, lock)
    if c.status == "suspected_down":
        c.status = ("suspected_down", "up")


def convert_v7_to_v8(meta: Mapping[str, Any], s: RabbitFifoState) -> RabbitFifoState:
    """Convert `s` in place (and return it); time comes from the command's meta."""
    if not isinstance(s.messages, FifoQ):
        return s  # already a machine-8 state
    ts = meta["system_time"]
    assert V8.default_consumer_timeout is not None
    lock = ts + V8.default_consumer_timeout
    for c in s.consumers.values():
        _consumer(c, lock)
    for _key, c in s.waiting_consumers:
        _consumer(c, lock)
    s.messages = _messages(s.messages)
    s.cfg = replace(s.cfg, consumer_disconnected_timeout=V8.default_disconnected_timeout,
                    delayed_retry=V8.default_delayed_retry)
    # upstream sets it even when nothing is checked out (a timer that finds nothing)
    s.next_consumer_timeout = lock
    s.last_command_time = ts
    return s
