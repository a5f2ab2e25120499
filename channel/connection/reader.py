"""The reader process of one AMQP connection (`rabbit_reader`).

It owns the socket's input: the handshake (protocol header, start/start-ok,
tune/tune-ok, open), frame parsing, command assembly per channel, channel
creation and cleanup, connection-level errors and both close handshakes. It is
also where back-pressure becomes physical: it spends one credit per complete
publish towards the channel that gets it, and while credit or a resource alarm
blocks it, it neither asks the socket for more bytes nor parses bytes already
buffered, so TCP pushes back on the client.

Socket reads are done by a small linked receiver process that reads only when
the reader asks (Erlang's `{active, once}`), so "not reading" is exact and
observable in the reader's counters.

The reader is a child of its connection's supervisor (`connection_sup`): it
starts the channel supervisors, the queue collector and the heartbeat
processes under the connection's helper supervisor, and monitors its
channels. It traps exits, so a stop from its supervisor (node shutdown,
listener stop) becomes a `320 CONNECTION_FORCED` close before it exits.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pamqp import commands as C

import actors
from actors import trace
from channel.access.auth import MECHANISMS, LoginRefused, User, check_login, reauthenticate
from channel.connection import connection_sup, queue_collector
from channel.connection.channel import ConnectionInfo
from channel.connection.config import BrokerContext
from channel.errors import INTERNAL_ERROR_CLOSE, AmqpError, erlang_term
from channel.limits import limits
from channel.limits.credit_flow import BlockedTime, CreditFlow
from channel.limits.throttle import PAUSE_HEARTBEAT, RESUME_HEARTBEAT, SEND_UNBLOCKED, Throttle
from channel.protocol.assembler import Assembler, Command, has_content
from channel.protocol.frame_text import cannot_decode, frame_error_text, unexpected_frame_text
from channel.protocol.framing import (
    FRAME_END,
    PROTOCOL_HEADER,
    MethodFrame,
    Out,
    analyze_frame,
    decode_method,
    encode_method,
    frame_header,
    method_ids,
)
from channel.protocol.method_check import BadTable, CannotDecode, MalformedUtf8
from channel.protocol.server_properties import server_properties
from channel.protocol.tune import TuneError, negotiate
from channel.protocol.wire import Wire

__all__ = ["Reader", "reader_main", "receiver_main"]

log = logging.getLogger("warren.reader")

RUNNING = ("running", "blocked")
HANDSHAKE = ("pre_init", "starting", "securing", "tuning")


def receiver_main(wire: Wire, reader: Any) -> None:
    """Read the socket once per `recv` request; report data or closure."""
    while True:
        msg = actors.receive()
        if msg != "recv":
            continue
        try:
            data = wire.sock.recv(65536)
        except OSError as exc:
            actors.send(reader, ("tcp_error", repr(exc)))
            return
        if not data:
            actors.send(reader, ("tcp_closed",))
            return
        actors.send(reader, ("tcp", data))


class Failure(Exception):
    """A failure that is not an AMQP error (RabbitMQ's `{Type, Reason, Method, Stack}`).

    On channel 0 it becomes `541 INTERNAL_ERROR` once the connection is open, and
    a silent close before; where RabbitMQ's reader itself would crash on it
    (`crash`), the connection is dropped without a close frame.
    """

    def __init__(self, why: str, crash: bool = False) -> None:
        super().__init__(why)
        self.crash = crash


@dataclass
class _Ch:
    number: int
    pid: Any
    ref: Any
    assembler: Assembler = field(default_factory=Assembler)


class Reader:
    def __init__(self, ctx: BrokerContext, wire: Wire, sup: Any = None,
                 helper_sup: Any = None) -> None:
        self.ctx = ctx
        self.sup = sup
        self.helper_sup = helper_sup
        self.channel_sup_sup: Any = None
        self.collector: Any = None
        self.exit_reason: Any = "normal"
        self.cfg = ctx.config
        self.wire = wire
        self.me = actors.self()
        self.node = actors.get_node()
        self.clock = self.node.clock
        self.state = "pre_init"
        self.buf = bytearray()
        self.done = False
        self.ignore_input = False
        self.recv_pending = False
        self.channel_max = self.cfg.channel_max
        self.heartbeat = 0
        self.user: User | None = None
        self.vhost = ""
        self.client_properties: dict[str, Any] = {}
        self.capabilities: dict[str, Any] = {}
        self.channels: dict[int, _Ch] = {}
        self.by_pid: dict[Any, _Ch] = {}
        self.closing_pids: set[Any] = set()
        self.close_reply: AmqpError | None = None
        self.credit = CreditFlow(self.me, *self.cfg.credit_flow_default_credit)
        self.throttle = Throttle()
        self.hb_monitor: Any = None
        self.receiver: Any = None
        self.peer = wire.peer_address()
        # counters, for introspection and tests
        self.recv_requests = 0
        self.frames_parsed = 0
        self.publishes_dispatched = 0
        #: time blocked by credit flow (the node's metrics)
        self.credit_blocked_time = BlockedTime()

    # ------------------------------------------------------------------ run

    def run(self) -> None:
        actors.process_flag("trap_exit", True)
        self.receiver = actors.spawn_link(receiver_main, self.wire, self.me)
        actors.send_after(self.cfg.handshake_timeout_ms, self.me, ("handshake_timeout",))
        self.request_recv()
        while not self.done:
            self.handle_info(actors.receive())

    def request_recv(self) -> None:
        if self.recv_pending or self.done or self.state == "blocked" or self.ignore_input:
            return
        self.recv_pending = True
        self.recv_requests += 1
        actors.send(self.receiver, "recv")

    def terminate(self, why: str) -> None:
        log.debug("connection %s ends: %s", self.peer, why)
        self.done = True

    def info(self) -> dict[str, Any]:
        return {
            "state": self.throttle.connection_state(
                self.state, self.credit.blocked(), self.clock.monotonic_ms()),
            "reader_state": self.state, "channels": len(self.channels),
            "recv_requests": self.recv_requests, "frames_parsed": self.frames_parsed,
            "publishes_dispatched": self.publishes_dispatched,
            "bytes_received": self.wire.bytes_received, "heartbeat": self.heartbeat,
            "frame_max": self.wire.frame_max, "channel_max": self.channel_max,
            "credit_blocked": self.credit.blocked(), "blocked_by": sorted(self.throttle.blocked_by),
        }

    # ------------------------------------------------------------- messages

    def handle_info(self, msg: Any) -> None:
        kind = msg[0] if isinstance(msg, tuple) and msg else msg
        if kind == "tcp":
            self.recv_pending = False
            self.buf += msg[1]
            self.wire.bytes_received += len(msg[1])
            self.process_buffer()
            self.request_recv()
        elif kind in ("tcp_closed", "tcp_error"):
            self.recv_pending = False
            if self.state not in ("closed", "pre_init"):
                log.warning("connection %s closed abruptly", self.peer)
            self.terminate("socket closed")
        elif kind == "bump_credit":
            self.credit.handle_bump_msg(msg[1])
            self.control_throttle()
        elif kind == "channel_exit":
            self.handle_exception(msg[1], msg[2])
        elif kind == "channel_closing":
            ch = self.channels.get(msg[1])
            if ch is not None and ch.pid == msg[2]:
                self.channel_cleanup(ch)
            actors.send(msg[2], ("ready_for_close",))
            self.control_throttle()
        elif kind == "DOWN":
            self.channel_down(msg[3], msg[4])
        elif kind == "conserve_resources":
            _, resource, active = msg
            if active:
                self.throttle.blocked_by.add(resource)
            else:
                self.throttle.blocked_by.discard(resource)
            self.control_throttle()
        elif kind == "heartbeat_timeout":
            log.error("missed heartbeats from client, timeout: %ss", self.heartbeat)
            self.terminate("heartbeat_timeout")
        elif kind in ("heartbeat_send_failed", "writer_send_failed"):
            self.terminate(str(kind))
        elif kind == "handshake_timeout":
            if self.state in (*HANDSHAKE, "opening"):
                self.terminate("handshake_timeout")
        elif kind in ("silent_close", "close_timeout"):
            self.terminate(str(kind))
        elif kind == "info":
            actors.send(msg[1], (msg[2], self.info()))
        elif kind == "force_close":
            self.server_close(AmqpError("CONNECTION_FORCED", msg[1]))
        elif kind == "EXIT":
            self.linked_exit(msg[1], msg[2])
        self.resume_if_unblocked()

    def linked_exit(self, pid: Any, reason: Any) -> None:
        """Our supervisor stops us (close with 320, then go), or the receiver ended."""
        if pid == self.sup:
            why = reason if isinstance(reason, str) else erlang_term(reason)
            if self.state in RUNNING:
                self.send_close(AmqpError(
                    "CONNECTION_FORCED", f"broker forced connection closure with reason '{why}'"))
            self.exit_reason = reason
            self.terminate(f"stopped by the connection supervisor: {why}")
        elif not actors.is_clean_reason(reason):
            self.terminate(f"receiver ended: {reason!r}")

    def resume_if_unblocked(self) -> None:
        if not self.done and self.state != "blocked" and self.buf and not self.ignore_input:
            self.process_buffer()
        self.request_recv()

    # --------------------------------------------------------------- frames

    def process_buffer(self) -> None:
        while not self.done and not self.ignore_input and self.state != "blocked":
            if self.state == "pre_init":
                if len(self.buf) < 8:
                    return
                header = bytes(self.buf[:8])
                del self.buf[:8]
                self.protocol_header(header)
                continue
            if len(self.buf) < 7:
                return
            ftype, channel, size = frame_header(self.buf)
            if self.wire.frame_max and size > self.wire.frame_max:
                self.fatal_frame_error(frame_error_text(
                    ftype, b"", f"{{frame_too_large,{size},{self.wire.frame_max - 8}}}"))
                return
            if len(self.buf) < 8 + size:
                return
            end = self.buf[7 + size]
            payload = bytes(self.buf[7:7 + size])
            del self.buf[:8 + size]
            if end != FRAME_END:
                self.fatal_frame_error(frame_error_text(
                    ftype, payload, f"{{invalid_frame_end_marker,{end}}}"))
                return
            self.frames_parsed += 1
            try:
                self.handle_frame(ftype, channel, payload)
            except AmqpError as error:
                self.handle_exception(channel, error)
            except Failure as failure:
                self.handle_failure(failure)

    def protocol_header(self, header: bytes) -> None:
        if header == PROTOCOL_HEADER or header == b"AMQP\x01\x01\x00\x09":
            self.state = "starting"
            self.send0(self.start_method())
            return
        self.refuse_header()

    def refuse_header(self) -> None:
        try:
            self.wire.send(PROTOCOL_HEADER)
        except OSError:
            pass
        self.terminate("bad protocol header")

    def start_method(self) -> Out:
        props = server_properties(self.cfg.release, self.cfg.cluster_name,
                                  self.cfg.server_properties)
        return Out.of(C.Connection.Start, version_major=0, version_minor=9,
                      server_properties=props, mechanisms=" ".join(MECHANISMS),
                      locales="en_US")

    def send0(self, out: Out) -> None:
        try:
            self.wire.send(encode_method(0, out))
        except OSError:
            self.terminate("send failed")

    def fatal_frame_error(self, explanation: str) -> None:
        """We lost sync with the client: say why (once open), read nothing more,
        close after the anti-DoS delay."""
        if self.state not in (*HANDSHAKE, "closed"):
            self.send_close(AmqpError("FRAME_ERROR", explanation))
        else:
            log.error("connection %s frame error: %s", self.peer, explanation)
        self.silent_close()

    def silent_close(self) -> None:
        """Stop reading and close the socket after the anti-DoS delay."""
        self.ignore_input = True
        actors.send_after(self.cfg.silent_close_delay_ms, self.me, ("silent_close",))

    def send_close(self, error: AmqpError) -> None:
        self.send0(Out.of(C.Connection.Close, reply_code=error.code,
                          reply_text=error.reply_text, class_id=error.method[0],
                          method_id=error.method[1]))

    def handle_frame(self, ftype: int, channel: int, payload: bytes) -> None:
        """`rabbit_reader:handle_frame/4`: what a frame may be depends on its
        channel and on the connection's state."""
        kind = analyze_frame(ftype, payload)
        if self.state in ("closing", "closed"):
            if channel == 0 and kind == "method":
                try:
                    method = self.decode(payload, channel)
                except (AmqpError, Failure):
                    return
                if method.name in ("Connection.Close", "Connection.CloseOk"):
                    self.connection_method(method)
            return
        if channel == 0:
            if kind is None:
                raise AmqpError("FRAME_ERROR", frame_error_text(ftype, payload, "unknown_frame"))
            if kind == "heartbeat":
                return
            if kind != "method":
                raise AmqpError("UNEXPECTED_FRAME", unexpected_frame_text(ftype, payload))
            self.connection_method(self.decode(payload, channel))
            return
        if self.state not in RUNNING:
            raise AmqpError("UNEXPECTED_FRAME", unexpected_frame_text(ftype, payload))
        if kind is None:
            raise AmqpError("FRAME_ERROR", frame_error_text(ftype, payload, "unknown_frame"))
        if kind == "heartbeat":
            raise AmqpError("UNEXPECTED_FRAME", unexpected_frame_text(ftype, payload))
        ch = self.channels.get(channel)
        if ch is None:
            ch = self.create_channel(channel)
        if kind == "method":
            command = ch.assembler.method_frame(self.decode(payload, channel))
        else:
            command = ch.assembler.content_frame(ftype, payload)
        if command is not None:
            self.dispatch(ch, command)
        if kind != "method":
            self.publish_received()

    def decode(self, payload: bytes, channel: int) -> MethodFrame:
        """Decode a method, failing as RabbitMQ fails on it.

        Arguments that do not decode are a 501 naming the method on a channel;
        on channel 0 RabbitMQ's reader meets them as a non-AMQP failure.
        Malformed UTF-8 is a 501 naming the method only on channel 0. A table
        that does not parse crashes RabbitMQ's reader outright.
        """
        try:
            return decode_method(payload)
        except KeyError:
            raise AmqpError("COMMAND_INVALID", "unknown method") from None
        except CannotDecode:
            if channel == 0:
                raise Failure("cannot decode the arguments of a connection method") from None
            ids = (payload[0] << 8 | payload[1], payload[2] << 8 | payload[3])
            raise AmqpError("FRAME_ERROR", cannot_decode(payload[4:]), ids) from None
        except MalformedUtf8 as exc:
            ids = (payload[0] << 8 | payload[1], payload[2] << 8 | payload[3])
            raise AmqpError("FRAME_ERROR", str(exc), ids if channel == 0 else (0, 0)) from None
        except BadTable as exc:
            raise Failure(f"field table does not parse: {exc}", crash=channel != 0) from None

    # -------------------------------------------------------------- channels

    def create_channel(self, number: int) -> _Ch:
        if self.channel_max and len(self.channels) >= self.channel_max:
            raise AmqpError(
                "NOT_ALLOWED",
                f"number of channels opened ({len(self.channels)}) has reached the "
                f"negotiated channel_max ({self.channel_max})")
        assert self.user is not None
        refusal = limits.channel_refusal(
            user=self.user.name, user_limits=self.user_limits(),
            channel_max_per_node=self.cfg.channel_max_per_node, node=self.node.name,
            readers=self.ctx.readers.values(), peer_count=self.ctx.peer_count)
        if refusal is not None:
            raise refusal
        conn = ConnectionInfo(self.user.name, self.vhost, self.me, dict(self.capabilities))
        started = connection_sup.start_channel(self.channel_sup_sup, self.ctx, number, self.me,
                                               self.wire, conn)
        if started[0] != "ok":
            raise RuntimeError(f"cannot start channel {number}: {started!r}")
        pid = started[2]
        assembler = Assembler(self.cfg.message_size_limit,
                              self.cfg.release.content_header_size_check)
        ch = _Ch(number, pid, actors.monitor(pid), assembler)
        self.channels[number] = ch
        self.by_pid[pid] = ch
        return ch

    def dispatch(self, ch: _Ch, command: Command) -> None:
        method = command.method
        if has_content(method):
            self.credit.send(ch.pid, int(self.clock.monotonic() * 1_000_000))
            self.publishes_dispatched += 1
            actors.send(ch.pid, ("method", method, command.content, True))
            self.control_throttle()
            return
        actors.send(ch.pid, ("method", method, None, False))
        if method.name == "Channel.CloseOk":
            self.channel_cleanup(ch)
            self.control_throttle()

    def channel_cleanup(self, ch: _Ch) -> None:
        if self.channels.get(ch.number) is ch:
            del self.channels[ch.number]
        self.by_pid.pop(ch.pid, None)
        self.closing_pids.add(ch.pid)
        self.credit.peer_down(ch.pid)

    def channel_down(self, pid: Any, reason: Any) -> None:
        ch = self.by_pid.get(pid)
        if ch is not None:
            self.channel_cleanup(ch)
        known = ch is not None or pid in self.closing_pids
        self.closing_pids.discard(pid)
        # only `normal` is a controlled end (rabbit_reader:termination_kind/1): a
        # channel stopped by its supervisor because its writer died is not one
        controlled = reason == "normal"
        if ch is not None and not controlled and self.state in RUNNING:
            log.error("channel %s crashed: %r", ch.number, reason)
            self.server_close(INTERNAL_ERROR_CLOSE)
        elif not known and not controlled:
            actors.exit(("abnormal_dependent_exit", pid, reason))
        if self.state == "closing" and not self.channels:
            self.finish_close()
        self.control_throttle()

    # -------------------------------------------------------------- throttle

    def control_throttle(self) -> None:
        now = self.clock.monotonic_ms()
        self.credit_blocked_time.observe(self.credit.blocked(), now)
        self.state_effects(*self.throttle.control(self.state, self.credit.blocked(), now))

    def publish_received(self) -> None:
        if not self.throttle.blocked_by:
            return  # nothing blocks this connection: the throttle would change nothing
        now = self.clock.monotonic_ms()
        self.state_effects(*self.throttle.publish_received(self.state, now))

    def state_effects(self, state: str, effects: list[tuple]) -> None:
        if self.state not in RUNNING:
            return
        if (state == "blocked") != (self.state == "blocked") and trace.enabled():
            trace.emit("credit_blocked" if state == "blocked" else "credit_unblocked",
                       entity_type="reader", entity_id=repr(self.me),
                       value=len(self.throttle.blocked_by),
                       blocked_by=sorted(self.throttle.blocked_by))
        self.state = state
        for effect in effects:
            if effect == PAUSE_HEARTBEAT and self.hb_monitor is not None:
                actors.send(self.hb_monitor, "pause")
            elif effect == RESUME_HEARTBEAT and self.hb_monitor is not None:
                actors.send(self.hb_monitor, "resume")
            elif effect == SEND_UNBLOCKED:
                self.send0(Out.of(C.Connection.Unblocked))
            elif effect[0] == "send_blocked":
                self.send0(Out.of(C.Connection.Blocked, reason=effect[1]))

    # ---------------------------------------------------- connection methods

    def connection_method(self, m: MethodFrame) -> None:
        name, state = m.name, self.state
        if name == "Connection.StartOk" and state == "starting":
            self.start_ok(m)
        elif name == "Connection.TuneOk" and state == "tuning":
            self.tune_ok(m)
        elif name == "Connection.Open" and state == "opening":
            self.open(m)
        elif name == "Connection.Close":
            if state in ("closing", "closed"):
                self.send0(Out.of(C.Connection.CloseOk))
                if state == "closed":
                    self.terminate("closed")
                return
            self.client_close()
        elif name == "Connection.CloseOk" and state == "closed":
            self.terminate("close-ok")
        elif name == "Connection.UpdateSecret" and state in RUNNING:
            self.update_secret(m)
        elif state in ("closing", "closed"):
            return
        else:
            raise AmqpError("CHANNEL_ERROR", f"unexpected method in connection state {state}",
                            method_ids(m))

    def start_ok(self, m: Any) -> None:
        self.client_properties = dict(m.client_properties or {})
        caps = self.client_properties.get("capabilities")
        self.capabilities = dict(caps) if isinstance(caps, dict) else {}
        self.throttle.capability = self.capabilities.get("connection.blocked") is True
        mechanism = m.mechanism
        try:
            self.user = check_login(self.ctx.users, mechanism, m.response or b"", self.peer)
        except LoginRefused as refused:
            log.warning("login refused on %s: %s", self.peer, refused)
            if self.capabilities.get("authentication_failure_close") is True:
                self.send_close(AmqpError(
                    "ACCESS_REFUSED",
                    f"Login was refused using authentication mechanism {mechanism}. "
                    "For details see the broker logfile."))
            self.silent_close()
            return
        self.state = "tuning"
        self.send0(Out.of(C.Connection.Tune, channel_max=self.cfg.channel_max,
                          frame_max=self.cfg.frame_max, heartbeat=self.cfg.heartbeat))

    def tune_ok(self, m: Any) -> None:
        try:
            tuned = negotiate(m.frame_max, m.channel_max, m.heartbeat,
                              self.cfg.frame_max, self.cfg.channel_max,
                              frame_min=self.cfg.release.frame_min_size)
        except TuneError as exc:
            log.error("failed to negotiate connection parameters: %s", exc)
            self.silent_close()
            return
        self.wire.frame_max = tuned.frame_max
        self.channel_max = tuned.channel_max
        self.heartbeat = tuned.heartbeat
        collector = connection_sup.start_collector(self.helper_sup, self.ctx.backend, self.me)
        if collector[0] != "ok":
            raise RuntimeError(f"cannot start the queue collector: {collector!r}")
        self.collector = collector[1]
        if tuned.heartbeat > 0:
            started = connection_sup.start_heartbeats(self.helper_sup, self.wire,
                                                      tuned.heartbeat, self.me)
            if started[0] != "ok":
                raise RuntimeError(f"cannot start heartbeats: {started!r}")
            self.hb_monitor = started[1]
        self.state = "opening"

    def user_limits(self) -> Mapping[str, Any]:
        """The user's limits as they are now (they may change after login)."""
        assert self.user is not None
        user = self.ctx.users.lookup(self.user.name)
        return {} if user is None else user.limits

    def open(self, m: Any) -> None:
        assert self.user is not None
        vhost = m.virtual_host
        error = limits.connection_refusal(
            connection_max=self.cfg.connection_max, active_connections=len(self.ctx.readers),
            vhost=vhost, vhost_limits=self.ctx.vhost_limits.get(vhost), user=self.user.name,
            user_limits=self.user_limits(), readers=self.ctx.readers.values(),
            peer_count=self.ctx.peer_count)
        if error is None and (vhost not in self.ctx.vhosts
                              or vhost not in self.user.permissions):
            error = AmqpError("NOT_ALLOWED",
                              f"access to vhost '{vhost}' refused for user '{self.user.name}'",
                              (10, 40))
        if error is not None:
            self.send_close(error)
            self.state = "closed"
            actors.send_after(self.cfg.closing_timeout_ms, self.me, ("close_timeout",))
            return
        self.vhost = vhost
        started = connection_sup.start_channel_sup_sup(self.helper_sup)
        if started[0] != "ok":
            raise RuntimeError(f"cannot start the channel supervisor: {started!r}")
        self.channel_sup_sup = started[1]
        self.send0(Out.of(C.Connection.OpenOk))
        self.throttle.blocked_by |= self.ctx.alarm.register(self.me)
        self.state = "running"
        self.control_throttle()

    def update_secret(self, m: Any) -> None:
        """Accepted for internal users, whose credentials never expire, as in RabbitMQ."""
        assert self.user is not None
        self.user = reauthenticate(self.user, m.new_secret or "")
        self.send0(Out.of(C.Connection.UpdateSecretOk))
        log.info("connection %s: user '%s' updated secret, reason: %s",
                 self.peer, self.user.name, m.reason)

    # --------------------------------------------------------------- closing

    def handle_failure(self, failure: Failure) -> None:
        """A non-AMQP failure: a crash drops the socket now; otherwise 541 once
        open, the silent close before."""
        log.error("connection %s: %s", self.peer, failure)
        if failure.crash:
            self.terminate(str(failure))
        elif self.state in (*HANDSHAKE, "opening"):
            self.silent_close()
        elif self.state not in ("closing", "closed"):
            self.server_close(INTERNAL_ERROR_CLOSE)

    def handle_exception(self, channel: int, error: AmqpError) -> None:
        if self.state in HANDSHAKE:
            log.error("connection %s handshake error: %r", self.peer, error)
            self.silent_close()
            return
        if self.state in ("closing", "closed"):
            return
        self.server_close(error)

    def server_close(self, error: AmqpError) -> None:
        if self.state in ("closing", "closed"):
            return
        self.close_reply = error
        self.begin_close()

    def client_close(self) -> None:
        self.close_reply = None
        self.begin_close()

    def begin_close(self) -> None:
        self.state = "closing"
        for ch in list(self.channels.values()):
            actors.send(ch.pid, ("shutdown",))
        if not self.channels:
            self.finish_close()
        else:
            timeout = self.cfg.channel_termination_timeout_ms * len(self.channels)
            actors.send_after(timeout, self.me, ("close_timeout",))

    def finish_close(self) -> None:
        if self.collector is not None and not queue_collector.delete_all(self.collector):
            log.error("connection %s: exclusive queues not deleted in time", self.peer)
        if self.close_reply is None:
            self.send0(Out.of(C.Connection.CloseOk))
        else:
            self.send_close(self.close_reply)
        self.state = "closed"
        timeout = min(self.heartbeat * 1000, self.cfg.closing_timeout_ms) if self.heartbeat \
            else self.cfg.closing_timeout_ms
        actors.send_after(timeout, self.me, ("close_timeout",))

    def cleanup(self) -> None:
        """Runs however the reader ends (also when killed), so no BIF that checks liveness.

        Channels, heartbeats and the collector are not ours to stop: the
        connection supervisor stops them once we are gone. The receiver is
        only linked, and a normal exit does not travel along a link.
        """
        self.ctx.alarm.unregister(self.me)
        if self.receiver is not None:
            self.node.exit_signal(self.me, self.receiver, "kill")
        self.wire.close()


def reader_main(ctx: BrokerContext, sock: Any, sup: Any = None, helper_sup: Any = None,
                registry: dict[Any, Reader] | None = None) -> None:
    """Entry point of the reader of an accepted socket (`connection_sup.start_connection`)."""
    wire = Wire(sock, ctx.config.frame_max_before_tune)
    reader = Reader(ctx, wire, sup, helper_sup)
    if registry is not None:
        registry[reader.me] = reader
    try:
        reader.run()
    finally:
        reader.cleanup()
        if registry is not None:
            registry.pop(reader.me, None)
    if reader.exit_reason != "normal":
        actors.exit(reader.exit_reason)
