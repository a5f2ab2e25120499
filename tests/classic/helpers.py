"""A small driver for the classic queue core: a clock, publishes by label, and
readers that turn effects into labels so tests compare plain lists."""

from __future__ import annotations

from typing import Any

from classic import ClassicQueue, QueueConfig
from classic import commands as c
from classic import effects as e

PUB = "pub-ch"
CH1 = "ch1"
CH2 = "ch2"


class Q:
    """One queue and its clock; every call returns ``(reply, effects)``."""

    def __init__(self, now: int = 0, **config: Any) -> None:
        config.setdefault("name", "q")
        self.now = now
        self.queue = ClassicQueue(QueueConfig(**config), now)
        self.seq = 0

    def do(self, command: c.Command) -> tuple[e.Reply, list[e.Effect]]:
        return self.queue.apply(command, self.now)

    def publish(self, label: str, *, confirm: bool = True, persistent: bool = False,
                priority: int | None = None, expiration: int | None = None,
                size: int | None = None, channel: Any = PUB) -> tuple[e.Reply, list[e.Effect]]:
        """Publish a message whose content is ``label`` (its size defaults to len(label))."""
        seq = None
        if confirm:
            self.seq += 1
            seq = self.seq
        return self.do(c.Deliver(channel, seq, "ex", ("rk",), len(label) if size is None else size,
                                 persistent, priority, expiration, label))

    def publish_all(self, *labels: str, **kw: Any) -> None:
        for label in labels:
            self.publish(label, **kw)

    def consume(self, channel: Any, tag: str, **kw: Any) -> tuple[e.Reply, list[e.Effect]]:
        return self.do(c.BasicConsume(channel, tag, **kw))

    def ids(self, *labels: str) -> tuple[int, ...]:
        """Message ids of the live messages with these labels."""
        by_label = {x.content: x.msg_id for x in self.queue.live.values()}
        return tuple(by_label[label] for label in labels)

    def ready(self) -> list[str]:
        return [x.content for x in self.queue.ready]


def delivered(effects: list[e.Effect]) -> list[tuple[Any, str, str, bool]]:
    """``(channel, tag, label, redelivered)`` of every basic.deliver, in order."""
    return [(x.channel, x.tag, m.content, m.redelivered)
            for x in effects if isinstance(x, e.Deliver) for m in x.messages]


def labels(effects: list[e.Effect]) -> list[str]:
    return [label for _, _, label, _ in delivered(effects)]


def confirms(effects: list[e.Effect]) -> list[int]:
    return [s for x in effects if isinstance(x, e.Confirm) for s in x.seqs]


def dead(effects: list[e.Effect]) -> list[tuple[str, str]]:
    """``(reason, label)`` of every dead-lettered copy."""
    return [(x.reason, m.content) for x in effects if isinstance(x, e.DeadLetter)
            for m in x.messages]
