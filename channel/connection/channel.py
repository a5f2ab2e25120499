"""The channel process (`rabbit_channel`): AMQP methods of one channel number.

The reader hands it complete commands; it answers through its own writer
process, routes publishes through the node's `Topology` and reaches queues only
through its `QueueSession` (see `channel.queue_types.backend`). Pure pieces (confirm
bookkeeping and coalescing, pending acks, routing, argument checks) live in
their own modules; this module is the dispatch of `rabbit_channel:handle_method/3` plus the
effects. Soft errors close the channel with channel.close; hard errors are
handed to the reader, which closes the connection; anything else crashes the
process: its supervisor stops its writer and limiter, and the reader turns the
abnormal exit into 541 INTERNAL_ERROR.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, assert_never

from pamqp import commands as C

import actors
from actors import trace
from channel.access.permissions import Access
from channel.connection.config import BrokerContext
from channel.connection.confirms import Unconfirmed, coalesce
from channel.connection.trace_ids import id_in, msg_id_of
from channel.connection.unacked import Pending, Unacked
from channel.errors import AmqpError, Atom, erlang_term, rs
from channel.exchanges.exchange import EXCHANGE_TYPES
from channel.exchanges.routing import routing_keys
from channel.limits.credit_flow import CreditFlow, Grant
from channel.limits.limiter import limit_prefetch
from channel.protocol import writer as wr
from channel.protocol.access_methods import AccessRequestOk
from channel.protocol.framing import Content, MethodFrame, Out, method_ids
from channel.queue_types.backend import (
    Action,
    Block,
    ConsumerCancelled,
    ConsumerReleased,
    ConsumeSpec,
    Deliver,
    Message,
    QueueEol,
    Rejected,
    Settled,
    Unblock,
)
from channel.queue_types.consumer_timeout import released_error, timed_out
from channel.queue_types.header_table import drop_header
from channel.queue_types.queue_args import MAX_EXPIRY

__all__ = ["ChannelProcess", "ConnectionInfo", "channel_main", "parse_expiration"]

log = logging.getLogger("warren.channel")

MAX_MSG_SIZE = 536_870_912


@dataclass(frozen=True)
class ConnectionInfo:
    """What a channel knows of its connection."""

    user: str
    vhost: str
    owner: Any
    capabilities: dict[str, Any] = field(default_factory=dict)


def parse_expiration(value: str) -> int:
    """The `expiration` property as ms, or 406 as `rabbit_basic:parse_expiration`."""
    digits = value
    sign = 1
    if digits[:1] in ("+", "-"):
        sign = -1 if digits[0] == "-" else 1
        digits = digits[1:]
    n = 0
    i = 0
    while i < len(digits) and digits[i].isascii() and digits[i].isdigit():
        n = n * 10 + int(digits[i])
        i += 1
    if i == 0:
        reason: Any = Atom("no_integer")
    elif i < len(digits):
        reason = (Atom("leftover_string"), digits[i:])
    else:
        n *= sign
        if n < 0:
            reason = (Atom("value_negative"), n)
        elif n > MAX_EXPIRY:
            reason = (Atom("value_too_large"), n)
        else:
            return n
    raise AmqpError(
        "PRECONDITION_FAILED", f"invalid expiration '{value}': {erlang_term(reason)}"
    )


def _strip(name: str) -> str:
    return name.replace("\r", "").replace("\n", "")


@dataclass
class _Tx:
    publishes: list[tuple[Message, list[str], bool, int]] = field(default_factory=list)
    settles: list[tuple[str, list[Pending]]] = field(default_factory=list)
    committing: bool = False
    failed: bool = False


class ChannelProcess:
    def __init__(self, ctx: BrokerContext, number: int, reader: Any, writer: Any,
                 conn: ConnectionInfo, limiter: Any = None) -> None:
        self.ctx = ctx
        self.limiter = limiter
        self.cfg = ctx.config
        self.number = number
        self.reader = reader
        self.writer = writer
        self.conn = conn
        self.vhost = conn.vhost
        self.me = actors.self()
        self.clock = actors.get_node().clock
        self.state = "starting"
        self.credit = CreditFlow(self.me, *self.cfg.credit_flow_default_credit)
        self.next_tag = 1
        self.unacked = Unacked()
        self.consumers: dict[str, tuple[str, ConsumeSpec]] = {}
        self.confirm_enabled = False
        self.publish_seqno = 1
        #: the last publish's raw properties and their decoding (see `_properties`)
        self._last_properties: tuple[bytes, Any] | None = None
        #: the routing keys of the previous publish without CC / BCC: consecutive
        #: publishes with the same key share one string and one tuple (a classic
        #: queue keeps them with every message it holds)
        self._last_keys: tuple[str, ...] = ()
        self.unconfirmed = Unconfirmed()
        self.confirmed: list[int] = []
        self.rejected: list[int] = []
        self.tx: _Tx | None = None
        self.consumer_prefetch = 0
        self.global_prefetch = 0
        self.most_recent = ""
        self.session = ctx.backend.session(self.me, self.vhost, conn.owner, conn.user)
        self.access = Access(ctx.users, conn.user, self.vhost)
        self.stopped = False
        self._arm_tick()
        self.handlers: dict[str, Callable[[Any, Content | None], None]] = {
            "Channel.Flow": self.channel_flow,
            "Access.Request": self.access_request,
            "Exchange.Declare": self.exchange_declare,
            "Exchange.Delete": self.exchange_delete,
            "Exchange.Bind": self.exchange_bind,
            "Exchange.Unbind": self.exchange_unbind,
            "Queue.Declare": self.queue_declare,
            "Queue.Bind": self.queue_bind,
            "Queue.Unbind": self.queue_unbind,
            "Queue.Purge": self.queue_purge,
            "Queue.Delete": self.queue_delete,
            "Basic.Qos": self.basic_qos,
            "Basic.Consume": self.basic_consume,
            "Basic.Cancel": self.basic_cancel,
            "Basic.CancelOk": self.basic_cancel_ok,
            "Basic.Publish": self.basic_publish,
            "Basic.Get": self.basic_get,
            "Basic.Ack": self.basic_ack,
            "Basic.Reject": self.basic_reject,
            "Basic.Nack": self.basic_nack,
            "Basic.Recover": self.basic_recover,
            "Basic.RecoverAsync": self.basic_recover,
            "Confirm.Select": self.confirm_select,
            "Tx.Select": self.tx_select,
            "Tx.Commit": self.tx_commit,
            "Tx.Rollback": self.tx_rollback,
        }

    # ------------------------------------------------------------------ loop

    def run(self) -> None:
        while not self.stopped:
            msg = actors.receive()
            queue_event = self.handle(msg)
            while queue_event and not self.stopped:
                more = actors.receive(0, match=self._is_queue_event)
                if more is actors.TIMEOUT:
                    break
                self.handle(more)
            self.send_confirms_and_nacks()

    def _is_queue_event(self, msg: Any) -> bool:
        return not (isinstance(msg, tuple) and msg and msg[0] in (
            "method", "ready_for_close", "shutdown", "crash", "info", "bump_credit", "tick"))

    def handle(self, msg: Any) -> bool:
        """Handle one mailbox message; True when it was a queue event."""
        kind = msg[0] if isinstance(msg, tuple) and msg else None
        if kind == "method":
            _, method, content, flow = msg
            if flow:
                self._send_grants(self.credit.ack(self.reader))
            self.handle_method(method, content)
            return False
        if kind == "ready_for_close":
            self.write(Out.of(C.Channel.CloseOk))
            wr.flush(self.writer)
            self.stop()
            return False
        if kind == "shutdown":
            wr.flush(self.writer)
            self.stop()
            return False
        if kind == "crash":
            raise RuntimeError("channel crash requested")
        if kind == "info":
            actors.send(msg[1], (msg[2], self.info()))
            return False
        if kind == "bump_credit":
            self._send_grants(self.credit.handle_bump_msg(msg[1]))
            return False
        if kind == "tick":
            self.tick()
            return False
        actions = self.session.handle_event(msg)
        if actions is None:
            log.debug("channel %s: unexpected message %r", self.number, msg)
            return False
        self._guarded(lambda: self.handle_actions(actions), (0, 0))
        return True

    def stop(self) -> None:
        self.stopped = True

    def _arm_tick(self) -> None:
        actors.send_after(self.cfg.channel_tick_interval, self.me, ("tick",))

    def tick(self) -> None:
        """`handle_info(tick)`: the consumer timeout of the oldest unacked delivery,
        in the releases where the channel enforces it (up to 4.2; from 4.3 the
        queues time out their own deliveries and the tick leaves them be)."""
        self._arm_tick()
        oldest = self.unacked.oldest()
        if oldest is None or self.state == "closing" \
                or self.cfg.release.consumer_timeout_enforcer != "channel":
            return
        timeout_of = getattr(self.session, "consumer_timeout", None)
        timeout = (timeout_of(oldest.queue, self.cfg.consumer_timeout) if timeout_of is not None
                   else self.cfg.consumer_timeout)
        error = timed_out(self.number, oldest.delivered_at, self.clock.monotonic_ms(), timeout)
        if error is not None:
            log.warning("consumer '%s' on channel %s and %s has timed out waiting for a consumer "
                        "acknowledgement of a delivery with delivery tag = %s. Timeout used: "
                        "%s ms", oldest.consumer_tag, self.number,
                        rs("queue", oldest.queue, self.vhost), oldest.tag, timeout)
            self.raise_error(error)

    def info(self) -> dict[str, Any]:
        now = self.clock.monotonic_ms() * 1000
        state = self.credit.state(now) if self.state == "running" else self.state
        pending = getattr(self.session, "pending_raft_commands", None)
        return {
            "number": self.number, "state": state, "consumers": len(self.consumers),
            "unacked": len(self.unacked), "unconfirmed": len(self.unconfirmed),
            "next_tag": self.next_tag, "publish_seqno": self.publish_seqno,
            "credit_blocked": list(self.credit.credit_blocked),
            "pending_raft_commands": pending() if pending is not None else 0,
        }

    # --------------------------------------------------------------- helpers

    def write(self, out: Out | MethodFrame, content: Content | None = None) -> None:
        wr.send_command(self.writer, out, content)

    def _send_grants(self, grants: list[Grant]) -> None:
        for g in grants:
            actors.send(g.to, g.message())

    def _now_us(self) -> int:
        return int(self.clock.monotonic() * 1_000_000)

    def _guarded(self, fn: Callable[[], None], ids: tuple[int, int]) -> None:
        try:
            fn()
        except AmqpError as error:
            self.raise_error(error.with_method(ids))

    def raise_error(self, error: AmqpError) -> None:
        if error.hard:
            actors.send(self.reader, ("channel_exit", self.number, error))
            self.stop()
            return
        if self.state == "closing":
            return
        self.write(Out.of(C.Channel.Close, reply_code=error.code, reply_text=error.reply_text,
                          class_id=error.method[0], method_id=error.method[1]))
        self.state = "closing"

    def expand(self, name: str) -> str:
        name = _strip(name)
        if name:
            return name
        if not self.most_recent:
            raise AmqpError("NOT_FOUND", "no previously declared queue")
        return self.most_recent

    # -------------------------------------------------------------- dispatch

    def handle_method(self, method: MethodFrame, content: Content | None) -> None:
        name = method.name
        if self.state == "starting":
            if name == "Channel.Open":
                self.state = "running"
                self.write(Out.of(C.Channel.OpenOk))
                return
            self.raise_error(AmqpError("CHANNEL_ERROR", "expected 'channel.open'",
                                       method_ids(method)))
            return
        if name == "Channel.Open":
            self.raise_error(AmqpError("CHANNEL_ERROR", "second 'channel.open' seen",
                                       method_ids(method)))
            return
        if self.state == "closing":
            if name == "Channel.CloseOk":
                self.stop()
            elif name == "Channel.Close":
                self.write(Out.of(C.Channel.CloseOk))
            return
        if name == "Channel.Close":
            self.state = "closing"
            actors.send(self.reader, ("channel_closing", self.number, self.me))
            return
        if self.tx is not None and (self.tx.committing or self.tx.failed):
            self.raise_error(AmqpError(
                "CHANNEL_ERROR", "unexpected command while processing 'tx.commit'",
                method_ids(method)))
            return
        handler = self.handlers.get(name)
        if handler is None:
            self.raise_error(AmqpError("COMMAND_INVALID", "unimplemented method",
                                       method_ids(method)))
            return
        self._guarded(lambda: handler(method, content), method_ids(method))

    # -------------------------------------------------------- channel, access

    def channel_flow(self, m: Any, _c: Content | None) -> None:
        if not m.active:
            raise AmqpError("NOT_IMPLEMENTED", "active=false")
        self.write(Out.of(C.Channel.FlowOk, active=True))

    def access_request(self, _m: Any, _c: Content | None) -> None:
        """Realms and tickets mean nothing to RabbitMQ: every request gets ticket 1."""
        self.write(Out.of(AccessRequestOk, ticket=1))

    # --------------------------------------------------------------- exchange

    def exchange_declare(self, m: Any, _c: Content | None) -> None:
        name = _strip(m.exchange)
        if not m.passive and m.exchange_type not in EXCHANGE_TYPES:
            # the type is checked first; the release says how the refusal is sent
            raise AmqpError(self.cfg.release.unknown_exchange_type_error,
                            f"unknown exchange type '{m.exchange_type}'")
        self._exchange_declare_access(name, m)
        self.ctx.topology.declare(
            self.vhost, name, m.exchange_type, passive=m.passive,
            durable=m.durable, auto_delete=m.auto_delete, internal=m.internal,
            arguments=m.arguments or {})
        if not m.nowait:
            self.write(Out.of(C.Exchange.DeclareOk))

    def _exchange_declare_access(self, name: str, m: Any) -> None:
        """The permission checks of exchange.declare, at RabbitMQ's points between the
        topology's own checks (type, default exchange, reserved names)."""
        if not name:
            return  # the topology refuses the default exchange first
        if m.passive:
            self.access.check_any("exchange", name)
            return
        if m.exchange_type not in EXCHANGE_TYPES:
            return
        self.access.check("exchange", name, "configure")
        ae = (m.arguments or {}).get("alternate-exchange")
        if (isinstance(ae, str) and not name.startswith("amq.")
                and self.ctx.topology.lookup(self.vhost, name) is None):
            self.access.check("exchange", name, "read")
            self.access.check("exchange", ae, "write")

    def exchange_delete(self, m: Any, _c: Content | None) -> None:
        name = _strip(m.exchange)
        if name and not name.startswith("amq."):
            self.access.check("exchange", name, "configure")
        self.ctx.topology.delete(self.vhost, name, if_unused=m.if_unused)
        if not m.nowait:
            self.write(Out.of(C.Exchange.DeleteOk))

    def _exchange_exists(self, name: str) -> bool:
        return self.ctx.topology.lookup(self.vhost, name) is not None

    def _binding_access(self, source: str, kind: str, destination: str, key: str) -> None:
        """Write on the destination, then (past the default-exchange check) read on the
        source and, for a topic exchange, on the binding key
        (`binding_action_with_checks`)."""
        self.access.check(kind, destination, "write")
        if source and destination:
            self.access.check("exchange", source, "read")
            self.access.check_topic(self.ctx.topology.lookup(self.vhost, source), [key], "read")

    def exchange_bind(self, m: Any, _c: Content | None) -> None:
        self._binding_access(_strip(m.source), "exchange", _strip(m.destination),
                             m.routing_key)
        self.ctx.topology.bind(self.vhost, _strip(m.source), "exchange", _strip(m.destination),
                               m.routing_key, m.arguments or {}, self.session.exists)
        if not m.nowait:
            self.write(Out.of(C.Exchange.BindOk))

    def exchange_unbind(self, m: Any, _c: Content | None) -> None:
        self._binding_access(_strip(m.source), "exchange", _strip(m.destination),
                             m.routing_key)
        self.ctx.topology.unbind(self.vhost, _strip(m.source), "exchange", _strip(m.destination),
                                 m.routing_key, m.arguments or {})
        if not m.nowait:
            self.write(Out.of(C.Exchange.UnbindOk))

    # ------------------------------------------------------------------ queue

    def queue_declare(self, m: Any, _c: Content | None) -> None:
        name = _strip(m.queue)
        self._queue_declare_access(name, m)
        if not (m.passive or m.durable or m.exclusive) \
                and not self.cfg.permits("transient_nonexcl_queues") \
                and not name.startswith("amq.") and not self.session.exists(name):
            # rabbit_amqqueue:declare, when a queue is to be created and before the
            # queue type has a say: a reserved name is refused before it, and an
            # existing queue is compared with the declare instead
            raise AmqpError("INTERNAL_ERROR",
                            self.cfg.denied_warning("transient_nonexcl_queues"))
        ok = self.session.declare(name, passive=m.passive, durable=m.durable,
                                  exclusive=m.exclusive, auto_delete=m.auto_delete,
                                  arguments=m.arguments or {})
        self.most_recent = ok.queue
        if not m.nowait:
            self.write(Out.of(C.Queue.DeclareOk, queue=ok.queue,
                              message_count=ok.message_count,
                              consumer_count=ok.consumer_count))

    def _queue_declare_access(self, name: str, m: Any) -> None:
        """Passive: any permission; else configure, and for a new queue with a
        dead-letter exchange also read on the queue and write on that exchange.
        Server-named and `amq.` names are refused by the queue type first."""
        if not name:
            return
        if m.passive:
            self.access.check_any("queue", name)
            return
        if name.startswith("amq."):
            return
        self.access.check("queue", name, "configure")
        dlx = (m.arguments or {}).get("x-dead-letter-exchange")
        if isinstance(dlx, str) and not self.session.exists(name):
            self.access.check("queue", name, "read")
            self.access.check("exchange", dlx, "write")

    def _bind_names(self, m: Any) -> tuple[str, str]:
        queue = _strip(m.queue)
        key = m.routing_key
        if not queue:
            queue = self.expand(queue)
            if not key:
                key = queue
        return queue, key

    def queue_bind(self, m: Any, _c: Content | None) -> None:
        queue, key = self._bind_names(m)
        self._binding_access(_strip(m.exchange), "queue", queue, key)
        self.ctx.topology.bind(self.vhost, _strip(m.exchange), "queue", queue, key,
                               m.arguments or {}, self.session.exists)
        self.session.check_access(queue)
        if not m.nowait:
            self.write(Out.of(C.Queue.BindOk))

    def queue_unbind(self, m: Any, _c: Content | None) -> None:
        queue, key = self._bind_names(m)
        self._binding_access(_strip(m.exchange), "queue", queue, key)
        self.ctx.topology.unbind(self.vhost, _strip(m.exchange), "queue", queue, key,
                                 m.arguments or {})
        self.write(Out.of(C.Queue.UnbindOk))

    def queue_purge(self, m: Any, _c: Content | None) -> None:
        name = self.expand(m.queue)
        self.access.check("queue", name, "read")
        count = self.session.purge(name)
        if not m.nowait:
            self.write(Out.of(C.Queue.PurgeOk, message_count=count))

    def queue_delete(self, m: Any, _c: Content | None) -> None:
        name = self.expand(m.queue)
        self.access.check("queue", name, "configure")
        count = self.session.delete(name, if_unused=m.if_unused, if_empty=m.if_empty)
        if not m.nowait:
            self.write(Out.of(C.Queue.DeleteOk, message_count=count))

    # ------------------------------------------------------------------ basic

    def basic_qos(self, m: Any, _c: Content | None) -> None:
        if m.prefetch_size != 0:
            raise AmqpError("NOT_IMPLEMENTED", f"prefetch_size!=0 ({m.prefetch_size})")
        if m.global_ and self.cfg.permit_global_qos:
            self.global_prefetch = m.prefetch_count
            if self.limiter is not None:
                limit_prefetch(self.limiter, m.prefetch_count)
        else:
            self.consumer_prefetch = m.prefetch_count
        self.write(Out.of(C.Basic.QosOk))

    def basic_consume(self, m: Any, _c: Content | None) -> None:
        tag = m.consumer_tag
        if tag and tag in self.consumers:
            raise AmqpError("NOT_ALLOWED", f"attempt to reuse consumer tag '{tag}'")
        queue = self.expand(m.queue)
        self.access.check("queue", queue, "read")
        if not tag:
            tag = "amq.ctag-" + secrets.token_urlsafe(16)
        limited = self.global_prefetch > 0
        spec = ConsumeSpec(tag, not m.no_ack, self.consumer_prefetch, m.exclusive,
                           dict(m.arguments or {}), limited,
                           self.limiter if limited else None, self.cfg.consumer_timeout)
        # every refusal comes before consume-ok (rabbit_amqqueue:basic_consume), the
        # queue's own too: a queue sends consume-ok once it has taken the consumer, and
        # its deliveries reach this process after this handler, so after consume-ok
        self.session.validate_consume(queue, spec)
        actions = self.session.consume(queue, spec)
        if not m.nowait:
            self.write(Out.of(C.Basic.ConsumeOk, consumer_tag=tag))
        self.consumers[tag] = (queue, spec)
        self.handle_actions(actions)

    def basic_cancel(self, m: Any, _c: Content | None) -> None:
        tag = m.consumer_tag
        entry = self.consumers.pop(tag, None)
        if not m.nowait:
            self.write(Out.of(C.Basic.CancelOk, consumer_tag=tag))
        if entry is not None:
            self.handle_actions(self.session.cancel(entry[0], tag))

    def basic_cancel_ok(self, m: Any, _c: Content | None) -> None:
        entry = self.consumers.pop(m.consumer_tag, None)
        if entry is not None:
            self.handle_actions(self.session.cancel(entry[0], m.consumer_tag))

    def basic_publish(self, m: Any, content: Content | None) -> None:
        assert content is not None
        if m.immediate:
            raise AmqpError("NOT_IMPLEMENTED", "immediate=true")
        size, limit = content.body_size, self.cfg.message_size_limit
        if size > limit:
            configured = "" if limit == MAX_MSG_SIZE else "configured "
            raise AmqpError("PRECONDITION_FAILED",
                            f"message size {size} is larger than {configured}max size {limit}")
        xname = _strip(m.exchange)
        self.access.check("exchange", xname, "write")
        x = self.ctx.topology.lookup_or_die(self.vhost, xname)
        if x.internal:
            raise AmqpError("ACCESS_REFUSED",
                            f"cannot publish to internal {rs('exchange', xname, self.vhost)}")
        props = self._properties(content)
        if props.expiration is not None:
            parse_expiration(props.expiration)
        seqno = None
        if self.confirm_enabled or self.tx is not None:
            seqno = self.publish_seqno
            self.publish_seqno += 1
        headers = props.headers
        keys = routing_keys(m.routing_key, headers)
        self.access.check_topic(x, keys, "write")
        if props.user_id is not None and props.user_id != self.conn.user:
            raise AmqpError(
                "PRECONDITION_FAILED",
                f"user_id property set to '{props.user_id}' but authenticated user was "
                f"'{self.conn.user}'")
        decoded: Any = props
        if headers and "BCC" in headers:
            content = _without_bcc(content)
            decoded = None  # the stored properties no longer carry the BCC header
        targets = self.ctx.topology.route(self.vhost, xname, keys, headers)
        queues = [q for q in targets if self.session.routable(q)]
        shared: tuple[str, ...]
        last = self._last_keys
        if len(keys) == 1 and len(last) == 1 and last[0] == keys[0]:
            shared = last
        else:
            shared = tuple(keys)
            if len(keys) == 1:
                self._last_keys = shared
        message = Message(xname, shared[0] if len(keys) == 1 else m.routing_key, content,
                          shared, decoded)
        if trace.enabled():
            trace.emit("publish_in", channel=self.me, exchange=xname,
                       routing_key=m.routing_key, seqno=seqno, queues=queues,
                       msg_id=id_in(headers))
        if self.tx is not None:
            assert seqno is not None
            self.tx.publishes.append((message, queues, m.mandatory, seqno))
            return
        self.deliver(message, queues, m.mandatory, seqno)

    def _properties(self, content: Content) -> Any:
        """A publish's decoded properties, read-only: shared with the previous publish
        when its raw properties are the same bytes.

        A publisher nearly always sends the same properties (say ``delivery_mode=2``)
        with every message; decoding them costs about as much as routing the
        message. The result goes into `Message.properties`, which nobody changes:
        code that edits properties decodes its own copy (`Content.properties`)."""
        raw = content.properties_bin
        last = self._last_properties
        if last is not None and last[0] == raw:
            return last[1]
        props = content.properties()
        self._last_properties = (raw, props)
        return props

    def deliver(self, message: Message, queues: list[str], mandatory: bool,
                seqno: int | None) -> None:
        if not queues and not mandatory and seqno is None:
            return
        actions = self.session.deliver(queues, message, seqno) if queues else []
        if mandatory and not queues:
            self.write(Out.of(C.Basic.Return, reply_code=312, reply_text="NO_ROUTE",
                              exchange=message.exchange, routing_key=message.routing_key),
                       message.content)
        if seqno is not None:
            if not queues:
                self.confirmed.append(seqno)
            else:
                self.unconfirmed.insert(seqno, message.exchange, queues)
        self.handle_actions(actions)

    def basic_get(self, m: Any, _c: Content | None) -> None:
        queue = self.expand(m.queue)
        self.access.check("queue", queue, "read")
        tag = self.next_tag
        got = self.session.get(queue, ack_required=not m.no_ack, delivery_tag=tag,
                               node_timeout=self.cfg.consumer_timeout)
        if got is None:
            self.write(Out.of(C.Basic.GetEmpty))
            return
        self.next_tag += 1
        d = got.delivery
        self.write(Out.of(C.Basic.GetOk, delivery_tag=tag, redelivered=d.redelivered,
                          exchange=d.message.exchange, routing_key=d.message.routing_key,
                          message_count=got.message_count), d.message.content)
        if not m.no_ack:
            self.unacked.add(Pending(tag, tag, queue, d.msg_id, self.clock.monotonic_ms()))

    def _settle(self, op: str, records: list[Pending]) -> None:
        if trace.enabled():
            trace.emit("settle_in", channel=self.me, op=op, tags=[r.tag for r in records])
        groups: dict[tuple[str, str | int], list[Any]] = {}
        for r in records:
            groups.setdefault((r.queue, r.consumer_tag), []).append(r.msg_id)
        for (queue, ctag), ids in groups.items():
            self.handle_actions(self.session.settle(queue, op, ctag, ids))

    def _ack_like(self, op: str, tag: int, multiple: bool) -> None:
        records = self.unacked.collect(tag, multiple)
        if self.tx is not None:
            self.tx.settles.append((op, records))
            return
        self._settle(op, records)

    def basic_ack(self, m: Any, _c: Content | None) -> None:
        self._ack_like("complete", m.delivery_tag, m.multiple)

    def basic_reject(self, m: Any, _c: Content | None) -> None:
        self._ack_like("requeue" if m.requeue else "discard", m.delivery_tag, False)

    def basic_nack(self, m: Any, _c: Content | None) -> None:
        self._ack_like("requeue" if m.requeue else "discard", m.delivery_tag, m.multiple)

    def basic_recover(self, m: Any, _c: Content | None) -> None:
        if not m.requeue:
            raise AmqpError("NOT_IMPLEMENTED", "requeue=false")
        self._settle("requeue", self.unacked.take_all())
        if m.name == "Basic.Recover":
            self.write(Out.of(C.Basic.RecoverOk))

    # ------------------------------------------------------------ confirm, tx

    def confirm_select(self, m: Any, _c: Content | None) -> None:
        if self.tx is not None:
            raise AmqpError("PRECONDITION_FAILED", "cannot switch from tx to confirm mode")
        self.confirm_enabled = True
        if not m.nowait:
            self.write(Out.of(C.Confirm.SelectOk))

    def tx_select(self, _m: Any, _c: Content | None) -> None:
        if self.confirm_enabled:
            raise AmqpError("PRECONDITION_FAILED", "cannot switch from confirm to tx mode")
        if self.tx is None:
            self.tx = _Tx()
        self.write(Out.of(C.Tx.SelectOk))

    def tx_commit(self, _m: Any, _c: Content | None) -> None:
        if self.tx is None:
            raise AmqpError("PRECONDITION_FAILED", "channel is not transactional")
        tx = self.tx
        publishes, settles = tx.publishes, tx.settles
        tx.publishes, tx.settles = [], []
        tx.committing = True
        for message, queues, mandatory, seqno in publishes:
            self.deliver(message, queues, mandatory, seqno)
        for op, records in settles:
            self._settle(op, records)
        self._maybe_complete_tx()

    def _maybe_complete_tx(self) -> None:
        tx = self.tx
        if tx is None or not tx.committing or len(self.unconfirmed):
            return
        if tx.failed:
            self.tx = _Tx()
            raise AmqpError("PRECONDITION_FAILED", "partial tx completion", (90, 20))
        tx.committing = False
        self.write(Out.of(C.Tx.CommitOk))

    def tx_rollback(self, _m: Any, _c: Content | None) -> None:
        if self.tx is None:
            raise AmqpError("PRECONDITION_FAILED", "channel is not transactional")
        for _op, records in self.tx.settles:
            self.unacked.restore(records)
        self.tx.publishes, self.tx.settles = [], []
        self.write(Out.of(C.Tx.RollbackOk))

    # --------------------------------------------------------------- actions

    def handle_actions(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Settled):
                self.confirmed.extend(self.unconfirmed.confirm(action.seqnos, action.queue))
            elif isinstance(action, Rejected):
                rejected = self.unconfirmed.reject(action.seqnos)
                if self.tx is not None:
                    if rejected:
                        self.tx.failed = True
                else:
                    self.rejected.extend(rejected)
            elif isinstance(action, Deliver):
                self.deliver_to_client(action)
            elif isinstance(action, Block):
                was_blocked = self.credit.blocked()
                self.credit.block(action.key, self._now_us())
                self._trace_credit(was_blocked, action.key)
            elif isinstance(action, Unblock):
                was_blocked = self.credit.blocked()
                self._send_grants(self.credit.unblock(action.key))
                self._trace_credit(was_blocked, action.key)
            elif isinstance(action, QueueEol):
                self.queue_gone(action.queue)
            elif isinstance(action, ConsumerCancelled):
                self.server_cancel(action.consumer_tag)
            elif isinstance(action, ConsumerReleased):
                self.consumer_released(action)
            else:
                assert_never(action)
        self._maybe_complete_tx()

    def _trace_credit(self, was_blocked: bool, key: Any) -> None:
        """``credit_blocked`` / ``credit_unblocked`` when the channel stops or resumes
        granting credit to its reader (value: how many queues block it)."""
        blocked = self.credit.blocked()
        if blocked != was_blocked and trace.enabled():
            trace.emit("credit_blocked" if blocked else "credit_unblocked",
                       entity_type="channel", entity_id=f"{self.me!r}/{self.number}",
                       queue=key if isinstance(key, str) else None,
                       value=len(self.credit.credit_blocked))

    def deliver_to_client(self, action: Deliver) -> None:
        tag = action.consumer_tag
        if tag not in self.consumers:
            if action.ack_required:
                ids = [d.msg_id for d in action.deliveries]
                self.handle_actions(self.session.settle(action.queue, "requeue", tag, ids))
            return
        now_ms = self.clock.monotonic_ms()
        for d in action.deliveries:
            dtag = self.next_tag
            self.next_tag += 1
            self.write(Out.of(C.Basic.Deliver, consumer_tag=tag, delivery_tag=dtag,
                              redelivered=d.redelivered, exchange=d.message.exchange,
                              routing_key=d.message.routing_key), d.message.content)
            if action.ack_required:
                self.unacked.add(Pending(dtag, tag, action.queue, d.msg_id, now_ms))
            if trace.enabled():
                trace.emit("deliver_out", channel=self.me, consumer_tag=tag, delivery_tag=dtag,
                           queue=action.queue, msg_id=msg_id_of(d.message.content))

    def server_cancel(self, tag: str) -> None:
        if self.consumers.pop(tag, None) is None:
            return
        if self.conn.capabilities.get("consumer_cancel_notify") is True:
            self.write(Out.of(C.Basic.Cancel, consumer_tag=tag, nowait=True))

    def consumer_released(self, action: ConsumerReleased) -> None:
        """4.3: the queue timed the consumer out and took its deliveries back
        (`rabbit_channel:handle_queue_actions`). A client that understands
        `basic.cancel` is sent one; the consumer stays registered here, so late
        acks of its deliveries are still taken. Any other client's channel is closed
        with 406, the timeout given as -1."""
        if action.reason != "timeout":
            return
        tag = action.consumer_tag
        if self.conn.capabilities.get("consumer_cancel_notify") is True and tag in self.consumers:
            self.write(Out.of(C.Basic.Cancel, consumer_tag=tag, nowait=True))
            return
        log.warning("consumer '%s' on channel %s and %s has timed out waiting for a consumer "
                    "acknowledgement of a delivery with message id of %s. Timeout used: -1 ms",
                    tag, self.number, rs("queue", action.queue, self.vhost),
                    action.msg_ids[0] if action.msg_ids else None)
        self.raise_error(released_error(self.number))

    def queue_gone(self, queue: str) -> None:
        for tag in [t for t, (q, _) in self.consumers.items() if q == queue]:
            self.server_cancel(tag)
        self.confirmed.extend(self.unconfirmed.queue_gone(queue))

    def send_confirms_and_nacks(self) -> None:
        if not self.confirmed and not self.rejected:
            return
        confirmed, rejected = self.confirmed, self.rejected
        self.confirmed, self.rejected = [], []
        if self.tx is not None or self.state == "closing":
            return
        for frame in coalesce(confirmed, rejected, self.unconfirmed.smallest()):
            cls = C.Basic.Ack if frame.ack else C.Basic.Nack
            self.write(Out.of(cls, delivery_tag=frame.tag, multiple=frame.multiple))
            if trace.enabled():
                trace.emit("confirm_out", channel=self.me, ack=frame.ack, tag=frame.tag,
                           multiple=frame.multiple)


def _without_bcc(content: Content) -> Content:
    """The content without its `BCC` header, cut out of the bytes: the publisher's
    other headers keep their field types, as RabbitMQ keeps them."""
    return Content(drop_header(content.properties_bin, "BCC"), content.body,
                   content.class_id)


def channel_main(ctx: BrokerContext, number: int, reader: Any, writer: Any, limiter: Any,
                 conn: ConnectionInfo) -> None:
    """Entry point of a channel process, started by its channel supervisor after
    the channel's writer and limiter (`connection_sup.start_channel_sup`)."""
    proc = ChannelProcess(ctx, number, reader, writer, conn, limiter)
    try:
        proc.run()
    finally:
        proc.session.close()
