"""aio-pika, as an asyncio application uses it, on classic queues.

Each test is one coroutine run to the end by `asyncio.run` (aio-pika needs no
pytest plugin for that), with `asyncio.timeout` bounding every wait so a
missing message fails the test instead of hanging it. `declare_queue()` without
arguments is the library's default: a durable=False, server-named queue when no
name is given, which a node with the default settings makes classic.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import aio_pika
import aiormq
import pytest
from aio_pika.abc import AbstractIncomingMessage

from tests.broker.broker_support import BrokerProc
from tests.clients.conftest import url

WAIT_S = 15


def run(coro: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(coro(), 60))


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Await `check()` until it holds (bounded)."""
    async with asyncio.timeout(WAIT_S):
        while not await check():
            await asyncio.sleep(0.05)


def test_rpc_over_an_exclusive_server_named_reply_queue(
        nodes: list[BrokerProc], name: str) -> None:
    async def main() -> None:
        async with await aio_pika.connect(url(nodes[0])) as server_conn, \
                await aio_pika.connect(url(nodes[1])) as client_conn:
            server = await server_conn.channel()
            requests = await server.declare_queue(name, auto_delete=True)

            async def on_request(message: AbstractIncomingMessage) -> None:
                async with message.process():
                    assert message.reply_to is not None
                    await server.default_exchange.publish(
                        aio_pika.Message(message.body * 2,
                                         correlation_id=message.correlation_id),
                        routing_key=message.reply_to)
            await requests.consume(on_request)

            client = await client_conn.channel()
            callback_queue = await client.declare_queue(exclusive=True)
            assert callback_queue.name.startswith("amq.gen-")
            futures: dict[str, asyncio.Future[bytes]] = {}

            async def on_response(message: AbstractIncomingMessage) -> None:
                assert message.correlation_id is not None
                futures.pop(message.correlation_id).set_result(message.body)
            await callback_queue.consume(on_response, no_ack=True)

            corr = str(uuid.uuid4())
            futures[corr] = asyncio.get_running_loop().create_future()
            await client.default_exchange.publish(
                aio_pika.Message(b"ab", correlation_id=corr, reply_to=callback_queue.name),
                routing_key=name)
            async with asyncio.timeout(WAIT_S):
                assert await futures[corr] == b"abab"
    run(main)


def test_rpc_with_aio_pikas_rpc_pattern(nodes: list[BrokerProc], name: str) -> None:
    """aio_pika.patterns.RPC: a server-named exclusive results queue per caller."""
    async def main() -> None:
        async with await aio_pika.connect(url(nodes[0])) as server_conn, \
                await aio_pika.connect(url(nodes[1])) as client_conn:
            async def multiply(*, x: int, y: int) -> int:
                return x * y
            server_rpc = await aio_pika.patterns.RPC.create(await server_conn.channel())
            await server_rpc.register(name, multiply, auto_delete=True)
            client_rpc = await aio_pika.patterns.RPC.create(await client_conn.channel())
            async with asyncio.timeout(WAIT_S):
                assert await client_rpc.call(name, kwargs={"x": 6, "y": 7}) == 42
            await client_rpc.close()
            await server_rpc.close()
    run(main)


def test_fanout_to_auto_delete_server_named_queues(nodes: list[BrokerProc], name: str) -> None:
    async def main() -> None:
        conns = [await aio_pika.connect(url(n)) for n in nodes]
        try:
            exchanges = []
            queues = []
            got: list[asyncio.Queue[bytes]] = []
            for conn in conns:
                ch = await conn.channel()
                exchange = await ch.declare_exchange(name, aio_pika.ExchangeType.FANOUT,
                                                     auto_delete=True)
                exchanges.append(exchange)
                queue = await ch.declare_queue(auto_delete=True)
                await queue.bind(exchange)
                box: asyncio.Queue[bytes] = asyncio.Queue()

                async def deliver(message: AbstractIncomingMessage,
                                  box: asyncio.Queue[bytes] = box) -> None:
                    await box.put(message.body)
                tag = await queue.consume(deliver, no_ack=True)
                queues.append((queue, tag))
                got.append(box)
            await exchanges[0].publish(aio_pika.Message(b"news"), routing_key="")
            async with asyncio.timeout(WAIT_S):
                assert [await box.get() for box in got] == [b"news", b"news"]
            for queue, tag in queues:
                await queue.cancel(tag)
            # both queues went with their last consumer
            probe = await conns[0].channel()
            for queue, _tag in queues:
                with pytest.raises(aio_pika.exceptions.ChannelNotFoundEntity):
                    await probe.declare_queue(queue.name, passive=True)
                probe = await conns[0].channel()
        finally:
            for conn in conns:
                await conn.close()
    run(main)


def test_a_priority_queue_serves_the_highest_priority_first(
        nodes: list[BrokerProc], name: str) -> None:
    async def main() -> None:
        async with await aio_pika.connect(url(nodes[1])) as conn:
            ch = await conn.channel()
            queue = await ch.declare_queue(name, arguments={"x-max-priority": 3})
            for priority in (0, 3, 1, 2):
                await ch.default_exchange.publish(
                    aio_pika.Message(f"p{priority}".encode(), priority=priority), name)
            bodies = []
            async with queue.iterator(no_ack=True) as messages:
                async for message in messages:
                    bodies.append(message.body)
                    if len(bodies) == 4:
                        break
            assert bodies == [b"p3", b"p2", b"p1", b"p0"]
            await queue.delete()
    run(main)


def test_expired_messages_are_dead_lettered(nodes: list[BrokerProc], name: str) -> None:
    async def main() -> None:
        async with await aio_pika.connect(url(nodes[0])) as conn:
            ch = await conn.channel()
            dlx = await ch.declare_exchange(f"{name}.dlx", aio_pika.ExchangeType.FANOUT)
            dead = await ch.declare_queue(f"{name}.dead")
            await dead.bind(dlx)
            work = await ch.declare_queue(name, arguments={
                "x-dead-letter-exchange": dlx.name})
            await ch.default_exchange.publish(
                aio_pika.Message(b"late", expiration=0.05), name)

            got: list[AbstractIncomingMessage] = []

            async def collect() -> bool:
                message = await dead.get(no_ack=True, fail=False)
                if message is not None:
                    got.append(message)
                return bool(got)
            await until(collect, "dead letter")
            assert got[0].body == b"late"
            death = got[0].headers["x-death"][0]  # type: ignore[index]
            assert (death["reason"], death["queue"]) == ("expired", name)  # type: ignore[index]
            for queue in (work, dead):
                await queue.delete()
            await dlx.delete()
    run(main)


def test_get_ack_reject_and_requeue(nodes: list[BrokerProc], name: str) -> None:
    async def main() -> None:
        async with await aio_pika.connect(url(nodes[0])) as conn:
            ch = await conn.channel()
            queue = await ch.declare_queue(name)
            for body in (b"x", b"y"):
                await ch.default_exchange.publish(aio_pika.Message(body), name)
            first = await queue.get()
            assert (first.body, first.redelivered) == (b"x", False)
            await first.reject(requeue=True)
            again = await queue.get()
            assert (again.body, again.redelivered) == (b"x", True)
            await again.ack()
            second = await queue.get()
            assert second.body == b"y"
            await second.nack(requeue=False)
            assert await queue.get(fail=False) is None
            await queue.delete()
    run(main)


def test_an_exclusive_queue_is_locked_to_its_connection_and_goes_with_it(
        nodes: list[BrokerProc]) -> None:
    async def main() -> None:
        async with await aio_pika.connect(url(nodes[0])) as other:
            owner = await aio_pika.connect(url(nodes[0]))
            queue = await (await owner.channel()).declare_queue(exclusive=True)
            with pytest.raises(aiormq.exceptions.ChannelLockedResource):
                await (await other.channel()).declare_queue(queue.name, passive=True)
            await owner.close()
            with pytest.raises(aio_pika.exceptions.ChannelNotFoundEntity):
                await (await other.channel()).declare_queue(queue.name, passive=True)
    run(main)


def test_a_consume_the_queue_refuses_fails_at_the_consume(
        nodes: list[BrokerProc], name: str) -> None:
    """The queue refuses a second consumer beside an exclusive one with 403, and the
    client learns it from its consume: no consume-ok comes before the channel's
    close, as RabbitMQ's queue process sends consume-ok only once it took the
    consumer."""
    async def main() -> None:
        async with await aio_pika.connect(url(nodes[0])) as conn:
            first = await conn.channel()
            queue = await first.declare_queue(name, exclusive=True)
            await queue.consume(print_message, exclusive=True)
            second = await conn.channel()
            again = await second.declare_queue(name, exclusive=True)
            with pytest.raises(aiormq.exceptions.ChannelAccessRefused) as info:
                await again.consume(print_message, exclusive=True)
            assert f"ACCESS_REFUSED - queue '{name}' in vhost '/' in exclusive use" in str(
                info.value.args)
    run(main)


async def print_message(message: AbstractIncomingMessage) -> None:
    print(message.body)
