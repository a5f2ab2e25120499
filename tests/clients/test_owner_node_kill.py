"""An exclusive queue is gone once its owner's node is killed, for every client library.

A client connected to the third node declares an exclusive server-named queue
(the queue lives there, beside its owner's connection); a client of the same
library on the first node is refused it with 405 RESOURCE_LOCKED. Then the
third node is killed with SIGKILL: nobody closes the owner's connection, the
first node sees the node go down, and the queue is deleted there, so the
other client's passive declare answers 404 NOT_FOUND. Each library gets a
fresh three-node cluster (its metadata store keeps a majority without the killed
node), because its test kills one of them.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import aio_pika
import aiormq
import amqp.exceptions
import pika
import pika.exceptions as pex
import pytest
from kombu import Connection, Queue

from tests.broker.amqp_support import AsyncClient
from tests.broker.broker_support import BrokerProc, eventually, running_cluster
from tests.clients.conftest import url

#: how long one call may take: while the killed node is not yet known to be down, a
#: call to its queue is retried, as RabbitMQ 4.x retries it, before the answer comes
CALL_S = 60


class Client(Protocol):
    def declare_exclusive(self) -> str: ...
    def passive_code(self, queue: str) -> int | None: ...
    def close(self) -> None: ...


class PikaBlocking:
    def __init__(self, node: BrokerProc) -> None:
        self.conn = pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", node.amqp_port, connection_attempts=1))

    def declare_exclusive(self) -> str:
        return str(self.conn.channel().queue_declare("", exclusive=True).method.queue)

    def passive_code(self, queue: str) -> int | None:
        try:
            self.conn.channel().queue_declare(queue, passive=True)
        except pex.ChannelClosedByBroker as exc:
            return int(exc.reply_code)
        return None

    def close(self) -> None:
        try:
            self.conn.close()
        except pex.AMQPError:
            pass


class PikaSelect:
    def __init__(self, node: BrokerProc) -> None:
        self.client = AsyncClient(pika.ConnectionParameters("127.0.0.1", node.amqp_port,
                                                            connection_attempts=1))

    def _declare(self, queue: str, **kwargs: Any) -> tuple[Any, Any]:
        """(declare-ok method or None, close reason or None) on a new channel."""
        channel = self.client.channel()
        ok: list[Any] = []
        channel.ch.queue_declare(queue, callback=lambda frame: ok.append(frame.method),
                                 **kwargs)
        self.client.run_until(lambda: ok or channel.closed is not None, "queue.declare",
                              timeout=CALL_S)
        return (ok[0] if ok else None), channel.closed

    def declare_exclusive(self) -> str:
        ok, _closed = self._declare("", exclusive=True)
        return str(ok.queue)

    def passive_code(self, queue: str) -> int | None:
        _ok, closed = self._declare(queue, passive=True)
        return None if closed is None else int(closed.reply_code)

    def close(self) -> None:
        try:
            self.client.close()
        except (AssertionError, pex.AMQPError):
            pass


class AioPika:
    def __init__(self, node: BrokerProc) -> None:
        self.loop = asyncio.new_event_loop()
        self.conn = self.run(aio_pika.connect(url(node)))

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(coro, CALL_S))

    def declare_exclusive(self) -> str:
        async def declare() -> str:
            return (await (await self.conn.channel()).declare_queue(exclusive=True)).name
        return str(self.run(declare()))

    def passive_code(self, queue: str) -> int | None:
        async def passive() -> int | None:
            try:
                await (await self.conn.channel()).declare_queue(queue, passive=True)
            except aiormq.exceptions.ChannelLockedResource:
                return 405
            except aio_pika.exceptions.ChannelNotFoundEntity:
                return 404
            return None
        return self.run(passive())  # type: ignore[no-any-return]

    def close(self) -> None:
        try:
            self.run(self.conn.close())
        except Exception:  # the owner's connection died with its node
            pass
        self.loop.close()


class Kombu:
    def __init__(self, node: BrokerProc) -> None:
        self.conn = Connection(url(node), connect_timeout=5)
        self.conn.connect()

    def declare_exclusive(self) -> str:
        queue = Queue("", exclusive=True)(self.conn.default_channel)
        queue.declare()
        return str(queue.name)

    def passive_code(self, queue: str) -> int | None:
        try:
            with self.conn.channel() as ch:
                ch.queue_declare(queue, passive=True)
        except amqp.exceptions.AMQPError as exc:
            return int(exc.code)
        return None

    def close(self) -> None:
        try:
            self.conn.release()
        except Exception:  # the owner's connection died with its node
            pass


CLIENTS: dict[str, Callable[[BrokerProc], Client]] = {
    "pika-blocking": PikaBlocking, "pika-select": PikaSelect, "aio-pika": AioPika,
    "kombu": Kombu}


@pytest.fixture
def three_nodes(tmp_path: Path) -> Iterator[list[BrokerProc]]:
    """Three nodes, so the metadata store keeps its majority when one is killed."""
    with running_cluster(tmp_path, count=3) as started:
        yield started


@pytest.mark.parametrize("library", sorted(CLIENTS))
def test_an_exclusive_queue_is_deleted_when_its_owners_node_is_killed(
        library: str, three_nodes: list[BrokerProc]) -> None:
    survivor, _other, doomed = three_nodes
    opened: list[Client] = []
    try:
        owner = CLIENTS[library](doomed)
        opened.append(owner)
        watcher = CLIENTS[library](survivor)
        opened.append(watcher)
        queue = owner.declare_exclusive()
        assert queue.startswith("amq.gen-")
        assert eventually(lambda: watcher.passive_code(queue) == 405)

        assert doomed.proc is not None
        doomed.proc.send_signal(signal.SIGKILL)
        doomed.proc.wait(10)
        assert eventually(lambda: watcher.passive_code(queue) == 404, timeout=CALL_S)
    finally:
        for client in opened:
            client.close()
