"""The queue logic of one classic queue (``rabbit_amqqueue_process``) as a pure core.

`ClassicQueue.apply(command, now)` returns ``(reply, effects)`` and updates the
queue in place. Time is only ``now`` (ms, passed in); nothing is read from or
written to the outside world — the process shell turns effects into messages,
store writes and timers. After every command the core checks its own
invariants, so a broken rule fails at the command that broke it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any

from classic import commands as c
from classic import effects as e
from classic.config import QueueConfig
from classic.consumers import UNSENT_MESSAGE_LIMIT, Consumer, Consumers, Key
from classic.ready import Entry, ReadyQueue

__all__ = ["ClassicQueue"]


def _delivery(entry: Entry) -> e.Delivery:
    return e.Delivery(entry.msg_id, entry.delivered, entry.exchange, entry.routing_keys,
                      entry.size, entry.persistent, entry.priority, entry.expiration,
                      entry.content)


class ClassicQueue:
    """State and transitions of one classic queue.

    `deep_checks` also checks, after every command, the invariants whose cost grows
    with the messages held (every unacked id is a held message). The core's own tests
    want them; a queue process serving a consumer with a prefetch of hundreds would
    spend a quarter of its time on them, so it checks only the ones whose cost is
    fixed or grows with the consumers."""

    def __init__(self, config: QueueConfig, now: int, *, deep_checks: bool = True) -> None:
        self.config = config
        self.deep_checks = deep_checks
        self.ready = ReadyQueue()
        self.consumers = Consumers()
        self.live: dict[int, Entry] = {}
        """Every message the queue holds, ready or unacked, by id."""
        self.next_msg_id = 1
        self.last_used = now
        self.had_consumers = False
        self.active: Key | None = None
        """The single active consumer, when the queue has one."""
        self.monitored: set[Hashable] = set()
        self.deleted: e.DeleteReason | None = None
        self._effects: list[e.Effect] = []
        self._confirms: dict[Hashable, list[int]] = {}
        self._unstored: list[int] = []

    # --- introspection (list_queues, declare-ok) ------------------------------------------

    @property
    def messages_ready(self) -> int:
        return self.ready.count

    @property
    def messages_unacknowledged(self) -> int:
        return len(self.live) - self.ready.count

    @property
    def messages(self) -> int:
        return len(self.live)

    @property
    def consumer_count(self) -> int:
        """Every registered consumer, single-active-consumer standbys included."""
        return len(self.consumers)

    @property
    def message_bytes_ready(self) -> int:
        return self.ready.bytes

    @property
    def message_bytes(self) -> int:
        return sum(entry.size for entry in self.live.values())

    @property
    def message_bytes_unacknowledged(self) -> int:
        return self.message_bytes - self.ready.bytes

    @property
    def single_active_consumer_tag(self) -> str | None:
        return None if self.active is None else self.active[1]

    @property
    def exclusive_consumer_tag(self) -> str | None:
        for consumer in self.consumers:
            if consumer.exclusive:
                return consumer.tag
        return None

    def message_expiry_deadline(self) -> int | None:
        """When the head message expires; the shell arms its TTL timer for this."""
        head = self.ready.peek()
        return None if head is None else head.expires_at

    def queue_expiry_deadline(self) -> int | None:
        """When the queue expires (``x-expires``) unless it is used before; ``None`` while
        it has consumers or no ``x-expires``."""
        if self.config.expires is None or len(self.consumers) > 0:
            return None
        return self.last_used + self.config.expires

    def limiter_credit(self, channel: Hashable) -> int | None:
        """The channel's global-qos allowance left (``None``: the channel has none)."""
        record = self.consumers.channels.get(channel)
        return None if record is None else record.limiter_credit

    def limiter_starved(self) -> list[Hashable]:
        """Channels that would be sent a ready message now but for their spent
        global-qos allowance: the shell asks their limiters for more."""
        if self.ready.count == 0 or self.deleted is not None:
            return []
        starved: list[Hashable] = []
        for consumer in self.consumers:
            record = self.consumers.channels[consumer.channel]
            if (record.limiter_credit == 0 and consumer.channel not in starved
                    and consumer.ack_required and consumer.has_prefetch_room()
                    and record.unsent < UNSENT_MESSAGE_LIMIT
                    and self.consumers.in_line(consumer.key)):
                starved.append(consumer.channel)
        return starved

    # --- recovery ---------------------------------------------------------------------------

    def restore(self, messages: Iterable[e.Delivery], now: int) -> None:
        """Take back the persistent messages a durable queue held before its node
        stopped, in id order (the ids stay theirs, so the store's records still name
        them). Each keeps the ``redelivered`` flag it comes with; its TTL, if any,
        runs again from `now`. Only before the first command."""
        assert not self.live and self.next_msg_id == 1, "restore into a used queue"
        for m in messages:
            entry = Entry(
                msg_id=m.msg_id, exchange=m.exchange, routing_keys=m.routing_keys,
                size=m.size, persistent=True, priority=self.config.clamp_priority(m.priority),
                expiration=m.expiration, expires_at=self._expires_at(m.expiration, now),
                content=m.content, channel=None, seq=None, stored=True,
                delivered=m.redelivered)
            self.live[entry.msg_id] = entry
            self.ready.push(entry)
            self.next_msg_id = max(self.next_msg_id, entry.msg_id + 1)
        self._check_invariants()

    # --- the transition function -----------------------------------------------------------

    def apply(self, command: c.Command, now: int) -> tuple[e.Reply, list[e.Effect]]:
        assert self.deleted is None, f"command {command!r} after deletion"
        handler = self._handlers[type(command)]
        reply = handler(self, command, now)
        self._flush()
        effects, self._effects = self._effects, []
        self._check_invariants()
        return reply, effects

    # --- publishing --------------------------------------------------------------------------

    def _deliver(self, cmd: c.Deliver, now: int) -> e.Reply:
        cfg = self.config
        entry = Entry(
            msg_id=self.next_msg_id, exchange=cmd.exchange, routing_keys=cmd.routing_keys,
            size=cmd.size, persistent=cmd.persistent, priority=cfg.clamp_priority(cmd.priority),
            expiration=cmd.expiration, expires_at=self._expires_at(cmd.expiration, now),
            content=cmd.content, channel=cmd.channel, seq=cmd.seq)
        self.next_msg_id += 1
        if cfg.overflow != "drop-head" and self._would_overflow(cmd.size):
            if cmd.seq is not None:
                self._effects.append(e.RejectPublish(cmd.channel, cmd.seq))
            if cfg.overflow == "reject-publish-dlx":
                self._dead_letter("maxlen", [entry], now)
            return e.Ok()
        self.live[entry.msg_id] = entry
        if cmd.persistent and cfg.effective_durable:
            entry.stored = True
            self._effects.append(e.StoreWrite((_delivery(entry),)))
        if cmd.seq is not None:
            if entry.stored:
                entry.confirm_pending = True
            else:
                self._confirm(entry.channel, cmd.seq)
                entry.seq = None  # confirmed now: the queued message need not keep it
        if self.ready.count == 0:
            self.consumers.unblock()
            consumer = self.consumers.next_consumer()
            if consumer is not None:
                self._send(entry, consumer)
                return e.Ok()
            if cfg.message_ttl == 0 and cfg.dead_letter_exchange is None:
                self._leave(entry)
                return e.Ok()
        self.ready.push(entry)
        self._after_return(now)
        return e.Ok()

    def _expires_at(self, expiration: int | None, now: int) -> int | None:
        ttls = [t for t in (self.config.message_ttl, expiration) if t is not None]
        return now + min(ttls) if ttls else None

    def _would_overflow(self, size: int) -> bool:
        cfg = self.config
        if cfg.max_length is not None and self.ready.count + 1 > cfg.max_length:
            return True
        return cfg.max_length_bytes is not None and self.ready.bytes + size > cfg.max_length_bytes

    def _over_limit(self) -> bool:
        cfg = self.config
        if cfg.max_length is not None and self.ready.count > cfg.max_length:
            return True
        return cfg.max_length_bytes is not None and self.ready.bytes > cfg.max_length_bytes

    def _written(self, cmd: c.Written, now: int) -> e.Reply:
        for msg_id in cmd.msg_ids:
            entry = self.live.get(msg_id)
            if entry is not None and entry.confirm_pending:
                entry.confirm_pending = False
                assert entry.seq is not None
                self._confirm(entry.channel, entry.seq)
        return e.Ok()

    # --- consumers ------------------------------------------------------------------------

    def _consume(self, cmd: c.BasicConsume, now: int) -> e.Reply:
        cfg = self.config
        exclusive_held = any(consumer.exclusive for consumer in self.consumers)
        if exclusive_held or (cmd.exclusive and (len(self.consumers) > 0
                                                 or cfg.single_active_consumer)):
            return e.AmqpError(403, "ACCESS_REFUSED", f"{cfg.rs} in exclusive use")
        waiting = cfg.single_active_consumer and self.active is not None
        consumer = self.consumers.add(
            cmd.channel, cmd.tag, ack_required=cmd.ack_required, prefetch=cmd.prefetch,
            priority=cmd.priority, exclusive=cmd.exclusive, args=cmd.args, waiting=waiting)
        if cfg.single_active_consumer and self.active is None:
            self.active = consumer.key
        self.had_consumers = True
        self._watch(cmd.channel)
        self._run(now)
        return e.ConsumeOk(cmd.tag)

    def _cancel(self, cmd: c.BasicCancel, now: int) -> e.Reply:
        key = (cmd.channel, cmd.tag)
        if key not in self.consumers.by_key:
            return e.Ok()
        self._remove_consumer(key)
        if self._consumers_gone(now):
            return e.Ok()
        self._unwatch(cmd.channel)
        self._run(now)
        return e.Ok()

    def _remove_consumer(self, key: Key) -> None:
        self.consumers.remove(key)
        if self.active == key:
            self.active = None
            if len(self.consumers) > 0:
                nxt = max(self.consumers, key=lambda k: (k.priority, -k.seq))
                self.active = nxt.key
                self.consumers.activate(nxt.key)

    def _consumers_gone(self, now: int) -> bool:
        """After a consumer or a channel left: auto-delete, or restart the x-expires timer.

        Auto-delete needs a consumer to have existed since the queue started, so a
        queue only ever read with ``basic.get`` stays."""
        if len(self.consumers) > 0:
            return False
        if self.config.auto_delete and self.had_consumers:
            self._delete("auto_delete")
            return True
        self.last_used = now
        return False

    def _get(self, cmd: c.BasicGet, now: int) -> e.Reply:
        self.last_used = now
        self._expire_head(now)
        if self.ready.count == 0:
            return e.GetEmpty()
        entry = self.ready.pop()
        delivery = _delivery(entry)
        entry.delivered = True
        if cmd.ack_required:
            self._watch(cmd.channel)
            self.consumers.channel(cmd.channel).unacked[entry.msg_id] = None
        else:
            self._leave(entry)
        self._expire_head(now)
        return e.GetOk(delivery, self.ready.count)

    # --- settlement --------------------------------------------------------------------------

    def _take_unacked(self, channel: Hashable, msg_ids: tuple[int, ...]) -> list[Entry]:
        """Remove these ids from the channel's unacked set; unknown ids are ignored,
        as upstream ignores acks for messages it no longer holds."""
        record = self.consumers.channels.get(channel)
        if record is None:
            return []
        taken: list[Entry] = []
        for msg_id in msg_ids:
            if msg_id not in record.unacked:
                continue
            owner = record.unacked.pop(msg_id)
            if owner is not None:
                consumer = self.consumers.by_key.get((channel, owner[0]))
                if consumer is not None and consumer.seq == owner[1]:
                    consumer.unacked -= 1
                    assert consumer.unacked >= 0
            taken.append(self.live[msg_id])
        return taken

    def _ack(self, cmd: c.Ack, now: int) -> e.Reply:
        for entry in self._take_unacked(cmd.channel, cmd.msg_ids):
            self._leave(entry)
        self._unwatch(cmd.channel)
        self._run(now)
        return e.Ok()

    def _reject(self, cmd: c.Reject, now: int) -> e.Reply:
        entries = self._take_unacked(cmd.channel, cmd.msg_ids)
        if cmd.requeue:
            self._requeue(entries, now)
        else:
            self._dead_letter("rejected", entries, now)
        self._unwatch(cmd.channel)
        self._run(now)
        return e.Ok()

    def _recover(self, cmd: c.Recover, now: int) -> e.Reply:
        record = self.consumers.channels.get(cmd.channel)
        if record is not None:
            self._requeue(self._take_unacked(cmd.channel, tuple(record.unacked)), now)
        self._unwatch(cmd.channel)
        self._run(now)
        return e.Ok()

    def _requeue(self, entries: list[Entry], now: int) -> None:
        for entry in entries:
            self.ready.push(entry)
        if entries:
            self._after_return(now)

    def _notify_down(self, cmd: c.NotifyDown, now: int) -> e.Reply:
        record = self.consumers.channels.get(cmd.channel)
        if record is None:
            return e.Ok()
        for key in [k for k in self.consumers.by_key if k[0] == cmd.channel]:
            self._remove_consumer(key)
        returned = self._take_unacked(cmd.channel, tuple(record.unacked))
        del self.consumers.channels[cmd.channel]
        self.monitored.discard(cmd.channel)
        self._requeue(returned, now)
        # upstream restarts the expiry timer on every channel DOWN that leaves the
        # queue unused, not only when the channel had consumers
        if self._consumers_gone(now):
            return e.Ok()
        self._run(now)
        return e.Ok()

    def _notify_sent(self, cmd: c.NotifySent, now: int) -> e.Reply:
        record = self.consumers.channels.get(cmd.channel)
        if record is not None:
            record.unsent = max(0, record.unsent - cmd.count)
            self._unwatch(cmd.channel)
            self._run(now)
        return e.Ok()

    def _limiter_credit(self, cmd: c.LimiterCredit, now: int) -> e.Reply:
        assert cmd.credit is None or cmd.credit >= 0, cmd
        self.consumers.channel(cmd.channel).limiter_credit = cmd.credit
        self._run(now)
        return e.Ok()

    # --- queue operations ------------------------------------------------------------------

    def _purge(self, cmd: c.Purge, now: int) -> e.Reply:
        purged = self.ready.drain()
        for entry in purged:
            self._leave(entry)
        return e.Ok(message_count=len(purged))

    def _delete_cmd(self, cmd: c.Delete, now: int) -> e.Reply:
        rs = self.config.rs
        if cmd.if_empty and self.ready.count > 0:
            return e.AmqpError(406, "PRECONDITION_FAILED", f"{rs} not empty")
        if cmd.if_unused and len(self.consumers) > 0:
            return e.AmqpError(406, "PRECONDITION_FAILED", f"{rs} in use")
        count = self.ready.count
        self._delete("delete")
        return e.Ok(message_count=count)

    def _owner_down(self, cmd: c.OwnerDown, now: int) -> e.Reply:
        self._delete("owner_down")
        return e.Ok()

    def _stat(self, cmd: c.Stat, now: int) -> e.Reply:
        self.last_used = now
        return e.Ok(message_count=self.ready.count, consumer_count=len(self.consumers))

    def _tick(self, cmd: c.Tick, now: int) -> e.Reply:
        self._run(now)
        deadline = self.queue_expiry_deadline()
        if deadline is not None and deadline <= now:
            self._delete("expired")
        return e.Ok()

    def _delete(self, reason: e.DeleteReason) -> None:
        """Delete: cancel consumers, acknowledge pending confirms, discard messages."""
        for consumer in list(self.consumers):
            self._effects.append(e.CancelConsumer(consumer.channel, consumer.tag))
        count = self.ready.count
        for entry in self.live.values():
            if entry.confirm_pending:
                entry.confirm_pending = False
                assert entry.seq is not None
                self._confirm(entry.channel, entry.seq)
        self._flush()
        self._effects.append(e.Deleted(reason, count))
        self.ready = ReadyQueue()
        self.live.clear()
        self.consumers = Consumers()
        self.active = None
        self.monitored.clear()
        self.deleted = reason

    # --- internals -------------------------------------------------------------------------

    def _send(self, entry: Entry, consumer: Consumer) -> None:
        """Hand one message to a consumer (``basic.deliver``)."""
        record = self.consumers.channels[consumer.channel]
        self._effects.append(e.Deliver(consumer.channel, consumer.tag, consumer.ack_required,
                                       (_delivery(entry),)))
        entry.delivered = True
        record.unsent += 1
        if consumer.ack_required:
            record.unacked[entry.msg_id] = (consumer.tag, consumer.seq)
            consumer.unacked += 1
            if record.limiter_credit is not None:
                record.limiter_credit -= 1
        else:
            self._leave(entry)

    def _run(self, now: int) -> None:
        """Expire the head, then deliver ready messages while a consumer can take one."""
        if self.deleted is not None:
            return
        self.consumers.unblock()
        self._expire_head(now)
        while self.ready.count > 0:
            consumer = self.consumers.next_consumer()
            if consumer is None:
                break
            self._send(self.ready.pop(), consumer)
            self._expire_head(now)

    def _after_return(self, now: int) -> None:
        """After an append or a requeue: drop-head overflow, head expiry, deliveries."""
        if self.config.overflow == "drop-head":
            dropped: list[Entry] = []
            while self.ready.count > 0 and self._over_limit():
                dropped.append(self.ready.pop())
            self._dead_letter("maxlen", dropped, now)
        self._run(now)

    def _expire_head(self, now: int) -> None:
        expired: list[Entry] = []
        while True:
            head = self.ready.peek()
            if head is None or head.expires_at is None or head.expires_at > now:
                break
            expired.append(self.ready.pop())
        self._dead_letter("expired", expired, now)

    def _dead_letter(self, reason: e.DeadLetterReason, entries: list[Entry], now: int) -> None:
        """At-most-once: emit the copies (if there is a DLX) and forget the originals."""
        if not entries:
            return
        cfg = self.config
        if cfg.dead_letter_exchange is not None:
            self._effects.append(e.DeadLetter(
                reason, cfg.name, cfg.vhost, now, cfg.dead_letter_exchange,
                cfg.dead_letter_routing_key, tuple(_delivery(x) for x in entries)))
        for entry in entries:
            if entry.msg_id in self.live:
                self._leave(entry)

    def _leave(self, entry: Entry) -> None:
        """The message is gone for good: a pending confirm is due now, the store forgets it."""
        self.live.pop(entry.msg_id, None)
        if entry.confirm_pending:
            entry.confirm_pending = False
            assert entry.seq is not None
            self._confirm(entry.channel, entry.seq)
        if entry.stored:
            self._unstored.append(entry.msg_id)

    def _confirm(self, channel: Hashable, seq: int) -> None:
        self._confirms.setdefault(channel, []).append(seq)

    def _flush(self) -> None:
        """Batch the store removals and confirms of one command, confirms last."""
        if self._unstored:
            self._effects.append(e.StoreRemove(tuple(self._unstored)))
            self._unstored = []
        for channel, seqs in self._confirms.items():
            self._effects.append(e.Confirm(channel, tuple(seqs)))
        self._confirms = {}

    def _watch(self, channel: Hashable) -> None:
        if channel not in self.monitored:
            self.monitored.add(channel)
            self._effects.append(e.Monitor(channel))

    def _unwatch(self, channel: Hashable) -> None:
        """Drop the monitor of a channel the queue no longer needs to watch."""
        record = self.consumers.channels.get(channel)
        if record is None or not record.idle() or channel not in self.monitored:
            return
        self.monitored.discard(channel)
        self._effects.append(e.Demonitor(channel))
        if record.limiter_credit is None:
            del self.consumers.channels[channel]

    def _check_invariants(self) -> None:
        if self.deleted is not None:
            assert not self.live and self.ready.count == 0
            return
        unacked = sum(len(r.unacked) for r in self.consumers.channels.values())
        assert self.ready.count + unacked == len(self.live), (self.ready.count, unacked)
        if self.deep_checks:
            for record in self.consumers.channels.values():
                for msg_id in record.unacked:
                    assert msg_id in self.live, msg_id
        for consumer in self.consumers:
            assert consumer.channel in self.monitored, consumer.key
            assert consumer.unacked <= len(self.consumers.channels[consumer.channel].unacked)
        if self.ready.count > 0:
            # a consumer with room is rare here, and cheaper to rule out than a place
            # in a line
            assert not any(self.consumers.able(x) and self.consumers.in_line(k)
                           for k, x in self.consumers.by_key.items()), "idle consumer"
        if self.config.single_active_consumer and len(self.consumers) > 0:
            assert self.active in self.consumers.by_key
        if self.config.overflow == "drop-head" and self.ready.count > 0:
            assert not self._over_limit()

    _handlers: dict[type, Callable[[ClassicQueue, Any, int], e.Reply]] = {
        c.Deliver: _deliver,
        c.Written: _written,
        c.BasicConsume: _consume,
        c.BasicCancel: _cancel,
        c.BasicGet: _get,
        c.Ack: _ack,
        c.Reject: _reject,
        c.Recover: _recover,
        c.NotifyDown: _notify_down,
        c.OwnerDown: _owner_down,
        c.NotifySent: _notify_sent,
        c.LimiterCredit: _limiter_credit,
        c.Purge: _purge,
        c.Delete: _delete_cmd,
        c.Stat: _stat,
        c.Tick: _tick,
    }
