"""A warren node with the AMQP listener on 127.0.0.1 (free port) and in-memory queues.

pika's BlockingConnection uses blocking sockets, so client code runs in a real
OS thread of gevent's thread pool (`client(fn)`) while the node's hub keeps
serving the connection; `in_hub(fn)` lets client code run something on the
hub (set an alarm, hold a queue). Everything is stopped at teardown.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import gevent
import pika
import pika.exceptions as pex
import pytest

from actors import Node
from channel.connection.config import BrokerContext, Config
from channel.connection.listener import Listener
from channel.queue_types.testing import MemoryBackend
from ra import system as ra_system

T = TypeVar("T")


@dataclass
class Broker:
    node: Node
    ctx: BrokerContext
    listener: Listener
    backend: MemoryBackend

    @property
    def port(self) -> int:
        return self.listener.port

    def only_reader(self) -> Any:
        assert len(self.listener.readers) == 1, self.listener.readers
        return next(iter(self.listener.readers.values()))


def make_broker(node: Node, config: Config) -> Broker:
    backend = MemoryBackend(node)
    ctx = BrokerContext(node, backend, config=config)
    backend.on_deleted = ctx.topology.remove_queue
    listener = Listener(ctx, "127.0.0.1", 0).start()
    return Broker(node, ctx, listener, backend)


@pytest.fixture
def node() -> Iterator[Node]:
    n = Node("warren@127.0.0.1:1").start()
    yield n
    greenlets = [p.greenlet for p in list(n.procs.values()) if p.greenlet is not None]
    n.stop()
    gevent.joinall(greenlets, timeout=5)
    assert all(g.dead for g in greenlets), "a process outlived its test"


@pytest.fixture
def lone_node() -> Iterator[Node]:
    """A single node running a Ra system, for quorum queues on one member."""
    n = Node("warren@127.0.0.1:1").start()
    with n.attached():
        assert ra_system.start()[0] == "ok"
    yield n
    greenlets = [p.greenlet for p in list(n.procs.values()) if p.greenlet is not None]
    n.stop()
    gevent.joinall(greenlets, timeout=5)


@pytest.fixture
def config() -> Config:
    return Config(silent_close_delay_ms=20, closing_timeout_ms=2000)


@pytest.fixture
def broker(node: Node, config: Config) -> Iterator[Broker]:
    b = make_broker(node, config)
    yield b
    b.listener.stop()


def params(broker: Broker, **kwargs: Any) -> pika.ConnectionParameters:
    """Connection parameters for `broker`: loopback, one attempt, pika's defaults else."""
    kwargs.setdefault("connection_attempts", 1)
    return pika.ConnectionParameters("127.0.0.1", broker.port, **kwargs)


@pytest.fixture
def conn(broker: Broker) -> Iterator[pika.BlockingConnection]:
    """One pika connection to `broker` as guest, closed after the test if still open."""
    c = client(lambda: pika.BlockingConnection(params(broker)))
    yield c
    if c.is_open:
        client(c.close)


def client(fn: Callable[[], T]) -> T:
    """Run blocking client code in a real thread while the hub serves the broker."""
    return gevent.get_hub().threadpool.apply(fn)


def in_hub(fn: Callable[[], T]) -> T:
    """From a client thread: run `fn` on the hub and wait for its result."""
    done = threading.Event()
    box: list[tuple[bool, Any]] = []

    def callback() -> None:
        try:
            box.append((True, fn()))
        except BaseException as exc:  # handed to the client thread
            box.append((False, exc))
        finally:
            done.set()

    _HUB_LOOP[0].run_callback_threadsafe(callback)
    assert done.wait(10), "hub did not run the callback"
    ok, value = box[0]
    if not ok:
        raise value
    return value


_HUB_LOOP: list[Any] = []


@pytest.fixture(autouse=True)
def _hub_loop() -> Iterator[None]:
    _HUB_LOOP[:] = [gevent.get_hub().loop]
    yield
    _HUB_LOOP.clear()


def refused(conn: Any, op: Callable[[Any], Any]) -> tuple[int, str]:
    """Run `op` on a new channel of a pika connection, expecting the broker to close
    that channel: its reply code and text."""
    def work() -> tuple[int, str]:
        ch = conn.channel()
        with pytest.raises(pex.ChannelClosedByBroker) as info:
            op(ch)
        return info.value.reply_code, info.value.reply_text
    return client(work)


def ok(conn: Any, op: Callable[[Any], Any]) -> Any:
    """Run `op` on a new channel of a pika connection that must stay open; its result."""
    def work() -> Any:
        ch = conn.channel()
        result = op(ch)
        ch.close()
        return result
    return client(work)
