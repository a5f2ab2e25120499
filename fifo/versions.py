"""What differs between the ``rabbit_fifo`` machine versions warren builds.

The machine is one module for every version (as upstream's ``which_module``
hands each log entry to the module of its effective version); the few places
where version 8 (RabbitMQ 4.3) behaves differently from versions 4-7
(RabbitMQ 4.0-4.2) ask the `Rules` of the version being applied, so no handler
carries a scattered version test of its own. Version 2 (RabbitMQ 3.10) differs in
more places: its rules send the commands it applies its own way to
`fifo.v2_commands`, as upstream hands them to that version's module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from fifo import mc
from fifo.fifo_q import FifoQ
from fifo.pq import DEFAULT_PRIORITY, PriorityQ, clamp_priority

__all__ = ["V2", "MessageQueue", "Rules", "rules_for", "rules_of", "rules_of_state"]

MessageQueue = FifoQ | PriorityQ

#: v7 (and earlier) keep the size of a message of any size in a packed reference
#: internally (the wire never carries one); v8 packs only sizes that fit 15 bits
PACKED_SZ_MAX_V8 = 0x7FFF
DEFAULT_CONSUMER_TIMEOUT_MS = 1_800_000
DEFAULT_DISCONNECTED_TIMEOUT_MS = 60_000


def _v7_priority(raw: Any) -> Any:
    p = mc.priority(raw)
    return "hi" if isinstance(p, int) and not isinstance(p, bool) and p > 4 else "no"


def _v8_priority(raw: Any) -> Any:
    return clamp_priority(mc.priority(raw))


@dataclass(frozen=True, slots=True)
class Rules:
    """Version-selected behaviour of the queue machine."""

    version: int
    #: a fresh ready-message queue (``rabbit_fifo_q`` or ``rabbit_fifo_pq``)
    new_messages: Callable[[], MessageQueue]
    #: the bucket an enqueued message goes to
    message_priority: Callable[[Any], Any]
    #: a message's size for its header and the byte counters, from the container's
    #: ``(metadata_size, payload_size)``: the payload before 4.3, both since
    message_size: Callable[[tuple[int, int]], int]
    #: the bucket of a message re-appended by the ``requeue`` command
    requeue_priority: Any
    #: expiry takes the expired prefix of returns and of every level in one pass
    batch_expiry: bool
    #: largest header size kept in a packed reference (``None``: any)
    packed_size_max: int | None
    #: deliveries read on the consumer's node carry the references as stored
    #: (packed integers included); before, always ``(idx, header)``
    packed_on_wire: bool
    #: raw (non-container) bodies get the queue's message TTL
    raw_bodies_get_queue_ttl: bool
    #: purge also drops the at-least-once dead letters and counts them
    purge_dead_letters: bool
    #: at-most-once dead letters carry the ``acquired_count`` annotation
    annotate_acquired_count: bool
    #: the header counter tested against the delivery limit: every give-back
    #: (``acquired_count``) or failed deliveries only (``delivery_count``)
    delivery_limit_counter: str
    #: a consumer's timeout when its checkout names none (``None``: no consumer
    #: timeout in the machine; the channel enforces it)
    default_consumer_timeout: int | None
    #: config defaults of the keys only machine 8 has
    default_disconnected_timeout: int | None
    default_delayed_retry: Any
    #: ``update_config`` takes ``created`` as last activity only while none is known
    last_active_from_created_once: bool
    #: the state keeps the ``system_time`` of the last applied command
    records_command_time: bool
    #: a consumer whose process is suspected keeps its messages until the
    #: ``consumer_disconnected_timeout`` fires (before: returned at once)
    suspects_keep_messages: bool
    #: the queue releases messages held past the consumer timeout (before 4.3
    #: the channel enforced it by closing)
    consumer_timeout_in_machine: bool
    #: returned messages may wait (delayed retry, ``x-opt-delivery-time``)
    delayed_retry: bool
    #: 4.3's shapes: the checkout reply names the consumer strategy and tells a
    #: single active consumer it is active, an ``e`` without a publisher is an
    #: untracked enqueue, a new leader arms no relative expiry timer
    checkout_reply_names_strategy: bool
    #: consumers asking for link-state properties get ``#{active => Bool}`` in
    #: their credit replies, also on activation and deactivation
    link_state_properties: bool
    #: 3.10's machine (version 2): the commands whose handling differs are applied
    #: by `fifo.v2_commands`, as upstream hands them to the module of that version
    v2_commands: bool = False
    #: 3.10: every give-back adds one to ``delivery_count`` (there is no
    #: ``acquired_count``), and the command, not each message, gives credit back
    every_return_counts: bool = False
    #: an enqueued message's ``delivery_count`` annotation (a dead letter's count,
    #: say) starts its count; 3.10 has no such annotation and starts every message at 0
    enqueue_takes_delivery_count: bool = True


V7 = Rules(version=7, new_messages=FifoQ, message_priority=_v7_priority,
           message_size=lambda size: size[1],
           requeue_priority="no", batch_expiry=False, packed_size_max=None,
           packed_on_wire=False,
           raw_bodies_get_queue_ttl=False, purge_dead_letters=False,
           annotate_acquired_count=False, delivery_limit_counter="acquired_count",
           default_consumer_timeout=None, default_disconnected_timeout=None,
           default_delayed_retry=None, last_active_from_created_once=False,
           records_command_time=False, suspects_keep_messages=False,
           consumer_timeout_in_machine=False, delayed_retry=False,
           checkout_reply_names_strategy=False, link_state_properties=False)

V8 = Rules(version=8, new_messages=PriorityQ, message_priority=_v8_priority,
           message_size=lambda size: size[0] + size[1],
           requeue_priority=DEFAULT_PRIORITY, batch_expiry=True,
           packed_size_max=PACKED_SZ_MAX_V8, packed_on_wire=True,
           raw_bodies_get_queue_ttl=True,
           purge_dead_letters=True, annotate_acquired_count=True,
           delivery_limit_counter="delivery_count",
           default_consumer_timeout=DEFAULT_CONSUMER_TIMEOUT_MS,
           default_disconnected_timeout=DEFAULT_DISCONNECTED_TIMEOUT_MS,
           default_delayed_retry="disabled", last_active_from_created_once=True,
           records_command_time=True, suspects_keep_messages=True,
           consumer_timeout_in_machine=True, delayed_retry=True,
           checkout_reply_names_strategy=True, link_state_properties=True)


#: machine 2 (RabbitMQ 3.10): one FIFO without priorities, every return counts
V2 = replace(V7, version=2, message_priority=lambda _raw: "no", v2_commands=True,
             delivery_limit_counter="delivery_count", every_return_counts=True,
             enqueue_takes_delivery_count=False)


def rules_for(version: int) -> Rules:
    """The rules of machine `version` (4-7 share RabbitMQ 4.0-4.2's)."""
    if version <= 2:
        return V2
    return V8 if version >= 8 else V7


def rules_of(meta: Mapping[str, Any]) -> Rules:
    """The rules of the version an entry is applied with (``Meta.machine_version``)."""
    return rules_for(meta.get("machine_version", 7))


def rules_of_state(s: Any) -> Rules:
    """The rules a state was built under: a 32-level message queue is machine 8's.

    For the few helpers that see the state but not the command's meta.
    """
    if getattr(s, "release_cursors", None) is not None:
        return V2  # only machine 2 stores release cursors in its state
    return V8 if isinstance(s.messages, PriorityQ) else V7
