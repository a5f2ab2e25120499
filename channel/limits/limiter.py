"""The limiter of one channel (`rabbit_limiter`): channel-wide (global) QoS.

With the deprecated `global_qos` feature permitted (4.0–4.2 default), a
`basic.qos(global=true)` sets a prefetch limit for the whole channel. RabbitMQ
keeps it in a process of its own, supervised with the channel and its writer,
so the channel supervisor's shape (and its failure behaviour) is the same with
or without the feature. Quorum queues do not support a channel-wide limit (a
consume on an active limiter is refused with 540), so for warren the limiter
only keeps the limit and answers who asks; the channel checks its own copy.
"""

from __future__ import annotations

from typing import Any

import actors

__all__ = ["limit_prefetch", "limiter_main"]


def limit_prefetch(limiter: Any, count: int) -> None:
    """`rabbit_limiter:limit_prefetch` (count > 0) / `unlimit_prefetch` (count 0)."""
    actors.send(limiter, ("limit_prefetch", count))


def limiter_main() -> None:
    prefetch_count = 0
    while True:
        msg = actors.receive()
        match msg:
            case ("limit_prefetch", int() as count):
                prefetch_count = max(count, 0)
            case ("info", pid, tag):
                actors.send(pid, (tag, {"prefetch_count": prefetch_count,
                                        "active": prefetch_count > 0}))
