"""What the dead-letter worker needs from the broker: topology, routing, publishing.

The worker lives in `fifo/` but re-publishes through exchanges and into target
queues, which belong to the channel package. `DeadLetterRouter` is that
boundary, shaped after the calls ``rabbit_fifo_dlx_worker`` makes
(``rabbit_amqqueue:lookup`` for the queue's dead-letter settings,
``rabbit_exchange:lookup/route``, ``rabbit_queue_type:deliver/handle_event``).
One router object serves one worker, so it may keep per-worker state such as
the sessions with target queues.

Publishing is asynchronous and confirmed: `publish` may return outcomes at
once, and later outcomes arrive in the worker's mailbox as
``("$gen_cast", ("queue_event", queue, event))``, which the worker hands back to
`handle_event`; Ra events of the sessions with target queues arrive as
``("ra_event", server, event)`` infos and are handed over whole, as
``handle_event(server, ("ra_event", server, event))``. Outcomes are actions
``("settled", queue, [correlation])`` (confirmed) and
``("rejected", queue, [correlation])`` (nacked); other actions are ignored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

__all__ = ["DeadLetterRouter", "RouterFactory"]


class DeadLetterRouter(Protocol):
    def lookup_topology(self, queue_resource: Any) -> tuple[Any, Any]:
        """``(dead_letter_exchange, dead_letter_routing_key)`` of the source queue
        (argument over policy); either may be ``None``."""
        ...

    def exchange_exists(self, exchange: Any) -> bool: ...

    def route(self, exchange: Any, routing_keys: Sequence[Any], msg: Any) -> list[Any]:
        """Names of the existing queues `msg` reaches through `exchange`."""
        ...

    def publish(self, queues: Sequence[Any], msg: Any, correlation: int) -> tuple[str, Any]:
        """Deliver to `queues` with publisher confirms.

        ``("ok", actions)`` with any outcomes already known, or
        ``("error", reason)``, which counts as a rejection by every queue.
        """
        ...

    def handle_event(self, queue: Any, event: Any) -> list[Any]:
        """Turn a ``queue_event`` for the worker into outcome actions."""
        ...

    def redelivers(self, queue: Any) -> bool:
        """Whether the session with `queue` resends unconfirmed messages by itself
        (true for quorum queues and streams), so the worker must not."""
        ...


class RouterFactory(Protocol):
    def __call__(self, queue_resource: Any) -> DeadLetterRouter: ...
