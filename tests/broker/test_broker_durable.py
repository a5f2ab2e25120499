"""A broker node with a data dir keeps its Ra state on disk: confirmed messages survive a
SIGKILL of every node of the cluster, and the restarted nodes serve the same queue, with
WAL files that grow with their records and with pre-allocated ones (``wal_pre_allocate``)."""

from __future__ import annotations

import signal
from pathlib import Path

import pika
import pytest

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


@pytest.mark.parametrize("pre_allocate", [False, True], ids=["growing-wal", "pre-allocated-wal"])
def test_confirmed_messages_survive_a_whole_cluster_sigkill(tmp_path: Path,
                                                           pre_allocate: bool) -> None:
    nodes = plan(3, tmp_path)
    config = tmp_path / "ra.toml"
    # the nodes' names, ports and data dirs come from their flags; the file adds Ra keys
    # (files of at most 64 MB: a pre-allocated one takes that much disk at once)
    config.write_text(f"[ra]\nwal_pre_allocate = {str(pre_allocate).lower()}\n"
                      "wal_max_size_bytes = 67108864\n")
    extra = ["--config", str(config)]
    try:
        start_cluster(nodes, backend="quorum", extra=extra)
        conn = _connect(nodes[0])
        ch = conn.channel()
        ch.queue_declare("durable-q", durable=True, arguments={"x-queue-type": "quorum"})
        ch.confirm_delivery()
        for i in range(20):
            ch.basic_publish("", "durable-q", f"m{i}".encode())  # returns once confirmed
        conn.close()

        _kill_all(nodes)
        if pre_allocate:  # each WAL file is as long as its limit, records and zeros
            for b in nodes:
                (wal,) = (b.data_dir / "ra" / "wal").glob("*.wal")
                assert wal.stat().st_size > 1 << 25  # the limit is random in (32, 64] MB
        start_cluster(nodes, backend="quorum", extra=extra)  # same names, ports, data dirs

        def queue_row(b: BrokerProc) -> dict | None:
            rows = [q for q in ctl_json(b.name, "list_queues") if q["name"] == "durable-q"]
            return rows[0] if rows and rows[0]["leader"] else None

        def every_node_knows_it() -> list[dict] | None:
            # each node's metadata replica must have caught up, not only the one asked:
            # the messages are read through nodes[2]
            rows = [queue_row(b) for b in nodes]
            return rows if all(r is not None for r in rows) else None

        rows = eventually(every_node_knows_it, timeout=30)
        row = rows[1] if rows else None
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
