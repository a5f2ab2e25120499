"""Which queue type a declare without `x-queue-type` gets on a real node.

The vhost's `default_queue_type` (set by `add_vhost --default-queue-type`)
wins over the node's `default_queue_type` setting; exclusive, auto-delete and
non-durable declares stay classic whatever the defaults say; a redeclare is
compared with the type the default gives, with RabbitMQ's 406 text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pika
import pytest

from tests.broker.amqp_support import closed_by_broker
from tests.broker.broker_support import BrokerProc, connect, ctl, ctl_json, running_cluster


def start(base: Path, node_default: str | None) -> Any:
    """One node, with `default_queue_type` in its config file when given; that node
    permits transient non-exclusive queues (4.3 denies them by default), so where a
    non-durable declare goes can be seen on every release."""
    extra: list[str] = []
    if node_default is not None:
        base.mkdir(parents=True, exist_ok=True)
        cfg = base / "node.json"
        cfg.write_text(json.dumps({"default_queue_type": node_default, "amqp": {
            "deprecated_features_permit": {"transient_nonexcl_queues": True}}}))
        extra = ["--config", str(cfg)]
    return running_cluster(base / "nodes", count=1, extra=extra)


def queue_types(node: BrokerProc, vhost: str = "/") -> dict[str, str]:
    return {r["name"]: r["type"]
            for r in ctl_json(node.name, "--vhost", vhost, "list_queues", "name", "type")}


def test_a_node_without_a_setting_makes_durable_declares_classic(tmp_path: Path) -> None:
    """RabbitMQ's default: `classic`, so a plain durable declare is a classic queue."""
    with start(tmp_path, None) as (node,), connect(node) as conn:
        conn.channel().queue_declare("plain", durable=True)
        assert queue_types(node) == {"plain": "classic"}


@pytest.fixture(scope="module")
def quorum_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProc]:
    with start(tmp_path_factory.mktemp("dqt"), "quorum") as nodes:
        yield nodes[0]


def test_the_nodes_default_applies_where_the_type_can_hold_the_queue(
        quorum_node: BrokerProc) -> None:
    with connect(quorum_node) as conn:
        ch = conn.channel()
        ch.queue_declare("nd-durable", durable=True)
        ch.queue_declare("nd-transient", durable=False)
        ch.queue_declare("nd-exclusive", durable=True, exclusive=True)
        ch.queue_declare("nd-auto", durable=True, auto_delete=True)
        types = queue_types(quorum_node)
        assert {k: v for k, v in types.items() if k.startswith("nd-")} == {
            "nd-durable": "quorum", "nd-transient": "classic", "nd-exclusive": "classic",
            "nd-auto": "classic"}
        ch.queue_delete("nd-durable")
        ch.queue_delete("nd-transient")


def test_the_vhosts_default_wins_over_the_nodes(quorum_node: BrokerProc) -> None:
    for args in (("add_vhost", "classic-vh", "--default-queue-type", "classic"),
                 ("--vhost", "classic-vh", "set_permissions", "guest", ".*", ".*", ".*")):
        out = ctl(quorum_node.name, *args)
        assert out.returncode == 0, out.stderr
    params = pika.ConnectionParameters("127.0.0.1", quorum_node.amqp_port,
                                       virtual_host="classic-vh", connection_attempts=1)
    with pika.BlockingConnection(params) as conn:
        ch = conn.channel()
        ch.queue_declare("vd-durable", durable=True)
        assert queue_types(quorum_node, "classic-vh") == {"vd-durable": "classic"}
        ch.queue_declare("vd-durable", durable=True)  # the same default: equivalent
        assert closed_by_broker(lambda: ch.queue_declare(
            "vd-durable", durable=True, arguments={"x-queue-type": "quorum"})) == (
            406, "PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue "
                 "'vd-durable' in vhost 'classic-vh': received 'quorum' but current is "
                 "'classic'")


def test_a_redeclare_without_a_type_is_compared_with_the_default(
        quorum_node: BrokerProc) -> None:
    with connect(quorum_node) as conn:
        ch = conn.channel()
        ch.queue_declare("rd-classic", durable=True, arguments={"x-queue-type": "classic"})
        assert closed_by_broker(lambda: ch.queue_declare("rd-classic", durable=True)) == (
            406, "PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue "
                 "'rd-classic' in vhost '/': received 'quorum' but current is 'classic'")
        conn.channel().queue_delete("rd-classic")
