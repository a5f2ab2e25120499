"""A node started as README tells a new user — no `--backend` — serves real queues.

The default backend is `rabbit`: quorum queues and classic queues with what client
code relies on (here a per-queue TTL that dead-letters), not the in-memory test
stand-in. Its former name `quorum` names the same backend.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.broker.broker_support import (
    BrokerProc,
    connect,
    ctl_json,
    eventually,
    launch,
    plan,
    stop_all,
    wait_ready,
)


@pytest.fixture(scope="module")
def plain_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProc]:
    """One node started with README's flags and no `--backend`."""
    (b,) = plan(1, tmp_path_factory.mktemp("default_backend"))
    try:
        launch(b, ["--name", b.name, "--amqp-port", str(b.amqp_port),
                   "--data-dir", str(b.data_dir)])
        wait_ready(b)
        yield b
    finally:
        stop_all([b])


def got_from(ch: Any, queue: str) -> Any:
    """A `basic.get` of `queue` that found a message, or None."""
    method, props, body = ch.basic_get(queue, auto_ack=True)
    return (method, props, body) if method is not None else None


def test_a_quorum_queue_declared_on_a_default_node_is_a_raft_cluster(
        plain_node: BrokerProc) -> None:
    conn = connect(plain_node)
    try:
        ch = conn.channel()
        q = f"orders-{uuid.uuid4().hex[:6]}"
        ch.queue_declare(q, durable=True, arguments={"x-queue-type": "quorum"})
        ch.confirm_delivery()
        ch.basic_publish("", q, b"order-1")
        _method, _props, body = eventually(lambda: got_from(ch, q))
        assert body == b"order-1"
    finally:
        conn.close()
    (member,) = ctl_json(plain_node.name, "quorum_status", q)
    assert (member["node"], member["raft_state"]) == (plain_node.name, "leader")


def test_a_classic_queue_with_a_message_ttl_dead_letters_on_a_default_node(
        plain_node: BrokerProc) -> None:
    conn = connect(plain_node)
    try:
        ch = conn.channel()
        work, dead = (f"{n}-{uuid.uuid4().hex[:6]}" for n in ("work", "dead"))
        # durable: the default release denies transient non-exclusive queues
        ch.queue_declare(dead, durable=True, arguments={"x-queue-type": "classic"})
        ch.queue_declare(work, durable=True,
                         arguments={"x-queue-type": "classic", "x-message-ttl": 50,
                                    "x-dead-letter-exchange": "",
                                    "x-dead-letter-routing-key": dead})
        ch.confirm_delivery()
        ch.basic_publish("", work, b"late")
        _method, props, body = eventually(lambda: got_from(ch, dead))
        assert body == b"late"
        (death,) = props.headers["x-death"]
        assert (death["queue"], death["reason"], death["count"]) == (work, "expired", 1)
    finally:
        conn.close()
