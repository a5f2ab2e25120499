"""Quorum queues behind the channel's `QueueBackend` (`rabbit_quorum_queue`).

A channel keeps one `rabbit_fifo_client` session per quorum queue it
touched, created lazily, and talks to the queue's Ra members through it:
publishes are pipelined enqueues correlated with the channel's publish
sequence numbers, consumers are `simple_prefetch` checkouts, acks and
rejections are settle / return / discard commands. Everything the queue
says later (`applied`, deliveries, leader changes, `eol`) arrives in the
channel's mailbox as a Ra event, goes through the fifo client, and comes out
as the channel's `Action`s (docs/channel.md, "Quorum queues"). The queue table itself is a
`QueueRegistry`, shared by the nodes of the cluster.

Queues of other types: a declare that resolves to `classic` (an explicit
`x-queue-type`, the vhost's or node's default queue type, or properties a
quorum queue cannot have; `channel.queue_types.queue_type`) goes to the `classic` backend
when one is configured, and is refused with 406 otherwise; streams are not
supported.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import actors
from actors import Node, trace
from channel.errors import AmqpError, erlang_term, rs
from channel.limits.limits import QueueLimits
from channel.queue_types.backend import (
    Action,
    Block,
    ConsumerReleased,
    ConsumeSpec,
    DeclareOk,
    Deliver,
    Delivery,
    Got,
    Message,
    QueueBackend,
    QueueEol,
    QueueSession,
    Rejected,
    Settled,
    Unblock,
)
from channel.queue_types.consumer_args import check_consume_arguments, consumer_priority
from channel.queue_types.consumer_timeout import consumer_timeout, queue_timeout
from channel.queue_types.qq_message import QqMessage
from channel.queue_types.queue_args import (
    Declared,
    check_declare_properties,
    check_equivalence,
    check_queue_name,
    validate_quorum_args,
)
from channel.queue_types.queue_registry import QueueRecord, QueueRegistry
from channel.queue_types.queue_type import declared_type, default_queue_type
from channel.queue_types.quorum.qq_delete import delete_queue
from fifo import client, client_owner
from fifo.client_effects import Out
from fifo.client_records import SOFT_LIMIT, ClientState, init
from fifo.commands import make_purge
from fifo.queries import query_stat
from fifo.replica_trace import warren_id
from ra import api
from releases import WHEN_PERMITTED, when_denied

__all__ = ["QuorumBackend", "QuorumSession"]

log = logging.getLogger("warren.channel")

#: `rabbit_quorum_queue` STAT_TIMEOUT: passive declare gives (0, 0) when slower.
STAT_TIMEOUT = 250


class QuorumBackend:
    """Node-wide: hands each channel a `QuorumSession` over the shared registry."""

    def __init__(self, node: Node, registry: QueueRegistry, *,
                 classic: QueueBackend | None = None, default_queue_type: str = "quorum",
                 on_deleted: Callable[[str, str], None] | None = None,
                 soft_limit: int = SOFT_LIMIT, net_ticktime: int = 60,
                 command_timeout: int = 5000) -> None:
        self.node = node
        self.registry = registry
        self.classic = classic
        #: the node's `default_queue_type`
        self.default_queue_type = default_queue_type
        #: a vhost's `default_queue_type` (its metadata), None where it sets none
        self.vhost_default_queue_type: Callable[[str], str | None] = lambda _vhost: None
        self.on_deleted = on_deleted
        self.soft_limit = soft_limit
        self.net_ticktime = net_ticktime
        self.command_timeout = command_timeout
        #: live sessions by channel pid (introspection: pending Raft commands)
        self.sessions: dict[Any, QuorumSession] = {}
        #: leaders being written to the registry, by (vhost, queue)
        self._recording: dict[tuple[str, str], Any] = {}
        self._queue_limits: QueueLimits | None = None
        #: whether a deprecated feature may be used on this node: its release's default
        #: unless the node's config (`amqp.deprecated_features_permit`) says otherwise
        self.permits: Callable[[str], bool] = registry.release.permits

    @property
    def queue_limits(self) -> QueueLimits | None:
        """`BrokerContext.check_queue_limits`, asked before a queue is created; the
        classic backend asks it too, counting the queues of both."""
        return self._queue_limits

    @queue_limits.setter
    def queue_limits(self, hook: QueueLimits | None) -> None:
        self._queue_limits = hook
        if self.classic is not None and hasattr(self.classic, "queue_limits"):
            self.classic.queue_limits = None if hook is None else (
                lambda vhost, name, _count: hook(vhost, name, self.queue_count))

    def queue_count(self, vhost: str | None = None) -> int:
        count = len(self.registry.list(vhost))
        classic_count = getattr(self.classic, "queue_count", None)
        return count + (classic_count(vhost) if classic_count is not None else 0)

    def queue_type_default(self, vhost: str) -> str:
        """The type of a declare in `vhost` that names none: the vhost's default, else
        the node's."""
        return default_queue_type(self.vhost_default_queue_type(vhost), self.default_queue_type)

    def session(self, channel: Any, vhost: str, owner: Any, user: str) -> QuorumSession:
        classic = None if self.classic is None else self.classic.session(channel, vhost, owner,
                                                                         user)
        s = QuorumSession(self, channel, vhost, owner, user, classic)
        self.sessions[channel] = s
        return s

    def connection_closed(self, owner: Any) -> None:
        if self.classic is not None:
            self.classic.connection_closed(owner)

    def leader_changed(self, vhost: str, name: str, leader: Any) -> None:
        """A session saw `leader` lead the queue: record it once in the registry.

        The registry write may be a metadata command (a Raft round trip), so
        it runs in a process of its own; a leader already recorded, or already
        being recorded by this node, costs nothing.
        """
        record = self.registry.lookup(vhost, name)
        if record is None or record.leader == leader or leader not in record.servers:
            return
        key = (vhost, name)
        if self._recording.get(key) == leader:
            return
        self._recording[key] = leader

        def record_leader() -> None:
            try:
                self.registry.update_leader(vhost, name, leader)
            finally:
                if self._recording.get(key) == leader:
                    del self._recording[key]

        actors.spawn(record_leader)


@dataclass
class _Queue:
    """One channel's client state towards one quorum queue."""

    record: QueueRecord
    client: ClientState
    timers: dict[str, Any] = field(default_factory=dict)


class QuorumSession:
    """`rabbit_queue_type` state of one channel: fifo client sessions by queue name."""

    def __init__(self, backend: QuorumBackend, channel: Any, vhost: str, owner: Any,
                 user: str, classic: QueueSession | None) -> None:
        self.b = backend
        self.channel = channel
        self.vhost = vhost
        self.owner = owner
        self.user = user
        self.classic = classic
        self.queues: dict[str, _Queue] = {}
        self.by_cluster: dict[str, str] = {}

    # ----------------------------------------------------------------- lookup

    def _record(self, name: str) -> QueueRecord | None:
        return self.b.registry.lookup(self.vhost, name)

    def _where(self, name: str) -> str:
        return rs("queue", name, self.vhost)

    def consumer_timeout(self, name: str, node_default: int | None) -> int | None:
        """The queue's consumer timeout (argument and policy), else the node's."""
        record = self._record(name)
        if record is None:
            return self.classic.consumer_timeout(name, node_default) if (
                self.classic is not None and hasattr(self.classic, "consumer_timeout")
            ) else node_default
        return queue_timeout(record.arguments, record.policy, node_default)

    def _not_found(self, name: str) -> AmqpError:
        return AmqpError("NOT_FOUND", f"no {self._where(name)}")

    def _queue(self, name: str) -> _Queue | None:
        """The client state for `name`, created the first time the channel uses it."""
        q = self.queues.get(name)
        if q is not None:
            return q
        record = self._record(name)
        if record is None:
            return None
        state = init(self._servers(record), self.channel, soft_limit=self.b.soft_limit,
                     net_ticktime=self.b.net_ticktime, node=actors.node(),
                     machine_version=self.b.registry.release.machine_version,
                     delivery_count_header=self.b.registry.release.delivery_count_header)
        q = _Queue(record, state)
        self.queues[name] = q
        self.by_cluster[record.ra_name] = name
        return q

    def _servers(self, record: QueueRecord) -> list[Any]:
        leader = record.leader
        return ([leader] if leader else []) + [s for s in record.servers if s != leader]

    def _stat(self, record: QueueRecord, timeout: int) -> tuple[int, int]:
        """(ready messages, consumers), or (0, 0) when the leader does not answer in time."""
        result = api.leader_query(self._servers(record), query_stat, timeout)
        if result[0] == "ok":
            return tuple(result[1][1])
        return (0, 0)

    def exists(self, name: str) -> bool:
        if self._record(name) is not None:
            return True
        return self.classic is not None and self.classic.exists(name)

    def routable(self, name: str) -> bool:
        if self._record(name) is not None:
            return True
        return self.classic is not None and self.classic.routable(name)

    def check_access(self, name: str) -> None:
        if self._record(name) is not None:
            return  # quorum queues are never exclusive
        if self.classic is not None:
            self.classic.check_access(name)
            return
        raise self._not_found(name)

    # ---------------------------------------------------------------- declare

    def declare(self, name: str, *, passive: bool, durable: bool, exclusive: bool,
                auto_delete: bool, arguments: Mapping[str, Any]) -> DeclareOk:
        record = self._record(name)
        if passive:
            if record is None:
                if self.classic is not None:
                    return self.classic.declare(name, passive=True, durable=durable,
                                                exclusive=exclusive, auto_delete=auto_delete,
                                                arguments=arguments)
                raise self._not_found(name)
            return DeclareOk(name, *self._stat(record, STAT_TIMEOUT))
        args = {k: v for k, v in arguments.items() if k != "x-name-prefix"}
        named = "x-queue-type" in args
        args["x-queue-type"] = declared_type(args, durable=durable, exclusive=exclusive,
                                             auto_delete=auto_delete,
                                             default=self.b.queue_type_default(self.vhost))
        if args["x-queue-type"] == "classic":
            self._check_master_locator(args)
        if record is None and self.classic is not None and self.classic.exists(name):
            # an existing classic queue compares the (filled-in) type like any argument
            return self.classic.declare(name, passive=False, durable=durable,
                                        exclusive=exclusive, auto_delete=auto_delete,
                                        arguments=self._classic_args(args, named))
        if record is None and args["x-queue-type"] in ("classic", "stream"):
            return self._declare_classic(name, durable, exclusive, auto_delete,
                                         self._classic_args(args, named))
        if args["x-queue-type"] == "quorum":
            check_queue_name(name)
        if record is not None:
            return self._existing(record, durable and not exclusive, exclusive, auto_delete, args)
        validate_quorum_args(name, self.vhost, args)
        if self.b.queue_limits is not None:
            self.b.queue_limits(self.vhost, name, self.b.queue_count)
        check_declare_properties(name, self.vhost, durable=durable, exclusive=exclusive,
                                 auto_delete=auto_delete)
        outcome, record = self.b.registry.declare(self.vhost, name, durable=durable,
                                                  arguments=args,
                                                  declaring_node=actors.node())
        if outcome == "existing":
            return self._existing(record, durable, exclusive, auto_delete, args)
        return DeclareOk(name, 0, 0)

    def _classic_args(self, args: dict[str, Any], named: bool) -> dict[str, Any]:
        """A classic declare's arguments: 3.10 fills in no type the client did not name
        unless the vhost has a default queue type (`declare_records_queue_type`)."""
        if named or self.b.registry.release.declare_records_queue_type \
                or self.b.vhost_default_queue_type(self.vhost) is not None:
            return args
        return {k: v for k, v in args.items() if k != "x-queue-type"}

    def _check_master_locator(self, args: Mapping[str, Any]) -> None:
        """`rabbit_classic_queue:validate_arguments`: where the release denies the
        deprecated `queue_master_locator` (4.3), `x-queue-master-locator` on a classic
        declare (new or existing queue) is a 541 with RabbitMQ's deprecation warning,
        unless the node's config permits the feature."""
        release = self.b.registry.release
        if "x-queue-master-locator" not in args:
            return
        if not self.b.permits("queue_master_locator"):
            raise AmqpError("INTERNAL_ERROR", when_denied(
                "queue_master_locator", release.deprecated_features.get(
                    "queue_master_locator", "permitted_by_default")))
        if release.deprecated_features:  # used while permitted: RabbitMQ warns
            log.warning("Deprecated features: `queue_master_locator`: %s",
                        WHEN_PERMITTED["queue_master_locator"])

    def _declare_classic(self, name: str, durable: bool, exclusive: bool, auto_delete: bool,
                         args: dict[str, Any]) -> DeclareOk:
        kind = args.get("x-queue-type", "classic")
        if self.classic is None or kind != "classic":  # streams are not supported
            raise AmqpError(
                "PRECONDITION_FAILED",
                f"invalid arg 'x-queue-type' for {self._where(name)}: "
                f"\"unsupported queue type '{kind}'\"")
        return self.classic.declare(name, passive=False, durable=durable, exclusive=exclusive,
                                    auto_delete=auto_delete, arguments=args)

    def _existing(self, record: QueueRecord, durable: bool, exclusive: bool,
                  auto_delete: bool, args: Mapping[str, Any]) -> DeclareOk:
        name = record.name
        if exclusive:
            raise AmqpError(
                "RESOURCE_LOCKED",
                f"cannot obtain exclusive access to locked {self._where(name)}. It could be "
                "originally declared on another connection or the exclusive property value "
                "does not match that of the original declaration.")
        check_equivalence(name, self.vhost, Declared(record.durable, False, record.arguments),
                          Declared(durable, auto_delete, args),
                          self.b.registry.release.quorum_queue_arguments)
        return DeclareOk(name, *self._stat(record, STAT_TIMEOUT))

    # -------------------------------------------------------- delete, purge

    def delete(self, name: str, *, if_unused: bool, if_empty: bool) -> int:
        record = self._record(name)
        if record is None:
            if self.classic is not None:
                return self.classic.delete(name, if_unused=if_unused, if_empty=if_empty)
            return 0
        for flag, set_ in (("if-unused", if_unused), ("if-empty", if_empty)):
            if set_:
                raise AmqpError(
                    "NOT_IMPLEMENTED",
                    f"cannot delete {self._where(name)}. queue.delete operations with {flag} "
                    "flag set are not supported by quorum queues")
        return delete_queue(self.b.registry, self.vhost, name, timeout=self.b.command_timeout,
                            on_deleted=self.b.on_deleted)

    def purge(self, name: str) -> int:
        record = self._record(name)
        if record is None:
            if self.classic is not None:
                return self.classic.purge(name)
            raise self._not_found(name)
        reply = api.process_command(self._servers(record), make_purge(),
                                    self.b.command_timeout)
        match reply:
            case ("ok", ("purge", count), _leader):
                return int(count)
        raise AmqpError("INTERNAL_ERROR",
                        f"Cannot purge {self._where(name)}: {erlang_term(reply)}")

    # ---------------------------------------------------------------- publish

    def deliver(self, queues: list[str], message: Message, correlation: int | None,
                ) -> list[Action]:
        actions: list[Action] = []
        classic = [q for q in queues if self._record(q) is None]
        if classic and self.classic is not None:
            actions.extend(self.classic.deliver(classic, message, correlation))
        quorum = [q for q in queues if q not in classic]
        if quorum:
            actions.extend(self.deliver_stored(quorum, QqMessage.from_message(message),
                                               correlation))
        return actions

    def deliver_stored(self, queues: list[str], msg: QqMessage, correlation: int | None,
                       ) -> list[Action]:
        """Enqueue an already stored message (a dead letter keeps its history)."""
        actions: list[Action] = []
        for name in queues:
            q = self._queue(name)
            if q is None:
                continue
            out = self._run(q, partial(client.enqueue, name, correlation, msg, q.client))
            if out.tag == "reject_publish":
                if correlation is not None:
                    actions.append(Rejected(name, (correlation,), "maxlen"))
                continue
            if trace.enabled():
                # the fifo client's sequence number of this command: what comes back
                # applied (the history's commit latency starts here)
                trace.emit("enqueue_sent", channel=self.channel, queue=name,
                           msg_id=warren_id(msg), pub_seq=correlation,
                           raft_correlation=q.client.next_seq - 1)
            actions.extend(self._actions(name, out.actions))
        return actions

    # -------------------------------------------------------------- consumers

    def validate_consume(self, name: str, spec: ConsumeSpec) -> None:
        """Everything that refuses a consumer before consume-ok (`rabbit_channel`)."""
        if self._record(name) is None:
            if self.classic is not None:
                self.classic.validate_consume(name, spec)
                return
            raise self._not_found(name)
        check_consume_arguments(name, self.vhost, "quorum", spec.arguments)
        if spec.global_qos:
            raise AmqpError("NOT_IMPLEMENTED",
                            f"{self._where(name)} does not support global qos", (60, 20))

    def consume(self, name: str, spec: ConsumeSpec) -> list[Action]:
        if self._record(name) is None and self.classic is not None:
            return self.classic.consume(name, spec)
        self.validate_consume(name, spec)
        q = self._queue(name)
        if q is None:
            raise self._not_found(name)
        priority = consumer_priority(spec.arguments)
        meta: dict[str, Any] = {"ack": spec.ack_required, "prefetch": spec.prefetch,
                                "args": list(spec.arguments.items()), "username": self.user,
                                "priority": priority}
        if self.b.registry.release.consumer_timeout_enforcer == "queue":
            # 4.3: the queue times the consumer out, so it is told the timeout
            record = self._record(name) or q.record  # the policy in force now
            meta["timeout"] = consumer_timeout(spec.arguments, record.arguments,
                                               record.policy, spec.node_timeout)
        tag = spec.consumer_tag
        out = self._run(q, lambda r: client.checkout(
            tag, ("simple_prefetch", spec.prefetch), meta, q.client, r))
        if out.tag == "ok":
            return self._actions(name, out.actions)
        if out.tag == "timeout":
            raise AmqpError("INTERNAL_ERROR",
                            f"timed out consuming from quorum {self._where(name)}: "
                            f"{erlang_term(out.result)}")
        raise AmqpError("INTERNAL_ERROR",
                        f"failed consuming from quorum {self._where(name)}: "
                        f"{erlang_term(out.result)}")

    def cancel(self, name: str, consumer_tag: str) -> list[Action]:
        q = self.queues.get(name)
        if q is None:
            if self.classic is not None and self._record(name) is None:
                return self.classic.cancel(name, consumer_tag)
            return []
        out = self._run(q, lambda r: client.cancel_checkout(consumer_tag, "cancel",
                                                            q.client, r))
        return self._actions(name, out.actions)

    def settle(self, name: str, op: str, consumer_tag: str | int,
               msg_ids: list[Any]) -> list[Action]:
        q = self.queues.get(name)
        if q is None:
            if self.classic is not None and self._record(name) is None:
                return self.classic.settle(name, op, consumer_tag, msg_ids)
            return []
        fun = {"complete": client.settle, "requeue": client.return_,
               "discard": client.discard}[op]
        out = self._run(q, lambda _r: fun(consumer_tag, msg_ids, q.client))
        return self._actions(name, out.actions)

    def get(self, name: str, *, ack_required: bool, delivery_tag: int,
            node_timeout: int | None = None) -> Got | None:
        record = self._record(name)
        if record is None and self.classic is not None:
            return self.classic.get(name, ack_required=ack_required, delivery_tag=delivery_tag,
                                    node_timeout=node_timeout)
        q = self._queue(name)
        if q is None:
            raise self._not_found(name)
        if q.record.arguments.get("x-single-active-consumer") is True:
            raise AmqpError(
                "RESOURCE_LOCKED",
                f"cannot obtain access to locked {self._where(name)}. basic.get operations "
                "are not supported by quorum queues with single active consumer")
        settlement = "unsettled" if ack_required else "settled"
        timeout = None
        if self.b.registry.release.consumer_timeout_enforcer == "queue":
            # 4.3 holds a got message for the queue's consumer timeout, else the node's
            # (`rabbit_queue_type:dequeue/5`), else 24 hours; up to 4.2 the channel's
            # tick times out a got message as it does a delivery
            current = self._record(name) or q.record
            timeout = consumer_timeout({}, current.arguments, current.policy, node_timeout)
        out = self._run(q, lambda r: client.dequeue(name, delivery_tag, settlement,
                                                    q.client, r, timeout))
        if out.tag == "empty":
            return None
        if out.tag != "ok":
            raise AmqpError("INTERNAL_ERROR",
                            f"Cannot get a message from {self._where(name)}: "
                            f"{erlang_term(out.result)}")
        ready, (_q, _ref, msg_id, redelivered, msg) = out.result
        return Got(Delivery(msg_id, self._to_message(msg), redelivered), int(ready))

    # ----------------------------------------------------------------- events

    def handle_event(self, msg: Any) -> list[Action] | None:
        match msg:
            case ("ra_event", from_, evt):
                cluster = from_[0] if isinstance(from_, tuple) else from_
                name = self.by_cluster.get(cluster)
                if name is None or name not in self.queues:
                    return []  # a queue this channel no longer tracks
                return self._event(name, from_, evt)
            case ("$gen_cast", ("queue_event", name, (leader, "timeout"))):
                if name not in self.queues:
                    return []
                self.queues[name].timers.pop("slow", None)
                return self._event(name, leader, "timeout")
        if self.classic is not None:
            return self.classic.handle_event(msg)
        return None

    def _event(self, name: str, from_: Any, evt: Any) -> list[Action]:
        q = self.queues[name]
        out = self._run(q, lambda r: client.handle_ra_event(name, from_, evt, q.client, r))
        if out.tag == "eol":
            self._forget(name)
            return [QueueEol(name), Unblock(name)]
        if out.tag == "protocol_error":
            _, fmt, args = out.result
            raise AmqpError("INTERNAL_ERROR", _format(fmt, args))
        leader = q.client.leader
        if leader is not None and leader != q.record.leader:
            q.record = replace(q.record, leader=leader)
            self.b.leader_changed(self.vhost, name, leader)
        return self._actions(name, out.actions)

    def close(self) -> None:
        """The channel is gone. The queues' leaders monitor it: its consumers are
        removed and their unacked messages returned when they see it down."""
        for name in list(self.queues):
            self._forget(name)
        self.b.sessions.pop(self.channel, None)
        if self.classic is not None:
            self.classic.close()

    def _to_message(self, msg: Any) -> Message:
        """A stored message as this node's release delivers it."""
        if isinstance(msg, QqMessage):
            return msg.to_message(self.b.registry.release.last_death_headers)
        raise TypeError(f"not a message stored by a channel: {msg!r}")

    def pending_raft_commands(self) -> int:
        """Commands pipelined to quorum queues and not applied yet (channel info)."""
        return sum(len(q.client.pending) for q in self.queues.values())

    # -------------------------------------------------------------- internals

    def _forget(self, name: str) -> None:
        q = self.queues.pop(name, None)
        if q is None:
            return
        for ref in list(q.timers):
            client_owner.cancel(q.timers, ref)
        self.by_cluster.pop(q.record.ra_name, None)

    def _run(self, q: _Queue, op: Callable[[Any], Out]) -> Out:
        out = client_owner.drive(op, q.timers)
        if out.tag != "call":
            q.client = out.state
        return out

    def _trace_soft_limit(self, kind: str, name: str) -> None:
        """The session crossed ``quorum_commands_soft_limit`` (value: pending commands)."""
        if trace.enabled():
            q = self.queues.get(name)
            pending = None if q is None else len(q.client.pending)
            trace.emit(kind, entity_type="queue_client", entity_id=f"{self.channel!r}/{name}",
                       queue=name, value=pending)

    def _actions(self, name: str, fifo_actions: list[Any]) -> list[Action]:
        """fifo client actions as channel actions (`handle_event`); the rest is ignored."""
        actions: list[Action] = []
        for a in fifo_actions:
            match a:
                case ("block", _cluster):
                    actions.append(Block(name))
                    self._trace_soft_limit("soft_limit_on", name)
                case ("unblock", _cluster):
                    actions.append(Unblock(name))
                    self._trace_soft_limit("soft_limit_off", name)
                case ("settled", _q, corrs):
                    actions.append(Settled(name, tuple(corrs)))
                case ("released", _q, tag, msg_ids, reason):
                    actions.append(ConsumerReleased(name, tag, tuple(msg_ids), reason))
                case ("deliver", tag, ack, msgs):
                    deliveries = tuple(Delivery(mid, self._to_message(m), redelivered)
                                       for _q, _ref, mid, redelivered, m in msgs)
                    actions.append(Deliver(name, tag, ack, deliveries))
        return actions




def _format(fmt: str, args: list[Any]) -> str:
    """Erlang `~tp` / `~p` placeholders filled with the rendered terms."""
    out = fmt
    for arg in args:
        for token in ("~tp", "~p"):
            if token in out:
                out = out.replace(token, erlang_term(arg), 1)
                break
    return out
