"""A rolling restart from RabbitMQ 4.2 onto 4.3 upgrades a quorum queue under load.

Three nodes start as 4.2 (``rabbit_fifo`` machine 7) with a quorum queue that a
publisher (confirms) and a consumer (manual acks) use throughout. The nodes are
restarted one at a time as 4.3: a restarted node's members run 4.3's code, which
supports machine 8, but while any member still runs 4.2's code the queue stays
on machine 7. Once the last node is back the leader appends one
``{machine_version, 7, 8}`` entry and every replica converts at that index, once.
A queue declared on a 4.3 node halfway through starts at machine 7, the version
every member's code runs, and moves to 8 with the others. Every confirmed
message is delivered. A node then started again as 4.2 has code
older than the queue's machine: its member stops applying (or does not start), as
Ra does, and the queue keeps serving from the other two.
"""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pika
import pika.exceptions

from tests.broker.broker_support import (
    BrokerProc,
    connect,
    ctl_json,
    eventually,
    launch,
    running_cluster,
    wait_ready,
)
from transports.zmq_node import stop_node_process

QUEUE = "orders"
#: a queue declared halfway through the restarts
LATE = "late"
ARGS = {"x-queue-type": "quorum"}
CLIENT_ERRORS = (pika.exceptions.AMQPError, OSError)


class Clients:
    """A confirming publisher and an acking consumer that move to another node when
    theirs goes down; what was confirmed and what was delivered is kept."""

    def __init__(self, nodes: list[BrokerProc]) -> None:
        self.nodes = nodes
        self.down: set[str] = set()
        self.confirmed: list[bytes] = []
        self.delivered: set[bytes] = set()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(self._publish, 0)),
                        threading.Thread(target=self._run, args=(self._consume, 1))]

    def _run(self, work: Any, offset: int) -> None:
        turn = offset
        while not self.stop.is_set():
            live = [b for b in self.nodes if b.name not in self.down]
            node = live[turn % len(live)]
            turn += 1
            try:
                conn = connect(node)
            except CLIENT_ERRORS:
                time.sleep(0.2)
                continue
            try:
                work(conn, node)
            except CLIENT_ERRORS:
                time.sleep(0.2)
            finally:
                try:
                    if conn.is_open:
                        conn.close()
                except CLIENT_ERRORS:
                    pass

    def _publish(self, conn: pika.BlockingConnection, node: BrokerProc) -> None:
        ch = conn.channel()
        ch.confirm_delivery()
        while not self.stop.is_set() and node.name not in self.down:
            body = f"m{len(self.confirmed)}-{time.monotonic_ns()}".encode()
            ch.basic_publish("", QUEUE, body)  # returns once confirmed, raises if nacked
            self.confirmed.append(body)
            time.sleep(0.01)

    def _consume(self, conn: pika.BlockingConnection, node: BrokerProc) -> None:
        ch = conn.channel()
        ch.basic_qos(prefetch_count=10)
        for method, _props, body in ch.consume(QUEUE, inactivity_timeout=0.3):
            if self.stop.is_set() or node.name in self.down:
                break
            if method is not None:
                self.delivered.add(body)
                ch.basic_ack(method.delivery_tag)

    def __enter__(self) -> Clients:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(30)

    def progress(self, more: int = 20) -> None:
        """Wait until both clients have done `more` messages than now."""
        sent, got = len(self.confirmed), len(self.delivered)
        assert eventually(lambda: len(self.confirmed) >= sent + more
                          and len(self.delivered) >= got + more, timeout=60), \
            f"the queue stopped serving: {len(self.confirmed)} confirmed, " \
            f"{len(self.delivered)} delivered"


def _restart(clients: Clients, nodes: list[BrokerProc], b: BrokerProc, series: str) -> None:
    """Stop `b` as an operator does (SIGTERM) and start it again as `series`."""
    clients.down.add(b.name)
    assert b.proc is not None
    b.proc.terminate()
    try:
        b.proc.wait(30)
    except subprocess.TimeoutExpired:
        pass  # killed below
    stop_node_process(b.proc)
    peers = ",".join(n.name for n in nodes)
    launch(b, ["--rabbitmq-version", series, "--name", b.name, "--amqp-port",
               str(b.amqp_port), "--peers", peers, "--net-ticktime", "2",
               "--data-dir", str(b.data_dir), "--backend", "quorum"])
    wait_ready(b)
    clients.down.discard(b.name)


def _status(nodes: list[BrokerProc], queue: str = QUEUE) -> dict[str, dict[str, Any]]:
    for b in nodes:
        try:
            return {r["node"]: r for r in ctl_json(b.name, "quorum_status", queue)}
        except AssertionError:
            continue
    raise AssertionError("no node answers quorum_status")


def _all_members_follow(nodes: list[BrokerProc], queue: str = QUEUE) -> bool:
    rows = _status(nodes, queue).values()
    return len(rows) == 3 and all(r["raft_state"] in ("leader", "follower") for r in rows)


def test_a_rolling_restart_onto_4_3_converts_every_replica_once_and_loses_nothing(
        tmp_path: Path) -> None:
    with running_cluster(tmp_path, extra=["--rabbitmq-version", "4.2"]) as nodes:
        conn = connect(nodes[0])
        conn.channel().queue_declare(QUEUE, durable=True, arguments=ARGS)
        conn.close()
        with Clients(nodes) as clients:
            clients.progress()
            for i, b in enumerate(nodes):
                _restart(clients, nodes, b, "4.3")
                assert eventually(lambda: _all_members_follow(nodes), timeout=60)
                clients.progress()
                if i < 2:  # a mixed cluster: some members' code is still 4.2's
                    rows = _status(nodes)
                    assert {r["machine_version"] for r in rows.values()} == {7}
                    assert rows[b.name]["code_machine_version"] == 8
                if i == 0:
                    # declared on the 4.3 node, at the version every member node runs
                    conn = connect(b)
                    conn.channel().queue_declare(LATE, durable=True, arguments=ARGS)
                    conn.close()
                    assert eventually(lambda: _all_members_follow(nodes, LATE), timeout=30)
                    rows = _status(nodes, LATE)
                    assert {r["machine_version"] for r in rows.values()} == {7}, rows
            for queue in (QUEUE, LATE):
                upgraded = eventually(lambda q=queue: all(
                    r["machine_version"] == 8 for r in _status(nodes, q).values()), timeout=60)
                assert upgraded, _status(nodes, queue)
            clients.progress()
        rows = _status(nodes)
        switches = [[v for v in r["machine_versions"] if v[1] == 8] for r in rows.values()]
        # one switch to 8 per replica, all at the same raft index
        assert all(len(s) == 1 for s in switches), rows
        assert len({s[0][0] for s in switches}) == 1, rows
        upgrade_index = switches[0][0][0]

        # drain what is left, then every confirmed message must have been delivered
        conn = connect(nodes[1])
        ch = conn.channel()
        while True:
            method, _props, body = ch.basic_get(QUEUE, auto_ack=True)
            if method is None:
                break
            clients.delivered.add(body)
        conn.close()
        lost = [m for m in clients.confirmed if m not in clients.delivered]
        assert not lost, f"{len(lost)} of {len(clients.confirmed)} confirmed messages lost"

        # a node started again on 4.2's code cannot run the queue's machine 8
        old = nodes[2]
        with Clients(nodes[:2]) as clients:
            clients.progress()
            _restart(clients, nodes, old, "4.2")
            clients.progress()
        row = _status(nodes[:2])[old.name]
        assert row["raft_state"] == "noproc" or (
            row["code_machine_version"] == 7 and row["last_applied"] < upgrade_index), row
