"""pika against three real `warren node start` processes, with both of pika's adapters.

The AMQP specification tests (`test_broker_amqp_*.py`) share what is here:

* `broker_support.running_cluster` starts three quorum-backend nodes once per test module (the
  `cluster` fixture of this package's conftest) and kills them whatever
  happens;
* `Amqp` is one test's view of that cluster: it opens `BlockingConnection`s and
  `AsyncClient`s (a `SelectConnection` driven by its own ioloop inside the test),
  declares the test's queues, runs `warren ctl`, and at the end closes every
  connection it opened and deletes every queue it declared, so the next test of
  the module starts from a clean cluster;
* `AsyncClient` / `AsyncChannel` record what the broker sends (confirms,
  deliveries, cancels, closes, connection.blocked) and `run_until` turns the ioloop
  until a condition holds, failing the test at a hard deadline instead of hanging.

Waits are bounded polls; no test asserts how long anything took.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pika
import pika.exceptions as pex
import pytest

from tests.broker.broker_support import (
    BrokerProc,
    ctl,
    ctl_json,
    eventually,
)

QQ = {"x-queue-type": "quorum"}

#: how long `run_until` turns an ioloop before it fails the test
DEADLINE_S = 15.0
_POLL_S = 0.01



def closed_by_broker(fn: Callable[[], Any]) -> tuple[int, str]:
    """Run `fn` on a blocking channel that the broker must close: (reply code, text)."""
    with pytest.raises(pex.ChannelClosedByBroker) as info:
        fn()
    return info.value.reply_code, info.value.reply_text


def headers(props: Any) -> dict[str, Any]:
    return dict(props.headers or {})


def get_eventually(ch: Any, queue: str, what: str) -> tuple[Any, Any, bytes]:
    """basic.get (auto-ack) on a blocking channel until a message comes, for messages
    that arrive by an asynchronous path (dead letters)."""
    def one() -> tuple[Any, Any, bytes] | None:
        method, props, body = ch.basic_get(queue, auto_ack=True)
        return None if method is None else (method, props, body)
    got = eventually(one)
    assert got is not None, f"no {what} in {queue}"
    return got


def drain_gets(ch: Any, queue: str) -> list[tuple[bytes, bool]]:
    """Every message `queue` holds, by `basic.get` with auto-ack: (body, redelivered)."""
    got: list[tuple[bytes, bool]] = []
    while True:
        method, _props, body = ch.basic_get(queue, auto_ack=True)
        if method is None:
            return got
        got.append((body, method.redelivered))


def pump_until(conn: pika.BlockingConnection, condition: Callable[[], Any], what: str,
               timeout: float = DEADLINE_S) -> None:
    """Process a blocking connection's events until `condition()` holds, or fail."""
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.05)
    assert condition(), f"no {what} within {timeout} s"


# ------------------------------------------------------------------ SelectConnection


@dataclass
class Confirm:
    """One basic.ack / basic.nack frame a publisher received."""

    kind: str  # "ack" | "nack"
    tag: int
    multiple: bool


@dataclass
class Delivery:
    consumer_tag: str
    delivery_tag: int
    redelivered: bool
    body: bytes
    headers: dict[str, Any]


class AsyncChannel:
    """A channel of an `AsyncClient`; every call returns once the broker answered."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client
        self.confirms: list[Confirm] = []
        self.deliveries: list[Delivery] = []
        #: delivery tags the client settled (ack / nack / reject)
        self.settled: set[int] = set()
        #: for each delivery, how many deliveries were unsettled once it arrived
        self.unsettled_seen: list[int] = []
        self.cancelled: list[str] = []
        self.closed: BaseException | None = None
        self.ch: Any = None
        client.conn.channel(on_open_callback=self._opened)
        client.run_until(lambda: self.ch is not None or self.closed is not None,
                         "channel.open-ok")

    def _opened(self, ch: Any) -> None:
        ch.add_on_close_callback(self._closed)
        ch.add_on_cancel_callback(lambda frame: self.cancelled.append(frame.method.consumer_tag))
        self.ch = ch

    def _closed(self, _ch: Any, reason: BaseException) -> None:
        self.closed = reason

    def _call(self, start: Callable[[Callable[[Any], None]], Any], what: str) -> Any:
        """Send a synchronous method; run until its reply (or a close) arrives."""
        replies: list[Any] = []
        result = start(replies.append)
        self.client.run_until(lambda: bool(replies) or self.closed is not None, what)
        if self.closed is not None and not replies:
            raise self.closed
        return result if result is not None else replies[0]

    def declare(self, queue: str, arguments: dict[str, Any] | None = None) -> Any:
        """A durable quorum queue.declare; its declare-ok frame (raises if the channel closed)."""
        return self._call(lambda done: self.ch.queue_declare(
            queue, durable=True, arguments={**QQ, **(arguments or {})}, callback=done),
            "queue.declare-ok")

    def confirm_select(self) -> None:
        self._call(lambda done: self.ch.confirm_delivery(self._confirm, callback=done),
                   "confirm.select-ok")

    def _confirm(self, frame: Any) -> None:
        m = frame.method
        self.confirms.append(Confirm(m.NAME.rsplit(".", 1)[-1].lower(), m.delivery_tag,
                                     m.multiple))

    def qos(self, prefetch: int) -> None:
        self._call(lambda done: self.ch.basic_qos(prefetch_count=prefetch, callback=done),
                   "basic.qos-ok")

    def publish(self, queue: str, body: bytes, props: pika.BasicProperties | None = None,
                exchange: str = "") -> None:
        self.ch.basic_publish(exchange, queue, body, props)

    def consume(self, queue: str, auto_ack: bool = False,
                arguments: dict[str, Any] | None = None) -> str:
        tag: str = self._call(
            lambda done: self.ch.basic_consume(queue, self._deliver, auto_ack=auto_ack,
                                               arguments=arguments, callback=done),
            "basic.consume-ok")
        return tag

    def _deliver(self, _ch: Any, method: Any, props: Any, body: bytes) -> None:
        self.deliveries.append(Delivery(method.consumer_tag, method.delivery_tag,
                                        method.redelivered, body, headers(props)))
        self.unsettled_seen.append(len(self.unsettled()))

    def unsettled(self) -> list[int]:
        return [d.delivery_tag for d in self.deliveries if d.delivery_tag not in self.settled]

    def _settle(self, tag: int, multiple: bool) -> None:
        self.settled.update(t for t in self.unsettled() if t == tag or (multiple and t < tag))

    def cancel(self, consumer_tag: str) -> None:
        self._call(lambda done: self.ch.basic_cancel(consumer_tag, callback=done),
                   "basic.cancel-ok")

    def ack(self, tag: int, multiple: bool = False) -> None:
        self._settle(tag, multiple)
        self.ch.basic_ack(tag, multiple=multiple)

    def nack(self, tag: int, multiple: bool = False, requeue: bool = True) -> None:
        self._settle(tag, multiple)
        self.ch.basic_nack(tag, multiple=multiple, requeue=requeue)

    def reject(self, tag: int, requeue: bool = True) -> None:
        self._settle(tag, False)
        self.ch.basic_reject(tag, requeue=requeue)

    def recover(self) -> None:
        self._call(lambda done: self.ch.basic_recover(requeue=True, callback=done),
                   "basic.recover-ok")

    def sync(self) -> None:
        """A round trip (channel.flow active=true) after methods without a reply, such as
        settlements: once it returns, the channel has handled everything sent before."""
        self._call(lambda done: self.ch.flow(True, callback=done), "channel.flow-ok")

    def close(self) -> None:
        self.ch.close()
        self.client.run_until(lambda: self.closed is not None, "channel.close-ok")

    def wait_deliveries(self, count: int) -> None:
        """Turn the ioloop until this channel has had at least `count` deliveries."""
        self.client.run_until(lambda: len(self.deliveries) >= count, f"delivery #{count}")

    def bodies(self) -> list[bytes]:
        return [d.body for d in self.deliveries]

    def confirmed(self) -> dict[int, str]:
        """Publish sequence number -> "ack" | "nack", `multiple` frames expanded."""
        outcome: dict[int, str] = {}
        for c in self.confirms:
            tags = range(1, c.tag + 1) if c.multiple else (c.tag,)
            for tag in tags:
                if tag not in outcome:
                    outcome[tag] = c.kind
        return outcome


class AsyncClient:
    """A `pika.SelectConnection` whose ioloop the test turns with `run_until`."""

    def __init__(self, params: pika.ConnectionParameters) -> None:
        self.opened = False
        self.closed: BaseException | None = None
        self.blocked: list[str] = []  # connection.blocked reasons
        self.unblocked = 0
        self.conn = pika.SelectConnection(
            params, on_open_callback=self._opened, on_open_error_callback=self._failed,
            on_close_callback=self._lost)
        self.conn.add_on_connection_blocked_callback(
            lambda _c, frame: self.blocked.append(frame.method.reason))
        self.conn.add_on_connection_unblocked_callback(lambda _c, _f: self._unblocked())
        self.run_until(lambda: self.opened or self.closed is not None, "connection.open-ok")
        if self.closed is not None:
            raise self.closed

    def _opened(self, _conn: Any) -> None:
        self.opened = True

    def _failed(self, _conn: Any, error: BaseException) -> None:
        self.closed = error

    def _lost(self, _conn: Any, reason: BaseException) -> None:
        self.closed = reason

    def _unblocked(self) -> None:
        self.unblocked += 1

    def run_until(self, condition: Callable[[], Any], what: str,
                  timeout: float = DEADLINE_S) -> None:
        """Turn the ioloop until `condition()` holds; fail the test at the deadline."""
        if not condition():
            self._turn(condition, time.monotonic() + timeout)
        assert condition(), f"no {what} within {timeout} s"

    def run_for(self, seconds: float) -> None:
        """Let the broker's frames in for a while (before asserting that nothing came)."""
        self._turn(lambda: False, time.monotonic() + seconds)

    def _turn(self, condition: Callable[[], Any], deadline: float) -> None:
        ioloop = self.conn.ioloop

        def check() -> None:
            if condition() or time.monotonic() >= deadline or self.conn.is_closed:
                ioloop.stop()
            else:
                ioloop.call_later(_POLL_S, check)
        ioloop.call_later(0, check)
        ioloop.start()

    def channel(self) -> AsyncChannel:
        return AsyncChannel(self)

    def close(self) -> None:
        if self.conn.is_open:
            self.conn.close()
        if not self.conn.is_closed:
            self.run_until(lambda: self.conn.is_closed, "connection.close-ok")


# ------------------------------------------------------------------ one test's view


_counter = itertools.count(1)


def unique_queue_name(test_name: str) -> str:
    """A queue name no other test of the run uses (readable in `list_queues`)."""
    stem = re.sub(r"[^a-z0-9]+", "-", test_name.lower()).strip("-")
    return f"{stem[-60:].lstrip('-')}-{next(_counter)}"


@dataclass
class Amqp:
    """One test's connections, queues and ctl calls on the module's three nodes."""

    nodes: list[BrokerProc]
    queues: list[str] = field(default_factory=list)
    blocking_conns: list[pika.BlockingConnection] = field(default_factory=list)
    async_clients: list[AsyncClient] = field(default_factory=list)

    def name(self, i: int) -> str:
        return self.nodes[i].name

    def index(self, node_name: str) -> int:
        return [b.name for b in self.nodes].index(node_name)

    def params(self, i: int) -> pika.ConnectionParameters:
        return pika.ConnectionParameters("127.0.0.1", self.nodes[i].amqp_port,
                                         connection_attempts=1)

    def blocking(self, i: int = 0) -> pika.BlockingConnection:
        conn = pika.BlockingConnection(self.params(i))
        self.blocking_conns.append(conn)
        return conn

    def select(self, i: int = 0) -> AsyncClient:
        client = AsyncClient(self.params(i))
        self.async_clients.append(client)
        return client

    def declare(self, queue: str, node: int = 0, **arguments: Any) -> None:
        """Declare a quorum queue from a connection to `node` (client-local: it leads there)."""
        conn = pika.BlockingConnection(self.params(node))
        try:
            conn.channel().queue_declare(queue, durable=True, arguments={**QQ, **arguments})
            if queue not in self.queues:
                self.queues.append(queue)
        finally:
            conn.close()

    def ctl_ok(self, i: int, *args: str) -> None:
        out = ctl(self.name(i), *args)
        assert (out.returncode, out.stdout.strip()) == (0, "ok"), out.stderr

    def ctl_json(self, i: int, *args: str) -> Any:
        return ctl_json(self.name(i), *args)

    def quorum_status(self, queue: str) -> list[dict[str, Any]]:
        return list(self.ctl_json(0, "quorum_status", queue))

    def leader(self, queue: str) -> str:
        def found() -> str | None:
            rows = [r["node"] for r in self.quorum_status(queue) if r["raft_state"] == "leader"]
            return rows[0] if rows else None
        node = eventually(found)
        assert node is not None, f"queue {queue} has no leader"
        return str(node)

    def ready(self, queue: str, node: int = 0) -> int:
        """Ready messages, as a passive queue.declare reports them."""
        conn = pika.BlockingConnection(self.params(node))
        try:
            return int(conn.channel().queue_declare(queue, passive=True).method.message_count)
        finally:
            conn.close()

    def close(self) -> None:
        for client in self.async_clients:
            try:
                client.close()
            except (AssertionError, pex.AMQPError):
                pass
        for conn in self.blocking_conns:
            if conn.is_open:
                try:
                    conn.close()
                except pex.AMQPError:
                    pass
        if self.queues:
            conn = pika.BlockingConnection(self.params(0))
            try:
                ch = conn.channel()
                for queue in self.queues:
                    ch.queue_delete(queue)
            finally:
                if conn.is_open:
                    conn.close()
