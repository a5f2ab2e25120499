"""The limiter of one channel (`rabbit_limiter`): channel-wide (global) QoS.

With the deprecated `global_qos` feature permitted (4.0–4.2 default), a
`basic.qos(global=true)` sets a prefetch limit for the whole channel. RabbitMQ
keeps it in a process of its own, supervised with the channel and its writer,
so the channel supervisor's shape (and its failure behaviour) is the same with
or without the feature.

Classic queues ask it before ack-required deliveries to the channel's
consumers, as `rabbit_limiter:can_send/3` is asked: a call ``("can_send",
want)`` is granted as many deliveries as the limit leaves room for (all of
them while no limit is set) and counts them; the channel tells it how many of
those deliveries were settled (``ack``, upstream's `rabbit_limiter:ack/2`),
and a queue that was refused some is sent ``("resume", limiter)`` once there is
room again, as upstream's limiter resumes the queues it blocked. A queue gives
back what it was granted and could not deliver the same way. Quorum queues do
not support a channel-wide limit (a consume on an active limiter is refused
with 540).
"""

from __future__ import annotations

from typing import Any

import actors
from actors import gen_server

__all__ = ["ack", "limit_prefetch", "limiter_main"]


def limit_prefetch(limiter: Any, count: int) -> None:
    """`rabbit_limiter:limit_prefetch` (count > 0) / `unlimit_prefetch` (count 0)."""
    actors.send(limiter, ("limit_prefetch", count))


def ack(limiter: Any, count: int) -> None:
    """`rabbit_limiter:ack`: `count` deliveries the limiter granted were settled."""
    gen_server.cast(limiter, ("ack", count))


class _Limit:
    """The count of granted, unsettled deliveries against the channel's limit."""

    def __init__(self) -> None:
        self.prefetch_count = 0
        self.volume = 0
        #: queue processes refused a delivery, to resume once there is room
        self.blocked: set[Any] = set()

    def can_send(self, queue: Any, want: int) -> int:
        if self.prefetch_count == 0:
            return want
        granted = max(0, min(want, self.prefetch_count - self.volume))
        self.volume += granted
        if granted < want:
            self.blocked.add(queue)
        return granted

    def settled(self, count: int) -> None:
        self.volume = max(0, self.volume - count)
        self.maybe_resume()

    def maybe_resume(self) -> None:
        if self.blocked and (self.prefetch_count == 0 or self.volume < self.prefetch_count):
            me = actors.self()
            for queue in self.blocked:
                actors.send(queue, ("resume", me))
            self.blocked.clear()


def limiter_main() -> None:
    limit = _Limit()
    while True:
        msg = actors.receive()
        match msg:
            case ("limit_prefetch", int() as count):
                limit.prefetch_count = max(count, 0)
                limit.maybe_resume()
            case ("$gen_call", (pid, _ref) as from_, ("can_send", int() as want)):
                gen_server.reply(from_, limit.can_send(pid, want))
            case ("$gen_cast", ("ack", int() as count)):
                limit.settled(count)
            case ("info", pid, tag):
                actors.send(pid, (tag, {"prefetch_count": limit.prefetch_count,
                                        "active": limit.prefetch_count > 0,
                                        "volume": limit.volume}))
