"""Consumers of one classic queue, after ``rabbit_queue_consumers``.

Consumers wait in per-priority lines. A delivery goes to the first consumer of
the highest-priority line that can take it and that consumer moves to the back
of its line (round robin). A consumer found unable to take a message leaves
its line and is *blocked*; when it can take messages again it rejoins at the
back. Per channel the queue also tracks the unacked messages (in id order),
the deliveries the writer has not reported yet (``notify_sent``), and the
allowance of the channel's global-qos limiter.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["UNSENT_MESSAGE_LIMIT", "ChannelRecord", "Consumer", "Consumers"]

UNSENT_MESSAGE_LIMIT = 200
"""``classic_queue_consumer_unsent_message_limit``: deliveries a channel's writer
may lag behind before the queue stops delivering to that channel."""

Key = tuple[Hashable, str]


@dataclass(slots=True)
class Consumer:
    channel: Hashable
    tag: str
    ack_required: bool
    prefetch: int
    priority: int
    exclusive: bool
    args: tuple[tuple[str, Any], ...]
    seq: int
    """Registration order (single active consumer picks the earliest)."""
    unacked: int = 0

    @property
    def key(self) -> Key:
        return (self.channel, self.tag)

    def has_prefetch_room(self) -> bool:
        return not self.ack_required or self.prefetch == 0 or self.unacked < self.prefetch


@dataclass(slots=True)
class ChannelRecord:
    """What the queue knows about one channel (upstream ``#cr{}``)."""

    unacked: dict[int, tuple[str, int] | None] = field(default_factory=dict)
    """msg id -> (consumer tag, consumer registration number), ``None`` for ``basic.get``.

    The registration number tells a cancelled consumer's messages from those of a
    later consumer that reuses its tag on the same channel."""
    consumer_count: int = 0
    unsent: int = 0
    limiter_credit: int | None = None

    def can_send(self, ack_required: bool) -> bool:
        if self.unsent >= UNSENT_MESSAGE_LIMIT:
            return False
        return not (ack_required and self.limiter_credit is not None
                    and self.limiter_credit <= 0)

    def idle(self) -> bool:
        """Nothing left for which the queue must watch the channel."""
        return not self.unacked and self.consumer_count == 0 and self.unsent == 0


class Consumers:
    """All consumers of a queue: waiting lines per priority, blocked ones, channels."""

    def __init__(self) -> None:
        self.by_key: dict[Key, Consumer] = {}
        self._lines: dict[int, deque[Key]] = {}
        self._blocked: list[Key] = []
        self.channels: dict[Hashable, ChannelRecord] = {}
        self._next_seq = 0

    def __len__(self) -> int:
        return len(self.by_key)

    def __iter__(self) -> Iterator[Consumer]:
        return iter(self.by_key.values())

    def add(self, channel: Hashable, tag: str, *, ack_required: bool, prefetch: int,
            priority: int, exclusive: bool, args: tuple[tuple[str, Any], ...],
            waiting: bool) -> Consumer:
        """Register a consumer; ``waiting`` ones (SAC standbys) join no line yet."""
        c = Consumer(channel, tag, ack_required, prefetch, priority, exclusive, args,
                     self._next_seq)
        self._next_seq += 1
        assert c.key not in self.by_key, c.key
        self.by_key[c.key] = c
        self.channel(channel).consumer_count += 1
        if not waiting:
            self._lines.setdefault(priority, deque()).append(c.key)
        return c

    def channel(self, channel: Hashable) -> ChannelRecord:
        return self.channels.setdefault(channel, ChannelRecord())

    def remove(self, key: Key) -> Consumer:
        c = self.by_key.pop(key)
        line = self._lines.get(c.priority)
        if line is not None and key in line:
            line.remove(key)
        if key in self._blocked:
            self._blocked.remove(key)
        self.channels[c.channel].consumer_count -= 1
        assert self.channels[c.channel].consumer_count >= 0
        return c

    def activate(self, key: Key) -> None:
        """Put a standby consumer into its line (single active consumer hand-over)."""
        c = self.by_key[key]
        self._lines.setdefault(c.priority, deque()).append(key)

    def in_line(self, key: Key) -> bool:
        c = self.by_key[key]
        return key in self._lines.get(c.priority, ()) or key in self._blocked

    def able(self, c: Consumer) -> bool:
        return c.has_prefetch_room() and self.channels[c.channel].can_send(c.ack_required)

    def next_consumer(self) -> Consumer | None:
        """The consumer the next message goes to, moved to the back of its line.

        Consumers met on the way that cannot take a message are blocked.
        """
        lines = self._lines
        order = lines if len(lines) == 1 else sorted(
            (p for p, line in lines.items() if line), reverse=True)
        for prio in order:
            line = lines[prio]
            while line:
                key = line.popleft()
                c = self.by_key[key]
                if self.able(c):
                    line.append(key)
                    return c
                self._blocked.append(key)
        return None

    def unblock(self) -> None:
        """Consumers able again rejoin the back of their line, in blocking order."""
        still: list[Key] = []
        for key in self._blocked:
            c = self.by_key[key]
            if self.able(c):
                self._lines.setdefault(c.priority, deque()).append(key)
            else:
                still.append(key)
        self._blocked = still

    def any_able(self) -> bool:
        return any(self.able(self.by_key[k]) for line in self._lines.values() for k in line)
