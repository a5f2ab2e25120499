"""Workload clients: one OS process per client, pika on its own I/O loop, every op recorded.

These processes are the "control node" of a Jepsen test: the fault injector never
touches them, so what they record in `client_ops` is the authoritative history.
Each runs one role on one queue (`ClientSpec`): a publisher with confirms (unique
message ids in headers and body, a rate or an in-flight window) or a consumer with
manual acks (competing, or single-active with prefetch 1). When a connection dies
they record it (publishes not yet confirmed become `pub_timeout`: unknown) and
reconnect to the next node. The runner starts the drain by creating the client's
drain file (publishers stop and wait for confirms; consumers read until the queue
stays empty); a file, not a signal, so a request cannot arrive before the process
is ready for it. SIGTERM stops at once. The exit status is 0 after a clean drain.

    python -m harness.workload CLIENT.json
"""

from __future__ import annotations

import json
import signal
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pika
import pika.exceptions
from pika.adapters.select_connection import IOLoop

from analysis.client_ops import ClientChannel, ClientHistory
from analysis.recorder import Recorder
from analysis.sampler import Sampler
from harness.scenarios import ClientSpec

__all__ = ["ClientConfig", "Consumer", "Publisher", "RpcClient", "RpcServer", "main",
           "run_client"]

ID_HEADER = "x-warren-id"
PUB_HEADER = "x-warren-pub"
SEQ_HEADER = "x-warren-seq"
POISON_HEADER = "x-warren-poison"
#: message ids of client k are k * ID_STRIDE + n: unique across the run
ID_STRIDE = 1 << 36
TICK_S = 0.01
RECONNECT_S = 0.5
DRAIN_IDLE_S = 1.5
#: an RPC client's drain waits this long after the last reply for the ones still due
REPLY_IDLE_S = 3.0


@dataclass
class ClientConfig:
    """Everything a client process needs; the runner writes it as JSON."""

    client: str  # "client-3": the `node` of its history rows
    index: int
    run_dir: str
    run_id: str
    endpoints: list[tuple[str, int]]
    spec: ClientSpec
    drain_timeout_s: float = 60.0
    #: created by the runner to start the drain (default: `<run_dir>/clients/<client>.drain`)
    drain_file: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def drain_path(self) -> Path:
        return Path(self.drain_file or Path(self.run_dir) / "clients" / f"{self.client}.drain")

    def request_drain(self) -> None:
        """Ask the client process to drain (it notices within a tick)."""
        self.drain_path.parent.mkdir(parents=True, exist_ok=True)
        self.drain_path.touch()

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ClientConfig:
        data = json.loads(text)
        data["spec"] = ClientSpec(**data["spec"])
        data["endpoints"] = [tuple(e) for e in data["endpoints"]]
        return cls(**data)


def message_body(msg_id: int, size: int) -> bytes:
    head = f"warren {msg_id} ".encode()
    return head + b"." * max(0, size - len(head))


def msg_id_of(headers: dict[str, Any], body: bytes) -> int:
    """The message id from the header, else from the body (a stripped header)."""
    value = headers.get(ID_HEADER)
    if value is not None:
        return int(value)
    try:
        return int(body.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return -1


class _Client:
    """Connection life cycle shared by both roles: connect, record, reconnect, stop."""

    def __init__(self, cfg: ClientConfig, recorder: Recorder,
                 ioloop: IOLoop | None = None) -> None:
        self.cfg = cfg
        self.spec = cfg.spec
        self.recorder = recorder
        self.history = ClientHistory(recorder.sink, cfg.client)
        self.ioloop = ioloop or IOLoop()
        self.endpoint = cfg.index % len(cfg.endpoints)
        self.conn_n = 0
        self.conn: pika.SelectConnection | None = None
        self.conn_id = ""
        self.channel: Any = None
        self.rec: ClientChannel | None = None
        self.drain_requested = False
        self.draining = False
        self.stopping = False
        self.drained_ok: bool | None = None
        self._closing_channel = False

    # ------------------------------------------------------------ lifecycle

    def run(self) -> bool | None:
        """Run until stopped; True after a clean drain, False after a failed one."""
        self._connect()
        self.ioloop.call_later(TICK_S, self._tick)
        self.ioloop.call_later(1.0, self._flush)
        self.ioloop.call_later(0.1, self._poll_drain)
        self.ioloop.start()
        return self.drained_ok

    def request_drain(self) -> None:
        self.drain_requested = True

    def request_stop(self) -> None:
        self.stopping = True

    def _flush(self) -> None:
        """Once a second: history to disk, and a look for the drain file."""
        self.recorder.flush()
        self.ioloop.call_later(1.0, self._flush)

    def _poll_drain(self) -> None:
        if self.cfg.drain_path.exists():
            self.drain_requested = True
        else:
            self.ioloop.call_later(0.1, self._poll_drain)

    def _connect(self) -> None:
        if self.drained_ok is not None:
            self.ioloop.stop()
            return
        host, port = self.cfg.endpoints[self.endpoint]
        self.conn_n += 1
        conn_id = f"{self.cfg.client}.{self.conn_n}"
        params = pika.ConnectionParameters(host, port, heartbeat=self.spec.heartbeat_s,
                                           connection_attempts=1, socket_timeout=3,
                                           stack_timeout=5, blocked_connection_timeout=None)
        self.conn_id = conn_id
        self.conn = pika.SelectConnection(
            params, on_open_callback=self._on_conn_open,
            on_open_error_callback=self._on_conn_error,
            on_close_callback=self._on_conn_closed, custom_ioloop=self.ioloop)

    def _next_endpoint(self) -> None:
        self.endpoint = (self.endpoint + 1) % len(self.cfg.endpoints)

    def _on_conn_open(self, conn: pika.SelectConnection) -> None:
        conn.add_on_connection_blocked_callback(self._on_blocked)
        conn.add_on_connection_unblocked_callback(self._on_unblocked)
        conn.channel(on_open_callback=self._on_channel_open)

    def _on_conn_error(self, _conn: Any, error: Any) -> None:
        self.conn = None
        self._next_endpoint()
        self.ioloop.call_later(RECONNECT_S, self._connect)

    def _on_conn_closed(self, _conn: Any, reason: Any) -> None:
        normal = self.drained_ok is not None
        error = None if normal else _reason(reason)
        self._channel_gone(error or "connection closed")
        self.history.conn_close(self.conn_id, error)
        self.conn = None
        if normal:
            self.ioloop.stop()
            return
        self._next_endpoint()
        self.ioloop.call_later(RECONNECT_S, self._connect)

    def _on_channel_open(self, channel: Any) -> None:
        self.channel = channel
        self.rec = self.history.channel(self.conn_id, channel.channel_number)
        channel.add_on_close_callback(self._on_channel_closed)
        self._setup(channel)

    def _on_channel_closed(self, channel: Any, reason: Any) -> None:
        if channel is not self.channel:
            return
        self._channel_gone(_reason(reason))
        conn = self.conn
        if conn is not None and conn.is_open and not self.stopping:
            conn.channel(on_open_callback=self._on_channel_open)

    def _channel_gone(self, error: str | None) -> None:
        """Record the current channel's end once (channel and connection both report it)."""
        if self.rec is not None:
            self.rec.close(None if self._closing_channel else error)
        self.rec = None
        self.channel = None
        self._closing_channel = False

    def _finish(self, ok: bool) -> None:
        """Drain over (or stop): the next tick closes the connection, then the loop ends."""
        if self.drained_ok is None:
            self.drained_ok = ok

    def _tick(self) -> None:
        if self.drained_ok is None:
            if self.stopping:
                self._finish(False)
            else:
                if self.drain_requested and not self.draining:
                    self.draining = True
                    self._start_drain()
                self._step()
        if self.drained_ok is not None:
            conn = self.conn
            if conn is None or conn.is_closed:
                self.ioloop.stop()
                return
            if conn.is_open and not self._closing_channel:
                self._closing_channel = True
                conn.close()
        self.ioloop.call_later(TICK_S, self._tick)

    def _on_blocked(self, *_args: Any) -> None:
        pass

    def _on_unblocked(self, *_args: Any) -> None:
        pass

    # ------------------------------------------------------------- per role

    def _setup(self, channel: Any) -> None:
        raise NotImplementedError

    def _step(self) -> None:
        raise NotImplementedError

    def _start_drain(self) -> None:
        raise NotImplementedError


def _reason(reason: Any) -> str:
    return f"{type(reason).__name__}: {reason}" if reason is not None else "closed"


class Publisher(_Client):
    """Publishes with confirms at `spec.rate` (or as fast as the window allows)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sent = 0
        self.pub_seq = 0
        self.pending: dict[int, float] = {}  # pub_seq -> monotonic send time
        self.blocked = False
        self.started = time.monotonic()
        self.drain_deadline = 0.0
        self.ready = False

    def _setup(self, channel: Any) -> None:
        self.pub_seq = 0
        self.pending.clear()
        self.ready = False
        channel.confirm_delivery(ack_nack_callback=self._on_confirm,
                                 callback=lambda _frame: self._confirm_ok(channel))

    def _confirm_ok(self, channel: Any) -> None:
        if channel is self.channel:
            self.ready = True

    def _on_confirm(self, frame: Any) -> None:
        method = frame.method
        rec = self.rec
        if rec is None:
            return
        tag, multiple = int(method.delivery_tag), bool(method.multiple)
        if isinstance(method, pika.spec.Basic.Ack):
            rec.confirm(tag, multiple)
        else:
            rec.pub_nack(tag, multiple)
        for seq in [s for s in self.pending if s <= tag] if multiple else [tag]:
            self.pending.pop(seq, None)

    def _on_blocked(self, *_args: Any) -> None:
        self.blocked = True

    def _on_unblocked(self, *_args: Any) -> None:
        self.blocked = False
        now = time.monotonic()
        self.pending = dict.fromkeys(self.pending, now)  # the stall clock restarts

    def _due(self) -> int:
        spec = self.spec
        room = spec.max_in_flight - len(self.pending)
        if spec.messages:
            room = min(room, spec.messages - self.sent)
        if spec.rate > 0:
            room = min(room, int(spec.rate * (time.monotonic() - self.started)) - self.sent)
        return max(0, room)

    def _step(self) -> None:
        now = time.monotonic()
        stalled = (bool(self.pending) and not self.blocked
                   and now - min(self.pending.values()) > self.spec.confirm_timeout_s)
        if self.draining:
            if not self.pending or stalled or now > self.drain_deadline:
                if self.rec is not None:
                    self.rec.timeout_unconfirmed("confirm timeout" if stalled
                                                 else "drain timeout")
                self.pending.clear()
                self._finish(True)
            return
        if self.rec is None or not self.ready:
            return
        if stalled:
            self._give_up("confirm timeout")
            return
        if self.blocked:
            return
        for _ in range(self._due()):
            self._publish_one()

    def _publish_one(self) -> None:
        spec, rec = self.spec, self.rec
        assert rec is not None
        msg_id = self.cfg.index * ID_STRIDE + self.sent
        self.sent += 1
        self.pub_seq += 1
        headers: dict[str, Any] = {ID_HEADER: msg_id, PUB_HEADER: rec.pub_chan,
                                   SEQ_HEADER: self.pub_seq}
        if spec.poison_every and self.sent % spec.poison_every == 0:
            headers[POISON_HEADER] = True
        body = message_body(msg_id, spec.body_size)
        rec.publish(spec.queue, msg_id, self.pub_seq, body)
        self.pending[self.pub_seq] = time.monotonic()
        self.channel.basic_publish("", spec.queue, body,
                                   pika.BasicProperties(delivery_mode=2, headers=headers))

    def _channel_gone(self, error: str | None) -> None:
        super()._channel_gone(error)  # records what was unconfirmed as unknown
        self.pending.clear()
        self.ready = False

    def _give_up(self, why: str) -> None:
        """No confirms for too long: publishes are unknown; try another node."""
        if self.rec is not None:
            self.rec.timeout_unconfirmed(why)
        self.pending.clear()
        conn = self.conn
        if conn is not None and conn.is_open:
            conn.close(320, why)

    def _start_drain(self) -> None:
        self.drain_deadline = time.monotonic() + self.cfg.drain_timeout_s


class Consumer(_Client):
    """Consumes with manual acks; poison messages are rejected with requeue."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tag_n = 0
        self.unacked: set[int] = set()
        self.last_delivery = time.monotonic()
        self.drain_deadline = 0.0
        self.checking = False
        self.consumer_tag: str | None = None
        #: msg_id -> times this consumer rejected it (`poison_requeues` bounds them)
        self.poison_rejects: dict[int, int] = {}

    def _setup(self, channel: Any) -> None:
        self.unacked.clear()
        self.checking = False
        channel.add_on_cancel_callback(lambda _frame: self._on_cancelled(channel))
        channel.basic_qos(prefetch_count=self.spec.prefetch,
                          callback=lambda _frame: self._consume(channel))

    def _consume(self, channel: Any) -> None:
        if channel is not self.channel:
            return
        self.tag_n += 1
        tag = f"{self.conn_id}-ctag{self.tag_n}"
        self.consumer_tag = tag
        # the broker cannot see the client's connection id: this argument names the
        # consumer as the history's consumer_key does (conn_id/channel_id/tag)
        who = {"x-warren-consumer": f"{self.conn_id}/{channel.channel_number}"}
        channel.basic_consume(self.spec.queue, self._on_message, auto_ack=False,
                              consumer_tag=tag, arguments=who,
                              callback=lambda _frame: self._consume_ok(channel, tag))

    def _consume_ok(self, channel: Any, tag: str) -> None:
        if channel is self.channel and self.rec is not None:
            self.rec.consume_ok(self.spec.queue, tag)

    def _on_cancelled(self, channel: Any) -> None:
        """The broker cancelled the consumer (queue leader gone, queue deleted)."""
        if channel is not self.channel or self.rec is None:
            return
        self.rec.cancel(self.spec.queue, self.consumer_tag or "")
        self.unacked.clear()
        self.ioloop.call_later(RECONNECT_S, lambda: self._consume(channel))

    def _on_message(self, channel: Any, method: Any, props: Any, body: bytes) -> None:
        rec = self.rec
        if channel is not self.channel or rec is None:
            return
        headers = dict(props.headers or {})
        tag = int(method.delivery_tag)
        count = headers.get("x-delivery-count")
        seq = headers.get(SEQ_HEADER)
        pub = headers.get(PUB_HEADER)
        rec.deliver(self.spec.queue, method.consumer_tag, tag, msg_id_of(headers, body), body,
                    bool(method.redelivered),
                    pub_chan=pub.decode() if isinstance(pub, bytes) else pub,
                    pub_seq=None if seq is None else int(seq),
                    delivery_count=None if count is None else int(count))
        self.last_delivery = time.monotonic()
        self.unacked.add(tag)
        if headers.get(POISON_HEADER) and self._rejects_poison(msg_id_of(headers, body)):
            channel.basic_reject(tag, requeue=True)
            rec.reject(tag, requeue=True)
            self.unacked.discard(tag)
        elif self.spec.ack_delay_s > 0:
            self.ioloop.call_later(self.spec.ack_delay_s, lambda: self._ack(channel, tag))
        else:
            self._ack(channel, tag)

    def _rejects_poison(self, msg_id: int) -> bool:
        """Whether this delivery of a poison message is rejected with requeue: always,
        or its first `poison_requeues` deliveries to this consumer when that is set
        (then it is acked, so a queue without a delivery limit still drains)."""
        if not self.spec.reject_poison:
            return False
        limit = self.spec.poison_requeues
        done = self.poison_rejects.get(msg_id, 0)
        if limit and done >= limit:
            return False
        self.poison_rejects[msg_id] = done + 1
        return True

    def _ack(self, channel: Any, tag: int) -> None:
        if channel is not self.channel or self.rec is None or not channel.is_open:
            return
        channel.basic_ack(tag)
        self.rec.ack(tag)
        self.unacked.discard(tag)

    def _start_drain(self) -> None:
        self.history.drain_start()
        self.drain_deadline = time.monotonic() + self.cfg.drain_timeout_s

    def _step(self) -> None:
        if not self.draining:
            return
        now = time.monotonic()
        if now > self.drain_deadline:
            self.history.drain_end(False)
            self._finish(False)
            return
        channel = self.channel
        if (self.checking or channel is None or not channel.is_open or self.unacked
                or now - self.last_delivery < DRAIN_IDLE_S):
            return
        self.checking = True
        channel.queue_declare(self.spec.queue, passive=True,
                              callback=lambda frame: self._declared(channel, frame))

    def _declared(self, channel: Any, frame: Any) -> None:
        self.checking = False
        if channel is not self.channel or self.drained_ok is not None:
            return
        if frame.method.message_count == 0 and not self.unacked:
            self.history.drain_end(True)
            self._finish(True)
        else:
            self.last_delivery = time.monotonic()


class RpcClient(Publisher):
    """Requests over RPC: each connection declares an exclusive server-named reply queue
    (`queue=''`), consumes it, and publishes persistent requests with confirms to the
    work queue, `mandatory` and with `reply_to` naming it, as RPC clients (Celery's
    rpc:// results, pika's RPC example) do. Replies are recorded as deliveries from
    the reply queue and acked. A request the broker returns (no queue took it, as while
    the work queue's home node is down) is recorded as `return`. When the connection
    goes, so does its reply queue, with any reply still in it; the next connection
    declares a new one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reply_queue: str | None = None
        self.awaiting: set[int] = set()  # request ids without a reply yet
        self.last_reply = time.monotonic()

    def _setup(self, channel: Any) -> None:
        self.reply_queue = None
        self.awaiting.clear()
        self.ready = False
        channel.add_on_return_callback(self._on_return)
        channel.queue_declare("", exclusive=True,
                              callback=lambda frame: self._reply_queue(channel, frame))

    def _reply_queue(self, channel: Any, frame: Any) -> None:
        if channel is not self.channel or self.rec is None:
            return
        name = frame.method.queue
        tag = f"{self.conn_id}-reply"
        channel.basic_consume(name, self._on_reply, auto_ack=False, consumer_tag=tag,
                              callback=lambda _f: self._replying(channel, name, tag))

    def _replying(self, channel: Any, name: str, tag: str) -> None:
        if channel is not self.channel or self.rec is None:
            return
        self.reply_queue = name
        self.rec.consume_ok(name, tag)
        super()._setup(channel)  # confirm mode, then ready

    def _publish_one(self) -> None:
        spec, rec = self.spec, self.rec
        assert rec is not None and self.reply_queue is not None
        msg_id = self.cfg.index * ID_STRIDE + self.sent
        self.sent += 1
        self.pub_seq += 1
        headers: dict[str, Any] = {ID_HEADER: msg_id, PUB_HEADER: rec.pub_chan,
                                   SEQ_HEADER: self.pub_seq}
        body = message_body(msg_id, spec.body_size)
        rec.publish(spec.queue, msg_id, self.pub_seq, body)
        self.pending[self.pub_seq] = time.monotonic()
        self.awaiting.add(msg_id)
        props = pika.BasicProperties(delivery_mode=2, headers=headers,
                                     reply_to=self.reply_queue, correlation_id=str(msg_id))
        self.channel.basic_publish("", spec.queue, body, props, mandatory=True)

    def _on_return(self, channel: Any, method: Any, props: Any, body: bytes) -> None:
        if channel is not self.channel or self.rec is None:
            return
        msg_id = msg_id_of(dict(props.headers or {}), body)
        self.rec.returned(method.routing_key, msg_id, int(method.reply_code))
        self.awaiting.discard(msg_id)

    def _on_reply(self, channel: Any, method: Any, props: Any, body: bytes) -> None:
        rec = self.rec
        if channel is not self.channel or rec is None:
            return
        headers = dict(props.headers or {})
        seq, pub = headers.get(SEQ_HEADER), headers.get(PUB_HEADER)
        tag = int(method.delivery_tag)
        rec.deliver(self.reply_queue or "", method.consumer_tag, tag, msg_id_of(headers, body),
                    body, bool(method.redelivered),
                    pub_chan=pub.decode() if isinstance(pub, bytes) else pub,
                    pub_seq=None if seq is None else int(seq))
        channel.basic_ack(tag)
        rec.ack(tag)
        if props.correlation_id is not None:
            self.awaiting.discard(int(props.correlation_id))
        self.last_reply = time.monotonic()

    def _start_drain(self) -> None:
        super()._start_drain()
        self.last_reply = time.monotonic()

    def _step(self) -> None:
        now = time.monotonic()
        if (self.draining and not self.pending and self.awaiting
                and now - self.last_reply <= REPLY_IDLE_S and now <= self.drain_deadline):
            return  # confirms are in: the replies still on their way, for a while
        super()._step()

    def _channel_gone(self, error: str | None) -> None:
        super()._channel_gone(error)
        self.reply_queue = None
        self.awaiting.clear()  # the reply queue went with the connection


class RpcServer(Consumer):
    """Serves the work queue: each request is answered on its `reply_to` queue (a
    transient reply, `mandatory`, with confirms on the consuming channel, recorded as
    a publish of its own) and then acked. A reply the broker returns (its client's
    reply queue is gone) is recorded as `return`. A channel the broker closes (the work
    queue's home node is down: 404 on consume) is opened again after a pause."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.replies = 0
        self.pub_seq = 0

    def _setup(self, channel: Any) -> None:
        self.pub_seq = 0
        channel.add_on_return_callback(self._on_return)
        channel.confirm_delivery(ack_nack_callback=self._on_confirm,
                                 callback=lambda _frame: self._confirming(channel))

    def _confirming(self, channel: Any) -> None:
        if channel is self.channel:
            super()._setup(channel)

    def _on_confirm(self, frame: Any) -> None:
        method, rec = frame.method, self.rec
        if rec is None:
            return
        if isinstance(method, pika.spec.Basic.Ack):
            rec.confirm(int(method.delivery_tag), bool(method.multiple))
        else:
            rec.pub_nack(int(method.delivery_tag), bool(method.multiple))

    def _on_return(self, channel: Any, method: Any, props: Any, body: bytes) -> None:
        if channel is self.channel and self.rec is not None:
            self.rec.returned(method.routing_key, msg_id_of(dict(props.headers or {}), body),
                              int(method.reply_code))

    def _on_message(self, channel: Any, method: Any, props: Any, body: bytes) -> None:
        rec = self.rec
        if channel is self.channel and rec is not None and props.reply_to:
            reply_id = self.cfg.index * ID_STRIDE + self.replies
            self.replies += 1
            self.pub_seq += 1
            reply = message_body(reply_id, self.spec.body_size)
            # the order header counts every reply of the process: a channel reopened under
            # the same number restarts its confirm numbers, not the order it publishes in
            headers = {ID_HEADER: reply_id, PUB_HEADER: rec.pub_chan, SEQ_HEADER: self.replies}
            rec.publish(props.reply_to, reply_id, self.pub_seq, reply)
            channel.basic_publish("", props.reply_to, reply, pika.BasicProperties(
                headers=headers, correlation_id=props.correlation_id), mandatory=True)
        super()._on_message(channel, method, props, body)

    def _on_channel_closed(self, channel: Any, reason: Any) -> None:
        if channel is not self.channel:
            return
        self._channel_gone(_reason(reason))
        self.ioloop.call_later(RECONNECT_S, self._reopen)

    def _reopen(self) -> None:
        conn = self.conn
        if (conn is not None and conn.is_open and not self.stopping and self.channel is None
                and self.drained_ok is None):
            conn.channel(on_open_callback=self._on_channel_open)


ROLES: dict[str, type[_Client]] = {"publisher": Publisher, "consumer": Consumer,
                                   "rpc_client": RpcClient, "rpc_server": RpcServer}


def run_client(cfg: ClientConfig, recorder: Recorder | None = None) -> bool | None:
    """Run one client in this process until drained or stopped (signals installed)."""
    own = recorder is None
    rec = recorder or Recorder(cfg.run_dir, cfg.run_id, cfg.client)
    sampler = Sampler(emit=rec.record).start() if own else None
    client = ROLES[cfg.spec.role](cfg, rec)
    signal.signal(signal.SIGTERM, lambda *_: client.request_stop())
    try:
        return client.run()
    finally:
        if sampler is not None:
            sampler.stop()
        if own:
            rec.close()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    cfg = ClientConfig.from_json(Path(args[0]).read_text())
    ok = run_client(cfg)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
