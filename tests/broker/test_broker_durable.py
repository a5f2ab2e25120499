"""A broker node with a data dir keeps its Ra state on disk: confirmed messages survive a
SIGKILL of every node of the cluster, and the restarted nodes serve the same queue."""

from __future__ import annotations

import signal
from pathlib import Path

import pika

from tests.broker.broker_support import (
    BrokerProc,
    ctl_json,
    eventually,
    plan,
    start_cluster,
    stop_all,
)


def _connect(b: BrokerProc) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", b.amqp_port))


def _kill_all(nodes: list[BrokerProc]) -> None:
    for b in nodes:
        assert b.proc is not None
        b.proc.send_signal(signal.SIGKILL)
        b.proc.wait(10)


def test_confirmed_messages_survive_a_whole_cluster_sigkill(tmp_path: Path) -> None:
    nodes = plan(3, tmp_path)
    try:
        start_cluster(nodes, backend="quorum")
        conn = _connect(nodes[0])
        ch = conn.channel()
        ch.queue_declare("durable-q", durable=True, arguments={"x-queue-type": "quorum"})
        ch.confirm_delivery()
        for i in range(20):
            ch.basic_publish("", "durable-q", f"m{i}".encode())  # returns once confirmed
        conn.close()

        _kill_all(nodes)
        start_cluster(nodes, backend="quorum")  # same names, ports and data dirs

        def queue_row() -> dict | None:
            rows = [q for q in ctl_json(nodes[1].name, "list_queues")
                    if q["name"] == "durable-q"]
            return rows[0] if rows and rows[0]["leader"] else None

        row = eventually(queue_row, timeout=30)
        assert row is not None and sorted(row["members"]) == sorted(b.name for b in nodes)
        conn = _connect(nodes[2])
        ch = conn.channel()
        bodies = []
        for _ in range(20):
            method, _props, body = ch.basic_get("durable-q", auto_ack=True)
            assert method is not None, f"only {len(bodies)} of 20 confirmed messages came back"
            bodies.append(body)
        assert bodies == [f"m{i}".encode() for i in range(20)]
        assert ch.basic_get("durable-q", auto_ack=True)[0] is None
        conn.close()
    finally:
        stop_all(nodes)
