"""Classic queues behind the channel's `QueueBackend` (``rabbit_classic_queue``).

Each classic queue is one process (`classic.process.QueueProcess`) under its
home node's queue supervisor. The backend keeps the node's queues by
``(vhost, name)``; a channel reaches a queue by its pid, so the calls and
casts below work the same whichever node the channel is on. Synchronous
methods (declare, delete, purge, consume, cancel, get) are calls to the queue
process; publishes and settlements are casts. What the queue says later
(confirms, refused publishes, deliveries, server cancels, its deletion)
arrives in the channel's mailbox as a ``classic_queue_event`` and becomes the
channel's `Action`s in `handle_event`.

The channel is told what RabbitMQ tells it, with RabbitMQ's codes and texts:
server-named queues (``amq.gen-`` + 22 base64url characters), the reserved
``amq.`` prefix for names a client chose, 405 for another connection's
exclusive queue, 406 for an inequivalent redeclare, 404 for a missing queue.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import actors
from actors import Node, gen_server
from actors.pid import CallExit, Pid, Ref
from channel.errors import AmqpError, rs
from channel.limits import limiter
from channel.limits.limits import QueueLimits
from channel.queue_types.backend import (
    Action,
    Block,
    ConsumerCancelled,
    ConsumeSpec,
    DeclareOk,
    Deliver,
    Delivery,
    Got,
    Message,
    QueueEol,
    Rejected,
    Settled,
    Unblock,
)
from channel.queue_types.classic.classic_args import (
    CLASSIC_ARGS,
    queue_config,
    validate_classic_args,
)
from channel.queue_types.classic.classic_directory import (
    ClassicDirectory,
    ClassicRecord,
    LocalDirectory,
)
from channel.queue_types.classic.classic_store import SavedDeclare, open_store, reread
from channel.queue_types.consumer_args import check_consume_arguments, consumer_priority
from channel.queue_types.consumer_timeout import queue_timeout
from channel.queue_types.qq_message import QqMessage
from channel.queue_types.queue_args import Declared, check_equivalence
from classic import commands as c
from classic import effects as e
from classic.config import QueueConfig
from classic.msg_store import QueueStore
from classic.process import BUMP_CREDIT, CLASSIC_EVENT, CREDIT, EOL, FLOW, LIMITED, QueueEnv
from classic.queue_sup import QUEUE_SUP, start_queue
from fifo.replica_trace import ID_HEADER, id_value

__all__ = ["ClassicBackend", "ClassicRecord", "ClassicSession", "server_name"]

log = logging.getLogger("warren.classic")

CALL_TIMEOUT = 30_000
"""How long a channel waits for a queue process to answer a call."""

RETRIES = 10
RETRY_WAIT_MS = 30
"""A call that finds a queue's process dead tries again this often, this far apart,
as its supervisor may be restarting it (``rabbit_amqqueue:with``'s retries)."""

NOTIFY_SENT_EVERY = 50
"""A channel tells a queue process how many of its deliveries it has handed to the
writer once per this many (``rabbit_amqqueue_common``'s MORE_CONSUMER_CREDIT_AFTER),
not after each: the queue holds a channel back only at 200 unsent deliveries."""

HOME_DOWN_RETRIES = 2000
"""``rabbit_amqqueue:with/3``'s retries for a durable queue whose home node is down
(RabbitMQ 4.x; the node's release record says how its release behaves)."""


def _message(content: Any, last_death: bool = True) -> Message:
    """What a classic queue holds as a channel's message (a dead letter keeps its
    history in a stored message until it is delivered, with `x-last-death-*`
    headers where the release has them)."""
    return content.to_message(last_death) if isinstance(content, QqMessage) else content


def workload_id(content: Any) -> int | None:
    """A stored message's workload id (header ``x-warren-id``) for the history rows a
    recorded queue process writes; None without one or with unreadable properties."""
    message = _message(content)
    try:
        props = message.properties or message.content.properties()
    except Exception:  # properties a client sent malformed carry no id
        return None
    return id_value((props.headers or {}).get(ID_HEADER))


def server_name() -> str:
    """A server-generated queue name: ``amq.gen-`` and 16 random bytes in base64url."""
    return "amq.gen-" + secrets.token_urlsafe(16)


class ClassicBackend:
    """The classic queues of one node and the sessions channels use to reach them."""

    def __init__(self, node: Node, *, on_deleted: Callable[[str, str], None] | None = None,
                 dead_letter: Callable[[e.DeadLetter], None] | None = None,
                 queue_sup: Any = QUEUE_SUP,
                 directory: ClassicDirectory | None = None,
                 home_down_retries: int = HOME_DOWN_RETRIES,
                 record_queue_type: bool = True, last_death_headers: bool = True,
                 reconsume_on_queue_down: bool = False) -> None:
        self.node = node
        #: the release's `classic_reconsume_on_queue_down`: a channel registers its
        #: consumers of a queue whose process died again (3.10) or cancels them (4.x)
        self.reconsume_on_queue_down = reconsume_on_queue_down
        #: the release's `last_death_headers`: whether a dead letter delivered from a
        #: classic queue carries `x-last-death-*` (not in 3.10)
        self.last_death_headers = last_death_headers
        #: the release's `declare_records_queue_type`: a declare without
        #: `x-queue-type` stores `classic` as that argument (4.x), or stores none (3.10)
        self.record_queue_type = record_queue_type
        #: the release's `classic_home_down_retries`: 0 answers an operation on a
        #: durable queue whose home node is down at once (3.10), more retries it
        #: RETRY_WAIT_MS apart before giving up (4.x)
        self.home_down_retries = home_down_retries
        #: the queue table: the cluster's on a broker, this process's in tests
        self.directory: ClassicDirectory = directory or LocalDirectory()
        self.on_deleted = on_deleted
        self.queue_sup = queue_sup
        self.env = QueueEnv(dead_letter=dead_letter, on_deleted=self._deleted,
                            on_restart=self._restarted, on_crash=self._crashed,
                            message_id=workload_id)
        #: `BrokerContext.check_queue_limits`, asked before a queue is created
        self.queue_limits: QueueLimits | None = None
        #: the node's message store (`classic.msg_store`) when it has a data dir
        self.store: Any = None

    def set_dead_letter(self, hook: Callable[[e.DeadLetter], None] | None) -> None:
        """Where queues started from now on send their dead letters."""
        self.env = replace(self.env, dead_letter=hook)

    def queue_count(self, vhost: str | None = None) -> int:
        return len(self.directory.list(vhost))

    def lookup(self, vhost: str, name: str) -> ClassicRecord | None:
        return self.directory.lookup(vhost, name)

    def session(self, channel: Any, vhost: str, owner: Any, user: str) -> ClassicSession:
        return ClassicSession(self, channel, vhost, owner)

    def connection_closed(self, owner: Any) -> None:
        """The owner's exclusive queues go before its ``close-ok`` is written."""
        for record in [r for r in self.directory.list() if r.owner is not None
                       and r.owner == owner]:
            try:
                gen_server.call(record.pid, c.OwnerDown(), CALL_TIMEOUT)
            except CallExit:
                self._forget(record.vhost, record.name, record.pid)

    def _deleted(self, config: QueueConfig, _deleted: e.Deleted) -> None:
        """Runs in the queue process as it deletes itself. A queue table that cannot
        be written now (a metadata store without quorum) keeps the record; it names
        a process that is gone, which a later ``queue.delete`` removes."""
        try:
            self._forget(config.vhost, config.name, actors.self())
        except Exception as exc:  # the store's error type is the broker's
            log.warning("record of deleted %s kept: %s", rs("queue", config.name,
                                                           config.vhost), exc)

    def _restarted(self, config: QueueConfig,
                   store: QueueStore | None) -> tuple[e.Delivery, ...] | None:
        """Runs in a queue process its supervisor restarted after a crash (upstream's
        crash restart in ``rabbit_amqqueue_process:init``): the queue takes over its
        record (bindings kept) and starts from what the store holds. A non-durable
        queue, or a durable one on a node without a data dir, had its messages in
        the dead process only, so it comes back empty, as in RabbitMQ."""
        me = actors.self()
        old = self.directory.lookup(config.vhost, config.name)
        record = (replace(old, pid=me, state="live") if old is not None
                  and old.node == me.node else
                  ClassicRecord(config.vhost, config.name, me, config.durable,
                                config.auto_delete, config.exclusive_owner, {}))
        holder = self.directory.recover(record)
        if holder is None:  # deleted meanwhile: its messages go too
            if store is not None:
                store.delete()
            return None
        if holder.pid != me:
            log.warning("crashed %s not restarted: a queue on %s holds the name",
                        rs("queue", config.name, config.vhost), holder.node)
            return None
        return () if store is None else reread(store)

    def _crashed(self, config: QueueConfig, reason: Any) -> None:
        """Runs in a queue process ending with an error (``terminate/2``): its record is
        marked crashed, unless it names another process by now."""
        me = actors.self()
        record = self.directory.lookup(config.vhost, config.name)
        if record is not None and record.pid == me:
            log.error("%s crashed: %r", rs("queue", config.name, config.vhost), reason)
            self.directory.recover(replace(record, state="crashed"))

    def _forget(self, vhost: str, name: str, pid: Pid) -> None:
        if not self.directory.remove(vhost, name, pid):
            return
        if self.on_deleted is not None:
            self.on_deleted(vhost, name)


def _locked(where: str) -> AmqpError:
    return AmqpError(
        "RESOURCE_LOCKED",
        f"cannot obtain exclusive access to locked {where}. It could be originally "
        "declared on another connection or the exclusive property value does not match "
        "that of the original declaration.")


class _Crashed(AmqpError):
    """404 for a queue whose process stayed dead while a call was retried: one that
    crashed more often than its supervisor restarts it, or whose record outlived its
    deletion. An explicit delete removes such a record."""

    def __init__(self, record: ClassicRecord, text: str) -> None:
        super().__init__("NOT_FOUND", text)
        self.record = record

    def __reduce__(self) -> Any:
        return (AmqpError, (self.name, self.explanation, self.method))


def _home_up(record: ClassicRecord) -> bool:
    """Whether the queue's home node is this node, or one connected to it that has
    recovered the queue: a record naming a process of the node's earlier life means
    the node restarted and has not taken the queue back yet (it is still down for
    the queue's clients)."""
    node = actors.get_node()
    return record.node == node.name or (node.is_connected(record.node)
                                        and not node.is_stale(record.pid))


def _raise(reply: e.Reply) -> e.Reply:
    if isinstance(reply, e.AmqpError):
        raise AmqpError(reply.name, reply.text)
    return reply


class ClassicSession:
    """One channel's view of the classic queues of its vhost."""

    def __init__(self, backend: ClassicBackend, channel: Any, vhost: str, owner: Any) -> None:
        self.b = backend
        self.channel = channel
        self.vhost = vhost
        self.owner = owner
        #: queue processes this channel consumed from or took messages of
        self.touched: set[Pid] = set()
        #: credit_flow towards each queue process: publishes it may still be sent
        self.credit_from: dict[Pid, int] = {}
        #: the queue processes this channel has published to or consumes from, watched
        #: so that one that dies no longer blocks it (credit_flow's peer_down) and its
        #: consumers and pending confirms are settled: pid -> (ref, name)
        self.publishing_to: dict[Pid, tuple[Ref, str]] = {}
        #: publish sequence numbers each queue process still owes a confirm for
        self.unconfirmed: dict[Pid, set[int]] = {}
        #: this channel's consumer tags on each queue process
        self.consuming: dict[Pid, set[str]] = {}
        #: how each of this channel's consumers was registered, by tag: (queue, spec)
        self.specs: dict[str, tuple[str, ConsumeSpec]] = {}
        #: deliveries from each queue process handed to the writer and not yet told
        #: to the queue (`NOTIFY_SENT_EVERY`)
        self.sent_to: dict[Pid, int] = {}
        #: the channel's limiter, once a consumer was registered under a global qos,
        #: and the queue processes that ask it before delivering to this channel
        self.limiter: Any = None
        self.limited: set[Pid] = set()

    def _where(self, name: str) -> str:
        return rs("queue", name, self.vhost)

    def _record(self, name: str) -> ClassicRecord | None:
        return self.b.lookup(self.vhost, name)

    def _not_found(self, name: str) -> AmqpError:
        return AmqpError("NOT_FOUND", f"no {self._where(name)}")

    def _home_down(self, record: ClassicRecord) -> AmqpError:
        return AmqpError("NOT_FOUND", f"home node '{record.node}' of durable "
                                      f"{self._where(record.name)} is down or inaccessible")

    def _crashed(self, record: ClassicRecord) -> _Crashed:
        """``rabbit_amqqueue:with``'s answer for a record in state crashed, at once."""
        return _Crashed(record, f"{self._where(record.name)} has crashed and failed to "
                                "restart")

    def _timed_out(self, record: ClassicRecord) -> _Crashed:
        return _Crashed(record, f"failed to perform operation on {self._where(record.name)}"
                                " due to timeout")

    def _await_home(self, record: ClassicRecord) -> ClassicRecord:
        """The record of a queue whose home node is down, once that node is back.

        3.10 treats such a queue as absent at once (404 "home node ... is down or
        inaccessible"). 4.x keeps its record live, so ``rabbit_amqqueue:with``
        tries the operation again, RETRY_WAIT_MS apart, and answers 404 "... due
        to timeout" when the node has not come back; a queue deleted meanwhile is
        404 "no queue"."""
        if self.b.home_down_retries == 0:
            raise self._home_down(record)
        for _ in range(self.b.home_down_retries):
            actors.sleep(RETRY_WAIT_MS)
            current = self._record(record.name)
            if current is None:
                raise self._not_found(record.name)
            record = current
            if _home_up(record):
                return record
        raise self._timed_out(record)

    def _accessible(self, name: str, *, wait: bool = True) -> ClassicRecord:
        """404 for a missing queue, then 405 for another connection's exclusive
        queue. A queue whose home node is down is waited for (`_await_home`), unless
        the caller only reads the record (`wait=False`, as a binding does in 4.x)."""
        record = self._record(name)
        if record is None:
            raise self._not_found(name)
        if record.state == "crashed":
            raise self._crashed(record)
        if not _home_up(record) and (wait or self.b.home_down_retries == 0):
            record = self._await_home(record)
        if record.owner is not None and record.owner != self.owner:
            raise _locked(self._where(name))
        return record

    def _call(self, record: ClassicRecord, command: Any) -> Any:
        """A call to the queue process. One that is gone is being restarted by its
        supervisor (or its node is down), so its record stays and the call is tried
        again on the record's new process, as ``rabbit_amqqueue:with`` retries."""
        return self._call_at(record, command)[1]

    def _call_at(self, record: ClassicRecord, command: Any) -> tuple[ClassicRecord, Any]:
        """`_call`, with the record of the process that answered (a retry may have
        reached a restarted one)."""
        for _ in range(RETRIES):
            try:
                return record, gen_server.call(record.pid, command, CALL_TIMEOUT)
            except CallExit as exc:
                if exc.why == "timeout":
                    raise
                if not _home_up(record):
                    # the record stays: the queue comes back with its node
                    record = self._await_home(record)
                    continue
            actors.sleep(RETRY_WAIT_MS)
            current = self._record(record.name)
            if current is None:
                raise self._not_found(record.name)
            if current.state == "crashed":
                raise self._crashed(current)
            record = current
        raise self._timed_out(record)

    def consumer_timeout(self, name: str, node_default: int | None) -> int | None:
        record = self._record(name)
        return node_default if record is None else queue_timeout(record.arguments, {},
                                                                 node_default)

    # ----------------------------------------------------------------- lookup

    def exists(self, name: str) -> bool:
        return self._record(name) is not None

    def routable(self, name: str) -> bool:
        """4.x routes to a durable queue whose home node is down (the publish is then
        nacked); 3.10's live table no longer has it, so nothing routes there."""
        record = self._record(name)
        return record is not None and (self.b.home_down_retries > 0 or _home_up(record))

    def check_access(self, name: str) -> None:
        self._accessible(name, wait=False)

    # ---------------------------------------------------------------- declare

    def declare(self, name: str, *, passive: bool, durable: bool, exclusive: bool,
                auto_delete: bool, arguments: Mapping[str, Any]) -> DeclareOk:
        if passive:
            return self._stat(self._accessible(name))
        if name == "":
            name = server_name()
        elif name.startswith("amq."):
            raise AmqpError("ACCESS_REFUSED",
                            f"queue name '{name}' contains reserved prefix 'amq.*'")
        args = {k: v for k, v in arguments.items() if k != "x-name-prefix"}
        if self.b.record_queue_type:
            args.setdefault("x-queue-type", "classic")
        owner = self.owner if exclusive else None
        record = self._record(name)
        if record is None:
            record, created = self._create(name, durable and not exclusive, auto_delete,
                                           owner, args)
            if created:
                return DeclareOk(name, 0, 0)
        return self._redeclare(record, durable and not exclusive, auto_delete, owner, args)

    def _redeclare(self, record: ClassicRecord, durable: bool, auto_delete: bool, owner: Any,
                   args: dict[str, Any]) -> DeclareOk:
        if record.owner != owner:
            raise _locked(self._where(record.name))
        check_equivalence(record.name, self.vhost,
                          Declared(record.durable, record.auto_delete, record.arguments),
                          Declared(durable, auto_delete, args), CLASSIC_ARGS)
        return self._stat(record)

    def _stat(self, record: ClassicRecord) -> DeclareOk:
        reply = self._call(record, c.Stat())
        return DeclareOk(record.name, reply.message_count, reply.consumer_count)

    def _create(self, name: str, durable: bool, auto_delete: bool, owner: Any,
                args: dict[str, Any]) -> tuple[ClassicRecord, bool]:
        """Start the queue's process and record it; a queue another channel created
        meanwhile wins (``created`` False), and ours is deleted again."""
        validate_classic_args(name, self.vhost, args)
        if self.b.queue_limits is not None:
            self.b.queue_limits(self.vhost, name, self.b.queue_count)
        config = queue_config(name, self.vhost, args, durable=durable,
                              auto_delete=auto_delete, owner=owner)
        store = None if not durable or self.b.store is None else open_store(
            self.b.store, SavedDeclare(self.vhost, name, durable, auto_delete, args))
        result = start_queue(self.b.queue_sup, config, self.b.env, store)
        if result[0] != "ok":
            if store is not None:
                store.delete()
            raise AmqpError("INTERNAL_ERROR",
                            f"Cannot declare a queue '{self._where(name)}' on node "
                            f"'{actors.node()}': {result!r}")
        record = ClassicRecord(self.vhost, name, result[1], durable, auto_delete, owner, args)
        if not actors.is_process_alive(record.pid):
            # its owner was gone already: the queue deleted itself at once, and the
            # client still gets declare-ok, as from RabbitMQ
            return record, True
        winner = self.b.directory.insert(record)
        ours = winner.pid == record.pid  # (the stored record may be a copy of ours)
        if not ours:
            gen_server.cast(record.pid, c.Delete())
        return winner, ours

    # -------------------------------------------------------- delete, purge

    def delete(self, name: str, *, if_unused: bool, if_empty: bool) -> int:
        found = self._record(name)
        if found is None:
            return 0
        if found.state == "crashed":  # rabbit_classic_queue:delete_crashed
            self.b._forget(found.vhost, found.name, found.pid)
            return 0
        if not _home_up(found):
            # RabbitMQ will not force-delete messages it cannot see: only the record goes
            if if_empty:
                raise AmqpError("PRECONDITION_FAILED", f"{self._where(name)} not empty")
            self.b._forget(found.vhost, found.name, found.pid)
            return 0
        record = self._accessible(name)
        try:
            reply = _raise(self._call(record, c.Delete(if_unused=if_unused,
                                                       if_empty=if_empty)))
        except _Crashed as exc:
            self.b._forget(exc.record.vhost, exc.record.name, exc.record.pid)
            return 0
        except AmqpError as exc:
            if exc.name == "NOT_FOUND":
                return 0
            raise
        assert isinstance(reply, e.Ok)  # queue.delete answers Ok or an error
        return int(reply.message_count or 0)

    def purge(self, name: str) -> int:
        reply = self._call(self._accessible(name), c.Purge())
        return int(reply.message_count or 0)

    # ---------------------------------------------------------------- publish

    def deliver(self, queues: list[str], message: Message, correlation: int | None,
                ) -> list[Action]:
        actions: list[Action] = []
        props = None
        for name in queues:
            record = self._record(name)
            if record is None:
                continue
            if not _home_up(record):
                # 4.x routes to the queue and the publish is refused when the channel
                # finds its process gone; 3.10 does not route to it (`routable`), and
                # one routed while the node went counts as routed nowhere: confirmed
                if correlation is not None:
                    actions.append(Rejected(name, (correlation,)) if self.b.home_down_retries
                                   else Settled(name, (correlation,)))
                continue
            if props is None:
                props = message.decoded_properties()
            expiration = props.expiration
            gen_server.cast(record.pid, (FLOW, c.Deliver(
                self.channel, correlation, message.exchange,
                message.routing_keys or (message.routing_key,), message.content.body_size,
                persistent=props.delivery_mode == 2, priority=props.priority,
                expiration=None if expiration is None else int(expiration), content=message)))
            if correlation is not None:
                self.unconfirmed.setdefault(record.pid, set()).add(correlation)
            if self._spend_credit(record.pid, name):
                actions.append(Block(name))
        return actions

    def _spend_credit(self, pid: Pid, name: str) -> bool:
        """``credit_flow:send``: one credit spent; True on the step that blocks (1 -> 0)."""
        self._watch(pid, name)
        credit = self.credit_from.get(pid, CREDIT[0])
        self.credit_from[pid] = credit - 1
        return credit == 1

    def _watch(self, pid: Pid, name: str) -> None:
        if pid not in self.publishing_to:
            self.publishing_to[pid] = (actors.monitor(pid), name)

    def _bump_credit(self, name: str, pid: Pid, quantity: int) -> list[Action]:
        """The queue granted more; the channel resumes on the step above zero."""
        credit = self.credit_from.get(pid, 0)
        self.credit_from[pid] = credit + quantity
        return [Unblock(name)] if credit <= 0 < credit + quantity else []

    # -------------------------------------------------------------- consumers

    def validate_consume(self, name: str, spec: ConsumeSpec) -> None:
        """404 / 405 and the consumer arguments; exclusivity is the queue's to refuse."""
        self._accessible(name)
        check_consume_arguments(name, self.vhost, "classic", spec.arguments)

    def consume(self, name: str, spec: ConsumeSpec) -> list[Action]:
        record = self._accessible(name)
        command: Any = c.BasicConsume(
            self.channel, spec.consumer_tag, ack_required=spec.ack_required,
            prefetch=spec.prefetch, priority=consumer_priority(spec.arguments),
            exclusive=spec.exclusive, args=tuple(spec.arguments.items()))
        limited = spec.limiter is not None and spec.ack_required
        if limited:
            # a global qos: the queue asks the channel's limiter before it delivers
            command = (LIMITED, spec.limiter, command)
            self.limiter = spec.limiter
        # the process that answers may be a restarted one: it is the one to watch
        record, reply = self._call_at(record, command)
        self.touched.add(record.pid)
        if limited:
            self.limited.add(record.pid)
        _raise(reply)
        self.consuming.setdefault(record.pid, set()).add(spec.consumer_tag)
        self.specs[spec.consumer_tag] = (name, spec)
        self._watch(record.pid, name)
        return []

    def cancel(self, name: str, consumer_tag: str) -> list[Action]:
        """The consumer is taken off the process it was registered with, as
        ``rabbit_channel`` cancels on the queue record it consumed from: once the queue
        was restarted, its record names a process that never had the consumer, and the
        old process's ``DOWN`` must not find the tag still listed under it."""
        self.specs.pop(consumer_tag, None)
        registered = self._consumer_pid(consumer_tag)
        if registered is not None:
            self.consuming[registered].discard(consumer_tag)
            try:
                gen_server.call(registered, c.BasicCancel(self.channel, consumer_tag),
                                CALL_TIMEOUT)
            except CallExit as exc:
                if exc.why == "timeout":
                    raise
                # the process is gone, and the consumer with it
            return []
        record = self._record(name)
        if record is not None:
            try:
                self._call(record, c.BasicCancel(self.channel, consumer_tag))
            except AmqpError:
                pass  # the queue went meanwhile: nothing left to cancel
        return []

    def _consumer_pid(self, consumer_tag: str) -> Pid | None:
        """The queue process this channel registered `consumer_tag` with."""
        for pid, tags in self.consuming.items():
            if consumer_tag in tags:
                return pid
        return None

    def settle(self, name: str, op: str, consumer_tag: str | int,
               msg_ids: list[Any]) -> list[Action]:
        """Each message id names the queue process it came from, so a settlement
        goes to that process even if the queue was deleted and declared again."""
        by_queue: dict[Pid, list[int]] = {}
        for pid, msg_id in msg_ids:
            by_queue.setdefault(pid, []).append(msg_id)
        if self.limiter is not None and isinstance(consumer_tag, str):
            # deliveries to consumers (not basic.get) are what the limiter counted
            counted = sum(len(ids) for pid, ids in by_queue.items() if pid in self.limited)
            if counted:
                limiter.ack(self.limiter, counted)
        for pid, ids in by_queue.items():
            command: c.Command = (c.Ack(self.channel, tuple(ids)) if op == "complete"
                                  else c.Reject(self.channel, tuple(ids),
                                                requeue=op == "requeue"))
            gen_server.cast(pid, command)
        return []

    def get(self, name: str, *, ack_required: bool, delivery_tag: int,
            node_timeout: int | None = None) -> Got | None:
        # the process that answers may be a restarted one: its message is settled there
        record, reply = self._call_at(self._accessible(name),
                                      c.BasicGet(self.channel, ack_required))
        if ack_required:
            self.touched.add(record.pid)
        _raise(reply)
        if isinstance(reply, e.GetEmpty):
            return None
        assert isinstance(reply, e.GetOk)  # basic.get answers GetOk, GetEmpty or an error
        d = reply.delivery
        return Got(Delivery((record.pid, d.msg_id),
                            _message(d.content, self.b.last_death_headers), d.redelivered),
                   reply.message_count)

    # ----------------------------------------------------------------- events

    def handle_event(self, msg: Any) -> list[Action] | None:
        if type(msg) is tuple and len(msg) == 5 and msg[0] == "DOWN":
            return self._queue_down(msg[1], msg[3], msg[4])
        if not (type(msg) is tuple and len(msg) == 5 and msg[0] == CLASSIC_EVENT):
            return None
        _, vhost, name, pid, event = msg
        if vhost != self.vhost:
            return []
        match event:
            case e.Confirm(_, seqs):
                self.unconfirmed.get(pid, set()).difference_update(seqs)
                return [Settled(name, tuple(seqs))]
            case e.RejectPublish(_, seq):
                self.unconfirmed.get(pid, set()).discard(seq)
                return [Rejected(name, (seq,), "maxlen")]
            case e.Deliver(_, tag, ack_required, messages):
                if tag not in self.consuming.get(pid, ()):
                    self._drop_stray_consumer(name, pid, tag)
                # the channel hands them to its writer (upstream: notify_sent)
                self._notify_sent(pid, len(messages))
                return [Deliver(name, tag, ack_required,
                                tuple(Delivery((pid, m.msg_id),
                                               _message(m.content, self.b.last_death_headers),
                                               m.redelivered)
                                      for m in messages))]
            case e.CancelConsumer(_, tag):
                self.consuming.get(pid, set()).discard(tag)
                self.specs.pop(tag, None)
                return [ConsumerCancelled(name, tag)]
            case (kind, quantity) if kind == BUMP_CREDIT:
                return self._bump_credit(name, pid, quantity)
            case _ if event == EOL:
                self.touched.discard(pid)
                self.sent_to.pop(pid, None)
                self.limited.discard(pid)
                self.credit_from.pop(pid, None)
                self.unconfirmed.pop(pid, None)
                for tag in self.consuming.pop(pid, set()):
                    self.specs.pop(tag, None)
                watched = self.publishing_to.pop(pid, None)
                if watched is not None:
                    actors.demonitor(watched[0], flush=True)
                return [QueueEol(name), Unblock(name)]
        raise TypeError(f"classic queue event not understood: {event!r}")

    def _drop_stray_consumer(self, name: str, pid: Pid, tag: str) -> None:
        """A delivery to a consumer this channel does not have on that process: one the
        client cancelled while the delivery was on its way (the queue has dropped it
        already), or one the queue holds and the channel does not. The channel returns
        such messages; telling the queue to drop the consumer first means they go to
        another consumer or wait, rather than coming straight back to this one for
        ever."""
        log.debug("delivery from %s to consumer %r this channel does not have",
                  self._where(name), tag)
        gen_server.cast(pid, c.BasicCancel(self.channel, tag))

    def _notify_sent(self, pid: Pid, count: int) -> None:
        """``rabbit_amqqueue_common:notify_sent``: the queue hears of every
        `NOTIFY_SENT_EVERY` deliveries at once."""
        sent = self.sent_to.get(pid, 0) + count
        if sent >= NOTIFY_SENT_EVERY:
            told = sent - sent % NOTIFY_SENT_EVERY
            gen_server.cast(pid, c.NotifySent(self.channel, told))
            sent -= told
        self.sent_to[pid] = sent

    def _queue_down(self, ref: Ref, pid: Pid, reason: Any) -> list[Action] | None:
        """A queue process this channel used is gone: it owes no more credit. Unless it
        ended normally (a deleted queue, whose ``eol`` came first), it took this
        channel's consumers with it, which are cancelled, and the publishes it had not
        confirmed, which are rejected (``basic.nack``), as ``rabbit_classic_queue``
        settles a queue's ``DOWN`` (a process that was gone before the channel watched
        it, or whose node went, counts too)."""
        watched = self.publishing_to.get(pid)
        if watched is None or watched[0] != ref:
            return None
        name = watched[1]
        del self.publishing_to[pid]
        self.credit_from.pop(pid, None)
        self.sent_to.pop(pid, None)
        self.touched.discard(pid)
        self.limited.discard(pid)
        seqs = self.unconfirmed.pop(pid, set())
        tags = self.consuming.pop(pid, set())
        actions: list[Action] = [Unblock(name)]
        if reason == "normal":
            for tag in tags:
                self.specs.pop(tag, None)
            return actions
        if seqs:
            actions.append(Rejected(name, tuple(sorted(seqs))))
        actions.extend(ConsumerCancelled(name, tag) for tag in sorted(tags)
                       if not self._reconsume(tag))
        return actions

    def _reconsume(self, tag: str) -> bool:
        """3.10: register a consumer of a queue whose process died again, on the queue's
        record (tried as any consume is, so a restarting process is waited for); False,
        and the consumer is cancelled, where the release does not, where the consumer
        asked for `x-cancel-on-ha-failover`, or where the queue cannot be reached."""
        entry = self.specs.pop(tag, None)
        if entry is None or not self.b.reconsume_on_queue_down:
            return False
        name, spec = entry
        if spec.arguments.get("x-cancel-on-ha-failover") is True:
            return False
        try:
            self.consume(name, spec)
        except AmqpError as exc:
            log.info("consumer %r of %s not registered again: %s", tag, self._where(name),
                     exc.explanation)
            return False
        return True

    def close(self) -> None:
        """The channel is closing: each queue it used drops its consumers and takes its
        unacked messages back now, so an auto-delete queue is gone before close-ok."""
        for pid in list(self.touched):
            try:
                gen_server.call(pid, c.NotifyDown(self.channel), CALL_TIMEOUT)
            except CallExit:
                pass  # the queue is gone already
        self.touched.clear()
