"""The machine's records (``rabbit_fifo.hrl``), keeping upstream record and field names.

The state is mutable: ``apply`` updates it in place, as a Ra machine owns its
state exclusively. Anything that must outlive the next command (a checkpoint,
a release cursor, a test's "before" picture) is taken with `copy_state`, which
copies every container but shares the immutable message references.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from fifo.delayed import Delayed
from fifo.fifo_q import FifoQ
from fifo.index import RaIndexes
from fifo.msg import Msg
from fifo.pq import PriorityQ
from fifo.service_queue import ServiceQueue

__all__ = [
    "Cfg",
    "Consumer",
    "ConsumerCfg",
    "DlxConsumer",
    "Enqueuer",
    "RabbitFifoDlx",
    "RabbitFifoState",
    "copy_state",
    "erl_key",
    "erl_sorted",
    "is_suspected",
]

ConsumerStatus = Literal["up", "suspected_down", "cancelled", "quiescing"] | tuple[str, str]
"""v7: an atom; v8 also ``("suspected_down", Inner)`` and ``("timeout", Inner)``, `Inner`
the status the consumer returns to (``up``, ``cancelled`` or ``quiescing``)."""

Lifetime = Literal["once", "auto"]
"""A consumer's credit lifetime: ``once`` (credit given once) or ``auto`` (renewed)."""


@dataclass(frozen=True, slots=True)
class ConsumerCfg:
    """``#consumer_cfg{}``: what a checkout fixed about a consumer."""

    meta: Mapping[str, Any] = field(default_factory=dict)
    pid: Any = None
    tag: Any = None
    credit_mode: Any = None  # ("simple_prefetch", Max) | ("credited", DC) | "credited"
    lifetime: Lifetime = "once"
    priority: int = 0
    #: v8: ms a delivered message may stay unsettled (``None`` in v7)
    timeout: int | None = None


@dataclass(slots=True)
class Consumer:
    """``#consumer{}``; ``checked_out`` maps msg id to message reference.

    v8 pairs every checked-out message with its lock expiration
    (``{LockExpiration, Msg}`` upstream); warren keeps those times beside the
    messages in ``lock_expirations`` so both versions share one ``checked_out``.
    """

    cfg: ConsumerCfg
    status: ConsumerStatus = "up"
    next_msg_id: int = 0
    checked_out: dict[int, Msg] = field(default_factory=dict)
    credit: int = 0
    delivery_count: int = 0
    #: v8: the drain flag of the last ``credit`` command
    drain: bool = False
    #: v8: ids released by the consumer timeout that the client has not settled yet
    timed_out_msg_ids: list[int] = field(default_factory=list)
    #: v8: msg id -> system time after which the consumer timeout releases it
    lock_expirations: dict[int, int] = field(default_factory=dict)

    def copy(self) -> Consumer:
        return replace(self, checked_out=dict(self.checked_out),
                       timed_out_msg_ids=list(self.timed_out_msg_ids),
                       lock_expirations=dict(self.lock_expirations))


@dataclass(slots=True)
class Enqueuer:
    """``#enqueuer{}``: per-publisher sequence state."""

    next_seqno: int = 1
    unused: tuple[()] = ()
    status: Literal["up", "suspected_down"] = "up"
    blocked: int | None = None
    unused_1: tuple[()] = ()
    unused_2: tuple[()] = ()

    def copy(self) -> Enqueuer:
        return replace(self)


@dataclass(frozen=True, slots=True)
class Cfg:
    """``#cfg{}`` (v7 field order); ``None`` stands for ``undefined``."""

    name: Any = None
    resource: Any = None
    unused_1: tuple[()] = ()
    dead_letter_handler: Any = None  # None | ("at_most_once", (M, F, A)) | "at_least_once"
    become_leader_handler: Any = None
    overflow_strategy: Literal["drop_head", "reject_publish"] = "drop_head"
    max_length: int | None = None
    max_bytes: int | None = None
    consumer_strategy: Literal["competing", "single_active"] = "competing"
    delivery_limit: int | None = None
    expires: int | None = None
    msg_ttl: int | None = None
    #: v8 (unused slots in v7): ms a suspected consumer keeps its messages
    consumer_disconnected_timeout: int | None = None
    #: v8: ``"disabled"`` or ``(mode, min_ms, max_ms)``
    delayed_retry: Any = None


@dataclass(slots=True)
class DlxConsumer:
    """``#dlx_consumer{}``; ``checked_out`` maps dlx msg id to ``(reason, msg)``."""

    pid: Any
    prefetch: int
    checked_out: dict[int, tuple[str, Msg]] = field(default_factory=dict)
    next_msg_id: int = 0

    def copy(self) -> DlxConsumer:
        return replace(self, checked_out=dict(self.checked_out))


@dataclass(slots=True)
class RabbitFifoDlx:
    """``#rabbit_fifo_dlx{}``: messages dead-lettered at-least-once."""

    consumer: DlxConsumer | None = None
    discards: deque[tuple[str, Msg]] = field(default_factory=deque)
    ra_indexes: RaIndexes = field(default_factory=RaIndexes)
    msg_bytes: int = 0
    msg_bytes_checkout: int = 0

    def copy(self) -> RabbitFifoDlx:
        return RabbitFifoDlx(
            consumer=None if self.consumer is None else self.consumer.copy(),
            discards=self.discards.copy(),
            ra_indexes=self.ra_indexes.copy(),
            msg_bytes=self.msg_bytes,
            msg_bytes_checkout=self.msg_bytes_checkout,
        )


@dataclass(slots=True)
class RabbitFifoState:
    """``#rabbit_fifo{}`` in v7 field order."""

    cfg: Cfg = field(default_factory=Cfg)
    messages: FifoQ | PriorityQ = field(default_factory=FifoQ)
    messages_total: int = 0
    returns: deque[Msg] = field(default_factory=deque)
    enqueue_count: int = 0
    enqueuers: dict[Any, Enqueuer] = field(default_factory=dict)
    ra_indexes: RaIndexes = field(default_factory=RaIndexes)
    unused_1: tuple[()] = ()
    consumers: dict[Hashable, Consumer] = field(default_factory=dict)
    service_queue: ServiceQueue = field(default_factory=ServiceQueue)
    dlx: RabbitFifoDlx = field(default_factory=RabbitFifoDlx)
    msg_bytes_enqueue: int = 0
    msg_bytes_checkout: int = 0
    waiting_consumers: list[tuple[Hashable, Consumer]] = field(default_factory=list)
    last_active: int | None = None
    msg_cache: tuple[int, Any] | None = None
    unused_2: tuple[()] = ()
    #: v8: the earliest lock expiration of any checked-out message (None: infinity)
    next_consumer_timeout: int | None = None
    #: v8: ``system_time`` of the last applied command
    last_command_time: int = 0
    #: v8: returned messages waiting for their retry time
    delayed: Delayed = field(default_factory=Delayed)
    #: v2: stored ``(release_cursor, Idx, DehydratedState)`` effects, oldest first
    #: (None in every later version, which snapshot by checkpoints instead)
    release_cursors: deque[Any] | None = None
    #: v2: ``{Base, Current}`` enqueues between stored release cursors
    release_cursor_interval: tuple[int, int] = (2048, 2048)


def is_suspected(status: ConsumerStatus) -> bool:
    """v7 ``suspected_down`` or v8 ``{suspected_down, Inner}``."""
    return status == "suspected_down" or (isinstance(status, tuple)
                                          and status[0] == "suspected_down")


def copy_state(s: RabbitFifoState) -> RabbitFifoState:
    """An independent copy sharing only immutable values (messages, cfg, headers)."""
    return RabbitFifoState(
        cfg=s.cfg,
        messages=s.messages.copy(),
        messages_total=s.messages_total,
        returns=s.returns.copy(),
        enqueue_count=s.enqueue_count,
        enqueuers={p: e.copy() for p, e in s.enqueuers.items()},
        ra_indexes=s.ra_indexes.copy(),
        consumers={k: c.copy() for k, c in s.consumers.items()},
        service_queue=s.service_queue.copy(),
        dlx=s.dlx.copy(),
        msg_bytes_enqueue=s.msg_bytes_enqueue,
        msg_bytes_checkout=s.msg_bytes_checkout,
        waiting_consumers=[(k, c.copy()) for k, c in s.waiting_consumers],
        last_active=s.last_active,
        msg_cache=s.msg_cache,
        next_consumer_timeout=s.next_consumer_timeout,
        last_command_time=s.last_command_time,
        delayed=s.delayed.copy(),
        release_cursors=None if s.release_cursors is None else s.release_cursors.copy(),
        release_cursor_interval=s.release_cursor_interval,
    )


def erl_key(term: Any) -> tuple[int, Any]:
    # Erlang term order: numbers < atoms < references < pids < tuples < lists < binaries.
    if isinstance(term, bool):
        return (1, str(term))
    if isinstance(term, int | float):
        return (0, term)
    if isinstance(term, str):
        return (1, term)
    if isinstance(term, tuple):
        return (4, tuple(erl_key(t) for t in term))
    if isinstance(term, bytes):
        return (6, term)
    return (3, term)


def erl_sorted(items: Iterable[Any]) -> list[Any]:
    """Sort like Erlang term order where upstream iterates a map by key.

    Falls back to the given order when the terms cannot be compared, which only
    happens for test doubles that define no ordering.
    """
    lst = list(items)
    try:
        return sorted(lst, key=erl_key)
    except TypeError:
        return lst
