"""The settings one classic queue runs with, as its declare arguments give them.

The channel validates declare arguments (and policies) before a queue exists;
the core receives the already-checked, effective values. Names follow the
queue arguments (``x-message-ttl`` -> ``message_ttl``) so a reader can map each
field to what a client declared.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["MAX_PRIORITY", "Overflow", "QueueConfig", "resource"]

Overflow = Literal["drop-head", "reject-publish", "reject-publish-dlx"]

MAX_PRIORITY = 255
"""The largest ``x-max-priority`` RabbitMQ accepts."""


def resource(vhost: str, name: str) -> str:
    """Render a queue the way RabbitMQ's error texts do: ``queue 'q' in vhost '/'``."""
    return f"queue '{name}' in vhost '{vhost}'"


@dataclass(frozen=True, slots=True)
class QueueConfig:
    """Effective configuration of one classic queue (``#amqqueue{}`` plus policy)."""

    name: str
    vhost: str = "/"
    durable: bool = True
    auto_delete: bool = False
    exclusive_owner: object | None = None
    expires: int | None = None
    message_ttl: int | None = None
    dead_letter_exchange: str | None = None
    dead_letter_routing_key: str | None = None
    max_length: int | None = None
    max_length_bytes: int | None = None
    overflow: Overflow = "drop-head"
    max_priority: int | None = None
    single_active_consumer: bool = False

    def __post_init__(self) -> None:
        assert self.expires is None or self.expires > 0, self.expires
        assert self.message_ttl is None or self.message_ttl >= 0, self.message_ttl
        assert self.max_length is None or self.max_length >= 0
        assert self.max_length_bytes is None or self.max_length_bytes >= 0
        assert self.max_priority is None or 0 <= self.max_priority <= MAX_PRIORITY
        assert self.overflow in ("drop-head", "reject-publish", "reject-publish-dlx")
        assert self.dead_letter_routing_key is None or self.dead_letter_exchange is not None

    @property
    def rs(self) -> str:
        return resource(self.vhost, self.name)

    @property
    def effective_durable(self) -> bool:
        """An exclusive queue is never durable, whatever the declare said."""
        return self.durable and self.exclusive_owner is None

    @property
    def top_priority(self) -> int:
        """Highest priority level: ``x-max-priority`` 0 behaves like 1; none means one level."""
        if self.max_priority is None:
            return 0
        return max(1, self.max_priority)

    def clamp_priority(self, priority: int | None) -> int:
        """A message's level: absent -> 0, above the maximum -> the maximum."""
        if priority is None or priority < 0:
            return 0
        return min(priority, self.top_priority)
