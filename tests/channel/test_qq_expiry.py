"""Queue expiry (`x-expires`): pika against three in-process nodes with short Ra ticks.

Every node has the queue deleter installed, as a broker node has, so the
machine's request to delete an expired queue (made by its leader on a tick)
is carried out: the record and its bindings go, the Ra members go on every
node, and whoever still follows the queue hears that it ended.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pika
import pytest

import actors
from channel.queue_types.quorum import qq_delete
from channel.queue_types.quorum.qq_delete import QueueDeleter
from fifo import ra_hooks
from ra.system import registered_servers_local
from tests.channel.conftest import client
from tests.channel.test_qq_amqp import QQ, QqCluster, closed_with, conn, qq, release  # noqa: F401
from tests.waiting import hub_wait_until

EXPIRES = {"x-expires": 500}


@pytest.fixture
def expiring(qq: QqCluster) -> Iterator[QqCluster]:  # noqa: F811 - the imported fixture
    deleter = QueueDeleter(qq.registry, on_deleted=qq.backend.on_deleted)
    try:
        for node in qq.nodes:
            qq_delete.install(node.name, deleter)
        yield qq
    finally:
        for node in qq.nodes:
            qq_delete.uninstall(node.name)


def gone(cluster: QqCluster, name: str) -> bool:
    return cluster.registry.lookup("/", name) is None


def members_left(cluster: QqCluster, ra_name: str) -> list[str]:
    """Nodes on which the Ra member still runs or still has state to restart from."""
    left = []
    for node in cluster.nodes:
        with node.attached():
            if actors.whereis(ra_name) is not None or ra_name in registered_servers_local(
                    "default"):
                left.append(node.name)
    return left


def test_an_idle_queue_is_deleted_with_its_members_and_bindings(
        expiring: QqCluster, conn: pika.BlockingConnection) -> None:  # noqa: F811
    def declare() -> None:
        ch = conn.channel()
        ch.exchange_declare("events", "fanout", durable=True)
        ch.queue_declare("idle", durable=True, arguments={**QQ, **EXPIRES})
        ch.queue_bind("idle", "events")
    client(declare)
    ra_name = expiring.record("idle").ra_name
    assert members_left(expiring, ra_name) == expiring.names
    hub_wait_until(lambda: gone(expiring, "idle"), "the idle queue expired")

    def passive() -> str:
        ch = conn.channel()
        return closed_with(lambda: ch.queue_declare("idle", passive=True))
    assert client(passive) == "404 NOT_FOUND - no queue 'idle' in vhost '/'"
    hub_wait_until(lambda: not members_left(expiring, ra_name), "members deleted everywhere")
    assert expiring.ctx.topology.bindings("/", "events") == []


def test_a_consumer_keeps_the_queue_alive_and_expiry_counts_from_its_cancel(
        expiring: QqCluster, conn: pika.BlockingConnection) -> None:  # noqa: F811
    def consume() -> tuple[Any, str]:
        ch = conn.channel()
        ch.queue_declare("used", durable=True, arguments={**QQ, **EXPIRES})
        ch.queue_declare("unused", durable=True, arguments={**QQ, **EXPIRES})
        return ch, ch.basic_consume("used", lambda *a: None)
    ch, tag = client(consume)
    # both were declared together: the unused one expiring shows the time has passed
    hub_wait_until(lambda: gone(expiring, "unused"), "the unused queue expired")
    assert not gone(expiring, "used")
    client(lambda: ch.basic_cancel(tag))
    hub_wait_until(lambda: gone(expiring, "used"), "the queue expired once unused")


def test_the_deleter_cancels_the_consumers_a_deleted_queue_still_has(
        expiring: QqCluster, conn: pika.BlockingConnection) -> None:  # noqa: F811
    # the machine asks only with no live consumer; one it holds for a node it lost
    # contact with hears the end as any other follower of the queue does
    cancelled: list[Any] = []

    def consume() -> str:
        ch = conn.channel()
        ch.queue_declare("held", durable=True, arguments=QQ)
        ch.add_on_cancel_callback(cancelled.append)
        return ch.basic_consume("held", lambda *a: None)
    tag = client(consume)
    leader = expiring.ra_leader("held")
    with expiring.nodes[expiring.names.index(leader[1])].attached():
        ra_hooks.rabbit_quorum_queue.spawn_deleter(("resource", "/", "queue", "held"))
    hub_wait_until(lambda: client(lambda: conn.process_data_events(0.01) or bool(cancelled)),
                   "server-side basic.cancel")
    assert [c.method.consumer_tag for c in cancelled] == [tag]
    assert gone(expiring, "held")
