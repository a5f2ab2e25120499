"""What a classic queue process did, as history rows (`queue_events`), while recorded.

A run's analysis judges loss, duplication and order from what the clients saw; what
a queue promises depends on what kind of queue it is, which the clients cannot see.
So a queue process records its declaration (type, durability, exclusivity; the row's
node is its home node), and per message what it did: took it (`queue_enqueued`,
persistent or not), handed it out (`queue_delivered`, with the consumer's tag and the
`redelivered` flag), had it settled (`queue_settled`: acked, rejected, requeued, or
returned when its channel went), dropped or dead-lettered it (`queue_dropped`: TTL,
length limit, reject without requeue, purge), and its deletion (`queue_deleted`).

Everything here runs only while a trace sink is installed (`actors.trace`), and reads
the core without changing it. Message ids are the workload's (header
``x-warren-id``), found by the hook the node lends (`message_id`): the classic package
does not know how a channel's message stores its headers.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

import actors
from actors import trace
from classic import commands as c
from classic import effects as e
from classic.config import QueueConfig
from classic.queue import ClassicQueue
from classic.ready import Entry

__all__ = ["QUEUE_TYPE", "Before", "MessageId", "before", "declared", "record"]

QUEUE_TYPE = "classic"

MessageId = Callable[[Any], int | None]
"""A stored message's workload id (None when it carries none)."""

@dataclass(frozen=True)
class Before:
    """The queue's messages a command may settle or remove, taken before it runs."""

    entries: dict[int, Entry]
    named: set[int]


def _emit(cfg: QueueConfig, kind: str, **fields: Any) -> None:
    trace.emit(kind, emitter=f"classic/{cfg.vhost}/{cfg.name}", queue=cfg.name,
               queue_type=QUEUE_TYPE, **fields)


def declared(cfg: QueueConfig, recovered: int = 0) -> None:
    """The queue (re)started on this node: its kind, and how many messages it recovered."""
    _emit(cfg, "queue_declared", durable=cfg.durable, exclusive=cfg.exclusive_owner is not None,
          auto_delete=cfg.auto_delete, value=recovered, reason=str(actors.self()))


def before(core: ClassicQueue, command: c.Command) -> Before:
    """The messages `command` may settle or take out of the queue, read before it runs
    (afterwards the core has forgotten them). `named`: the ones it settles (an ack's or
    a reject's ids, a channel's unacked messages when it goes or recovers); `entries`:
    those, and in a queue without a dead-letter exchange every message, since any
    command may expire, push out or purge some (dead letters are recorded from their
    effect). Entries are kept as they are; ids are decoded only for the ones recorded."""
    live = core.live
    match command:
        case c.Ack(msg_ids=ids) | c.Reject(msg_ids=ids):
            named: Iterable[int] = ids
        case c.NotifyDown(channel=channel) | c.Recover(channel=channel):
            record = core.consumers.channels.get(channel)
            named = list(record.unacked) if record is not None else []
        case c.OwnerDown() | c.Delete() | c.Stat():
            return Before({}, set())
        case _:
            named = ()
    keep = {s for s in named if s in live}
    if core.config.dead_letter_exchange is None:
        return Before(dict(live), keep)
    return Before({s: live[s] for s in keep}, keep)


def record(core: ClassicQueue, command: c.Command, reply: e.Reply, effects: list[e.Effect],
           seen: Before, message_id: MessageId, now: int) -> None:
    """The rows of one command, in the order it did things: what the queue took, what
    it had settled, handed out, dead-lettered, dropped, and its deletion."""
    cfg = core.config
    if isinstance(command, c.Deliver):
        _enqueued(core, command, effects, message_id)
    outcome = _outcome(command)
    for seq in sorted(seen.named):
        _emit(cfg, "queue_settled", msg_id=message_id(seen.entries[seq].content),
              queue_seq=seq, outcome=outcome)
    delivered: set[int] = set()
    deleted: e.Deleted | None = None
    for effect in effects:
        match effect:
            case e.Deliver(channel=channel, tag=tag, ack_required=ack, messages=messages):
                for m in messages:
                    _delivered(cfg, m, message_id, channel, tag, ack)
                    delivered.add(m.msg_id)
            case e.DeadLetter(reason=reason, messages=messages):
                for m in messages:
                    _emit(cfg, "queue_dropped", msg_id=message_id(m.content),
                          queue_seq=m.msg_id, reason=reason, outcome="dead_lettered")
            case e.Deleted():
                deleted = effect
    if isinstance(reply, e.GetOk):
        m = reply.delivery
        _delivered(cfg, m, message_id, getattr(command, "channel", None), None,
                   getattr(command, "ack_required", True))
        delivered.add(m.msg_id)
    if deleted is None:
        _dropped(core, command, seen, delivered, message_id, now)
    else:
        _emit(cfg, "queue_deleted", reason=deleted.reason, value=deleted.message_count)


def _outcome(command: c.Command) -> str:
    """What a settling command did with the messages it named."""
    match command:
        case c.Ack():
            return "acked"
        case c.Reject(requeue=True) | c.Recover():
            return "requeued"
        case c.Reject(requeue=False):
            return "rejected"
        case c.NotifyDown():
            return "returned"
    return ""


def _enqueued(core: ClassicQueue, cmd: c.Deliver, effects: list[e.Effect],
              message_id: MessageId) -> None:
    refused = any(isinstance(x, e.RejectPublish) and x.channel == cmd.channel
                  and x.seq == cmd.seq for x in effects) and cmd.seq is not None
    _emit(core.config, "queue_enqueued", msg_id=message_id(cmd.content),
          queue_seq=core.next_msg_id - 1, persistent=cmd.persistent,
          channel=str(cmd.channel), outcome="rejected" if refused else "ok")


def _delivered(cfg: QueueConfig, m: e.Delivery, message_id: MessageId, channel: Hashable,
               tag: str | None, ack_required: bool) -> None:
    _emit(cfg, "queue_delivered", msg_id=message_id(m.content), queue_seq=m.msg_id,
          channel=None if channel is None else str(channel), consumer_tag=tag,
          redelivered=m.redelivered, ack_required=ack_required)


def _dropped(core: ClassicQueue, command: c.Command, seen: Before, delivered: set[int],
             message_id: MessageId, now: int) -> None:
    """Drops of the messages `command` removed without a consumer's ack in a queue
    without a dead-letter exchange: expired, pushed out by a length limit, rejected
    without requeue, purged."""
    cfg = core.config
    if cfg.dead_letter_exchange is not None:
        return
    live = core.live
    acked = isinstance(command, c.Ack)
    for seq, entry in seen.entries.items():
        if seq in live or seq in delivered or (acked and seq in seen.named):
            continue
        rejected = isinstance(command, c.Reject) and seq in seen.named
        reason = "rejected" if rejected else _gone_by(command, entry.expires_at, now)
        _emit(cfg, "queue_dropped", msg_id=message_id(entry.content), queue_seq=seq,
              reason=reason, outcome="dropped")


def _why_gone(expires_at: int | None, now: int) -> str:
    return "expired" if expires_at is not None and expires_at <= now else "maxlen"


def _gone_by(command: c.Command, expires_at: int | None, now: int) -> str:
    """Why a ready message left without a consumer: purged, expired or pushed out."""
    return "purged" if isinstance(command, c.Purge) else _why_gone(expires_at, now)
