"""`warren ctl` for queues of both types, bindings and vhosts, as rabbitmqctl answers.

rabbitmqctl's `list_queues` takes info keys as columns and prints booleans as
`true` / `false` (a quorum queue's `exclusive` is blank); `delete_queue` and
`purge_queue` answer a missing queue with its own texts and statuses;
`list_bindings` lists every queue's default-exchange binding first;
`add_vhost --default-queue-type` refuses a type it does not know.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pika
import pika.exceptions
import pytest

from tests.broker.broker_support import BrokerProc, connect, ctl, ctl_json, running_cluster

CLASSIC = {"x-queue-type": "classic"}
QQ = {"x-queue-type": "quorum"}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProc]:
    with running_cluster(tmp_path_factory.mktemp("ctl_queues"), count=1) as nodes:
        yield nodes[0]


@pytest.fixture
def conn(node: BrokerProc) -> Iterator[Any]:
    c = connect(node)
    yield c
    if c.is_open:
        c.close()


def ok(node: BrokerProc, *args: str) -> str:
    out = ctl(node.name, *args)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_list_queues_shows_rabbitmqctls_columns_for_classic_and_quorum_queues(
        node: BrokerProc, conn: Any) -> None:
    ch = conn.channel()
    ch.queue_declare("lq-cq", durable=True, arguments=CLASSIC)
    ch.queue_declare("lq-qq", durable=True, arguments=QQ)
    ch.queue_declare("lq-ex", exclusive=True)
    ch.queue_declare("lq-ad", durable=True, auto_delete=True, arguments=CLASSIC)
    ch.confirm_delivery()
    for _ in range(3):
        ch.basic_publish("", "lq-cq", b"x")
    ch.basic_publish("", "lq-qq", b"x")
    ch.basic_get("lq-cq")  # one unacknowledged
    ch.basic_get("lq-qq")
    out = ok(node, "list_queues", "name", "type", "durable", "auto_delete", "exclusive",
             "messages_ready", "messages_unacknowledged")
    assert out.splitlines()[0] == ("name\ttype\tdurable\tauto_delete\texclusive\t"
                                   "messages_ready\tmessages_unacknowledged")
    assert sorted(out.splitlines()[1:]) == [
        "lq-ad\tclassic\ttrue\ttrue\tfalse\t0\t0",
        "lq-cq\tclassic\ttrue\tfalse\tfalse\t2\t1",
        "lq-ex\tclassic\tfalse\tfalse\ttrue\t0\t0",
        "lq-qq\tquorum\ttrue\tfalse\t\t0\t1",
    ]
    rows = ctl_json(node.name, "list_queues", "name", "exclusive", "messages_ready")
    assert {"name": "lq-qq", "exclusive": "", "messages_ready": 0} in rows
    unknown = ctl(node.name, "list_queues", "name", "colour")
    assert (unknown.returncode, unknown.stderr) == (
        64, "Error:\nInfo key(s) colour are not supported\n")
    for q in ("lq-cq", "lq-qq", "lq-ad"):
        ch.queue_delete(q)


def test_purge_and_delete_queue_for_both_types(node: BrokerProc, conn: Any) -> None:
    ch = conn.channel()
    ch.queue_declare("pd-cq", durable=True, arguments=CLASSIC)
    ch.queue_declare("pd-qq", durable=True, arguments=QQ)
    ch.confirm_delivery()
    for q in ("pd-cq", "pd-qq"):
        for _ in range(2):
            ch.basic_publish("", q, b"x")
    assert ok(node, "purge_queue", "pd-cq") == ""
    assert ch.queue_declare("pd-cq", passive=True).method.message_count == 0
    assert ok(node, "delete_queue", "pd-qq") == (
        "Queue was successfully deleted with 2 ready messages\n")
    assert ok(node, "delete_queue", "pd-cq", "--if-empty") == (
        "Queue was successfully deleted with 0 ready messages\n")
    names = [r["name"] for r in ctl_json(node.name, "list_queues")]
    assert "pd-cq" not in names and "pd-qq" not in names

    missing = ctl(node.name, "delete_queue", "pd-nosuch")
    assert (missing.returncode, missing.stderr) == (64, "Error:\nQueue not found\n")
    missing = ctl(node.name, "purge_queue", "pd-nosuch")
    assert (missing.returncode, missing.stderr) == (69, "Error:\nnot_found\n")


def test_an_operator_may_delete_another_connections_exclusive_queue(
        node: BrokerProc, conn: Any) -> None:
    conn.channel().queue_declare("op-ex", exclusive=True)
    assert ok(node, "delete_queue", "op-ex").startswith("Queue was successfully deleted")
    assert "op-ex" not in [r["name"] for r in ctl_json(node.name, "list_queues")]


def test_list_bindings_shows_default_exchange_bindings_then_declared_ones(
        node: BrokerProc, conn: Any) -> None:
    ch = conn.channel()
    ch.queue_declare("lb-cq", durable=True, arguments=CLASSIC)
    ch.queue_bind("lb-cq", "amq.direct", "k1")
    rows = ctl_json(node.name, "list_bindings")
    assert {"source_name": "", "source_kind": "exchange", "destination_name": "lb-cq",
            "destination_kind": "queue", "routing_key": "lb-cq", "arguments": []} in rows
    assert rows[-1] == {"source_name": "amq.direct", "source_kind": "exchange",
                        "destination_name": "lb-cq", "destination_kind": "queue",
                        "routing_key": "k1", "arguments": []}
    assert ok(node, "list_bindings", "source_name", "routing_key").splitlines()[0] == (
        "source_name\trouting_key")
    ch.queue_delete("lb-cq")


def test_add_vhost_records_a_default_queue_type_that_list_vhosts_shows(
        node: BrokerProc) -> None:
    assert ok(node, "add_vhost", "lv-q", "--default-queue-type", "quorum") == ""
    assert ok(node, "add_vhost", "lv-q") == ""  # already there: left as it is
    rows = ctl_json(node.name, "list_vhosts", "name", "default_queue_type")
    assert {"name": "/", "default_queue_type": "undefined"} in rows
    assert {"name": "lv-q", "default_queue_type": "quorum"} in rows
    assert ok(node, "list_vhosts").splitlines()[0] == "name"
    bad = ctl(node.name, "add_vhost", "lv-bad", "--default-queue-type", "bogus")
    assert (bad.returncode, bad.stderr) == (69, "Error:\ninvalid_queue_type\n")
    assert "lv-bad" not in [r["name"] for r in ctl_json(node.name, "list_vhosts")]


def test_delete_vhost_takes_its_queues_exchanges_and_permissions(node: BrokerProc) -> None:
    for args in (("add_vhost", "dv"), ("--vhost", "dv", "set_permissions", "guest", ".*",
                                       ".*", ".*")):
        ok(node, *args)
    params = pika.ConnectionParameters("127.0.0.1", node.amqp_port, virtual_host="dv",
                                       connection_attempts=1)
    with pika.BlockingConnection(params) as c:
        ch = c.channel()
        ch.exchange_declare("dv-x", "fanout")
        ch.queue_declare("dv-cq", durable=True, arguments=CLASSIC)
        ch.queue_declare("dv-qq", durable=True, arguments=QQ)
        ch.queue_bind("dv-cq", "dv-x")
    assert ok(node, "delete_vhost", "dv") == ""
    assert "dv" not in [r["name"] for r in ctl_json(node.name, "list_vhosts")]
    assert ctl_json(node.name, "--vhost", "dv", "list_queues") == []
    with pytest.raises(pika.exceptions.ProbableAccessDeniedError):
        pika.BlockingConnection(params)
    again = ctl(node.name, "delete_vhost", "dv")
    assert (again.returncode, again.stderr) == (65, "Error:\nVirtual host 'dv' does not exist\n")
    # the name is free again, with nothing left from before
    ok(node, "add_vhost", "dv")
    assert ctl_json(node.name, "--vhost", "dv", "list_queues") == []
