"""Dead lettering in a running three-node broker: policies, both strategies, pika and ctl.

The nodes run with a short dead-letter confirm timeout (set in their config
file, `dead-letter-worker-publisher-confirm-timeout`), so the at-least-once
worker retries unroutable dead letters within a test.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from fifo.versions import rules_for
from releases import DEFAULT_SERIES, RELEASES
from tests.broker.broker_support import (
    BrokerProc,
    connect,
    ctl,
    ctl_json,
    eventually,
    running_cluster,
)

QQ = {"x-queue-type": "quorum"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[BrokerProc]]:
    base = tmp_path_factory.mktemp("dlx")
    config = base / "node.json"
    config.write_text(json.dumps({"dead-letter-worker-publisher-confirm-timeout": 300}))
    with running_cluster(base, extra=["--config", str(config)]) as nodes:
        yield nodes



def get(ch: Any, queue: str) -> tuple[Any, Any, bytes] | None:
    method, props, body = ch.basic_get(queue, auto_ack=True)
    return None if method is None else (method, props, body)


def reject_one(ch: Any, queue: str) -> None:
    method = eventually(lambda: ch.basic_get(queue)[0])
    assert method is not None
    ch.basic_reject(method.delivery_tag, requeue=False)


def queue_row(node: str, name: str) -> dict[str, Any]:
    (row,) = [q for q in ctl_json(node, "list_queues") if q["name"] == name]
    return row  # type: ignore[no-any-return]


def test_a_policy_dead_letters_rejected_messages_across_nodes(
        cluster: list[BrokerProc]) -> None:
    n1, n2, n3 = cluster
    out = ctl(n1.name, "set_policy", "dl", "^pol-src$",
              '{"dead-letter-exchange": "pol-dlx", "dead-letter-routing-key": "k"}',
              "--apply-to", "quorum_queues")
    assert out.returncode == 0, out.stderr
    c2, c3 = connect(n2), connect(n3)
    try:
        ch3 = c3.channel()
        ch3.exchange_declare("pol-dlx", "direct", durable=True)
        ch3.queue_declare("pol-dlq", durable=True, arguments=QQ)  # led by n3
        ch3.queue_bind("pol-dlq", "pol-dlx", "k")
        ch2 = c2.channel()
        ch2.queue_declare("pol-src", durable=True, arguments=QQ)  # led by n2
        ch2.confirm_delivery()
        ch2.basic_publish("", "pol-src", b"refused")
        reject_one(ch2, "pol-src")
        got = eventually(lambda: get(ch3, "pol-dlq"))
        assert got is not None
        method, props, body = got
        assert (body, method.exchange, method.routing_key) == (b"refused", "pol-dlx", "k")
        [death] = props.headers["x-death"]
        assert (death["queue"], death["reason"], death["count"], death["exchange"],
                death["routing-keys"]) == ("pol-src", "rejected", 1, "", ["pol-src"])
        assert queue_row(n1.name, "pol-src")["policy"] == "dl"
    finally:
        c2.close()
        c3.close()
        ctl(n1.name, "clear_policy", "dl")


def test_at_least_once_keeps_a_dead_letter_until_a_route_exists_and_confirms(
        cluster: list[BrokerProc]) -> None:
    n1, n2, _n3 = cluster
    c1, c2 = connect(n1), connect(n2)
    try:
        ch1 = c1.channel()
        ch1.exchange_declare("alo-dlx", "fanout", durable=True)
        ch1.queue_declare("alo-src", durable=True, arguments={
            **QQ, "x-dead-letter-exchange": "alo-dlx", "x-overflow": "reject-publish",
            "x-dead-letter-strategy": "at-least-once"})  # led by n1: its worker runs there
        ch1.confirm_delivery()
        ch1.basic_publish("", "alo-src", b"keep me")
        reject_one(ch1, "alo-src")
        assert ctl_json(n1.name, "dlx_workers")[0]["workers"] >= 1
        # nowhere to go: the dead letter stays in the source queue, retried by the worker
        assert eventually(lambda: queue_row(n1.name, "alo-src")["messages"] == 1)
        assert get(ch1, "alo-src") is None  # a dead letter is not delivered again

        ch2 = c2.channel()
        ch2.queue_declare("alo-dlq", durable=True, arguments=QQ)  # led by n2
        ch2.queue_bind("alo-dlq", "alo-dlx", "")
        got = eventually(lambda: get(ch2, "alo-dlq"))
        assert got is not None
        _method, props, body = got
        assert body == b"keep me"
        assert [(d["queue"], d["reason"]) for d in props.headers["x-death"]] == [
            ("alo-src", "rejected")]
        # the target confirmed, so the worker settled it in the source
        assert eventually(lambda: queue_row(n1.name, "alo-src")["messages"] == 0)
    finally:
        c1.close()
        c2.close()


def test_a_policy_with_only_a_routing_key_routes_the_queues_own_dead_letter_exchange(
        cluster: list[BrokerProc]) -> None:
    n1, _n2, _n3 = cluster
    out = ctl(n1.name, "set_policy", "rk-only", "^rk-src$",
              '{"dead-letter-routing-key": "via-policy"}', "--apply-to", "quorum_queues")
    assert out.returncode == 0, out.stderr
    c1 = connect(n1)
    try:
        ch = c1.channel()
        ch.exchange_declare("rk-dlx", "direct", durable=True)
        ch.queue_declare("rk-dlq", durable=True, arguments=QQ)
        ch.queue_bind("rk-dlq", "rk-dlx", "via-policy")
        ch.queue_declare("rk-src", durable=True,
                         arguments={**QQ, "x-dead-letter-exchange": "rk-dlx"})
        assert queue_row(n1.name, "rk-src")["policy"] == "rk-only"
        ch.confirm_delivery()
        ch.basic_publish("", "rk-src", b"keyed by the policy")
        reject_one(ch, "rk-src")
        got = eventually(lambda: get(ch, "rk-dlq"))
        assert got is not None
        method, _props, body = got
        assert (body, method.exchange, method.routing_key) == (
            b"keyed by the policy", "rk-dlx", "via-policy")
    finally:
        c1.close()
        ctl(n1.name, "clear_policy", "rk-only")


def test_list_queues_shows_the_at_least_once_dead_letter_backlog(
        cluster: list[BrokerProc]) -> None:
    n1, n2, _n3 = cluster
    c1 = connect(n1)
    try:
        ch = c1.channel()
        ch.exchange_declare("backlog-dlx", "fanout", durable=True)  # bound to nothing
        ch.queue_declare("backlog-src", durable=True, arguments={
            **QQ, "x-dead-letter-exchange": "backlog-dlx", "x-overflow": "reject-publish",
            "x-dead-letter-strategy": "at-least-once"})
        row = queue_row(n2.name, "backlog-src")
        assert (row["messages_dlx"], row["message_bytes_dlx"]) == (0, 0)
        ch.confirm_delivery()
        ch.basic_publish("", "backlog-src", b"unroutable")
        reject_one(ch, "backlog-src")
        row = eventually(lambda: (r := queue_row(n2.name, "backlog-src"))["messages_dlx"] == 1
                         and r)
        assert row, "the rejected message never showed in messages_dlx"
        # a message's size as its release's machine counts it: the body alone up to
        # machine 7, from machine 8 also its metadata (pika sent no properties: the
        # two bytes of property flags)
        size = rules_for(RELEASES[DEFAULT_SERIES].machine_version).message_size(
            (2, len(b"unroutable")))
        assert (row["messages"], row["message_bytes_dlx"]) == (1, size)
    finally:
        c1.close()
