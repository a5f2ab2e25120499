"""`warren ctl add_member` on a cluster halfway through a rolling upgrade.

Node a runs RabbitMQ 4.2 (`rabbit_fifo` machine 7), node b 4.3 (machine 8). A quorum
queue with its one member on a runs machine 7. A member added on b runs b's code, as
`rabbit_quorum_queue:add_member` asks the new member's node for its version, and
applies the queue's log at the queue's version, 7, whichever node runs the command;
once a is restarted as 4.3 the queue moves to 8 on both members, at one index.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.broker.broker_support import (
    BrokerProc,
    connect,
    ctl,
    ctl_json,
    eventually,
    launch,
    plan,
    stop_all,
    wait_ready,
)
from transports.zmq_node import stop_node_process

QUEUE = "orders"


def _start(nodes: list[BrokerProc], b: BrokerProc, series: str) -> None:
    peers = ",".join(n.name for n in nodes)
    launch(b, ["--rabbitmq-version", series, "--name", b.name, "--amqp-port",
               str(b.amqp_port), "--peers", peers, "--net-ticktime", "2",
               "--data-dir", str(b.data_dir), "--backend", "quorum"])


@pytest.fixture
def mixed(tmp_path: Path) -> Iterator[list[BrokerProc]]:
    """Node a on 4.2, node b on 4.3; both stopped on the way out."""
    nodes = plan(2, tmp_path)
    try:
        for b, series in zip(nodes, ("4.2", "4.3"), strict=True):
            _start(nodes, b, series)
        for b in nodes:
            wait_ready(b)
        yield nodes
    finally:
        stop_all(nodes)


def _status(b: BrokerProc) -> dict[str, dict[str, Any]]:
    return {r["node"]: r for r in ctl_json(b.name, "quorum_status", QUEUE)}


@pytest.mark.parametrize("caller", [0, 1], ids=["from-the-4.2-node", "from-the-4.3-node"])
def test_a_member_added_on_a_newer_node_runs_its_code_at_the_queue_version(
        mixed: list[BrokerProc], caller: int) -> None:
    a, b = mixed
    conn = connect(a)
    ch = conn.channel()
    ch.queue_declare(QUEUE, durable=True, arguments={"x-queue-type": "quorum",
                                                     "x-quorum-initial-group-size": 1})
    ch.confirm_delivery()
    ch.basic_publish("", QUEUE, b"before")
    conn.close()
    assert list(_status(a)) == [a.name]

    out = ctl(mixed[caller].name, "add_member", QUEUE, b.name)
    assert out.returncode == 0, out.stderr
    assert eventually(lambda: _status(a).get(b.name, {}).get("last_applied", 0)
                      >= _status(a)[a.name]["last_applied"], timeout=30), _status(a)
    rows = _status(a)
    assert (rows[b.name]["machine_version"], rows[b.name]["code_machine_version"]) == (7, 8)
    assert rows[a.name]["machine_version"] == 7

    # a restarted as 4.3: every member's code runs 8, and the queue moves there
    assert a.proc is not None
    a.proc.terminate()
    try:
        a.proc.wait(30)
    except subprocess.TimeoutExpired:
        pass
    stop_node_process(a.proc)
    _start(mixed, a, "4.3")
    wait_ready(a)
    assert eventually(lambda: all(r.get("machine_version") == 8
                                  for r in _status(b).values()), timeout=60), _status(b)
    rows = _status(b)
    switches = [[v for v in r["machine_versions"] if v[1] == 8] for r in rows.values()]
    assert all(len(s) == 1 for s in switches) and len({s[0][0] for s in switches}) == 1, rows
    conn = connect(b)
    got = conn.channel().basic_get(QUEUE, auto_ack=True)
    conn.close()
    assert got[2] == b"before"
