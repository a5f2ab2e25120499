"""Queue expiry (`x-expires`) on three real nodes: the queue, its members and bindings go.

An idle quorum queue is deleted by the node that runs its leader once it has been
unused for longer than `x-expires`; a consumer keeps it in use, and the time
counts again from the consumer's cancel.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable

import pika
import pika.exceptions as pex

from ra.disk_store import NAMES_FILE
from tests.broker.amqp_support import Amqp
from tests.broker.broker_support import BrokerProc
from tests.waiting import wait_until

EXPIRES = {"x-expires": 500}


def wait_for(pred: Callable[[], object], what: str) -> None:
    wait_until(pred, what, timeout_s=30, poll_s=0.2)


def absent(conn: pika.BlockingConnection, queue: str) -> bool:
    """Does a passive declare answer 404 NOT_FOUND?"""
    ch = conn.channel()
    try:
        ch.queue_declare(queue, passive=True)
    except pex.ChannelClosedByBroker as exc:
        assert (exc.reply_code, exc.reply_text) == (
            404, f"NOT_FOUND - no queue '{queue}' in vhost '/'")
        return True
    ch.close()
    return False


def nodes_with_member_state(cluster: list[BrokerProc], ra_name: str) -> list[str]:
    """Nodes whose Ra system still lists the member (it would restart it at boot)."""
    found = []
    for b in cluster:
        names = pickle.loads((b.data_dir / "ra" / NAMES_FILE).read_bytes())
        if ra_name in names:
            found.append(b.name)
    return found


def test_an_idle_queue_is_deleted_with_its_members_and_bindings(
        cluster: list[BrokerProc], amqp: Amqp, queue: str) -> None:
    exchange = f"{queue}-events"
    ch = amqp.blocking(1).channel()
    ch.exchange_declare(exchange, "fanout", durable=True)
    try:
        amqp.declare(queue, node=0, **EXPIRES)
        ch.queue_bind(queue, exchange)
        ra_name = f"%2F_{queue}"
        assert nodes_with_member_state(cluster, ra_name) == [b.name for b in cluster]
        probe = amqp.blocking(2)
        wait_for(lambda: absent(probe, queue), f"{queue} expired")
        wait_for(lambda: not nodes_with_member_state(cluster, ra_name),
                 "the members deleted on every node")
        # a new queue of the same name is not bound: the old bindings went with the queue
        amqp.declare(queue, node=1)
        ch.confirm_delivery()
        ch.basic_publish(exchange, "", b"to nobody")
        assert amqp.ready(queue) == 0
    finally:
        ch.exchange_delete(exchange)


def test_a_consumer_keeps_the_queue_alive_and_expiry_counts_from_its_cancel(
        amqp: Amqp, queue: str) -> None:
    idle = f"{queue}-idle"
    amqp.declare(queue, node=0, **EXPIRES)
    amqp.declare(idle, node=0, **EXPIRES)
    client = amqp.select(1)
    ch = client.channel()
    tag = ch.consume(queue)
    probe = amqp.blocking(2)
    # declared together: the idle queue expiring shows its time has passed for both
    wait_for(lambda: absent(probe, idle), f"{idle} expired")
    assert not absent(probe, queue)
    ch.cancel(tag)
    wait_for(lambda: absent(probe, queue), f"{queue} expired once unused")
    assert ch.cancelled == []  # the client cancelled before: nothing more to tell it


def test_the_expires_policy_deletes_an_idle_queue(
        amqp: Amqp, queue: str) -> None:
    amqp.ctl_ok(0, "set_policy", "expiry", f"^{queue}$", '{"expires": 500}',
                "--apply-to", "quorum_queues")
    try:
        amqp.declare(queue, node=2)
        probe = amqp.blocking(0)
        wait_for(lambda: absent(probe, queue), f"{queue} expired by policy")
    finally:
        amqp.ctl_ok(0, "clear_policy", "expiry")
