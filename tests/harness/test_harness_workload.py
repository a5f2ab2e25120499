"""Workload clients against real `warren node start` processes (in-memory queues).

The clients run as the runner runs them (`python -m harness.workload CONFIG`), are
drained through their drain file, and their recorded `client_ops` rows are read back from the
compacted history and compared with what must have happened, row by row.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pika
import pyarrow.parquet as pq
import pytest

from analysis.client_ops import body_digest
from analysis.compact import compact, read_segment
from harness import procs
from harness.cluster import Cluster, free_port
from harness.scenarios import ClientSpec
from harness.workload import ID_STRIDE, ClientConfig, message_body
from tests.waiting import wait_until

RUN_ID = "wl"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """Two real nodes with node-local in-memory queues; they record nothing themselves."""
    c = Cluster(tmp_path / "cluster", 2, backend="memory")
    try:
        c.start(timeout_s=90)
        for host, port in c.amqp_endpoints():
            conn = pika.BlockingConnection(pika.ConnectionParameters(host, port))
            conn.channel().queue_declare("q1", durable=True)
            conn.close()
        yield c
    finally:
        c.close()


@pytest.fixture
def clients() -> Iterator[list[subprocess.Popen[bytes]]]:
    running: list[subprocess.Popen[bytes]] = []
    try:
        yield running
    finally:
        for p in running:
            procs.kill_group(p)


class Client:
    def __init__(self, cfg: ClientConfig, proc: subprocess.Popen[bytes]) -> None:
        self.cfg, self.proc = cfg, proc


def _start(run: Path, index: int, spec: ClientSpec, endpoints: list[tuple[str, int]],
           running: list[subprocess.Popen[bytes]]) -> Client:
    cfg = ClientConfig(f"client-{index}", index, str(run), RUN_ID, endpoints, spec,
                       drain_timeout_s=30)
    path = run / f"client-{index}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(cfg.to_json())
    p = procs.spawn([sys.executable, "-m", "harness.workload", str(path)],
                    run / f"client-{index}.log")
    running.append(p)
    return Client(cfg, p)


def _drain(c: Client) -> int:
    c.cfg.request_drain()
    return c.proc.wait(60)


def _ops(run: Path, client: str) -> list[dict[str, Any]]:
    path = run / "history" / "client_ops" / f"run_id={RUN_ID}" / f"node={client}"
    return pq.read_table(path).to_pylist()


def _kinds(rows: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [r for r in rows if r["kind"] == kind]


def test_confirmed_publishes_and_acked_deliveries_are_recorded_exactly(
        cluster: Cluster, clients: list[subprocess.Popen[bytes]], tmp_path: Path) -> None:
    run = tmp_path / "run"
    n = 40
    endpoints = cluster.amqp_endpoints()[:1]
    pub = _start(run, 1, ClientSpec("publisher", "q1", rate=0, messages=n, max_in_flight=8,
                                    body_size=32), endpoints, clients)
    con = _start(run, 2, ClientSpec("consumer", "q1", prefetch=5), endpoints, clients)
    # the publisher stops publishing after n, but a drain stops it at once: drain it
    # only once its history shows every confirm
    _wait_for(run, "client-1", lambda rows: sum(r["kind"] == "confirm" for r in rows) == n)
    assert _drain(pub) == 0
    assert _drain(con) == 0
    compact(run)

    p = _ops(run, "client-1")
    conn = "client-1.1"
    ids = [ID_STRIDE + k for k in range(n)]
    assert [(r["kind"], r["conn_id"], r["channel_id"]) for r in p[:1]] == [
        ("channel_open", conn, 1)]
    publishes = _kinds(p, "publish")
    assert [(r["msg_id"], r["pub_seq"], r["queue"], r["pub_chan"]) for r in publishes] == [
        (m, k + 1, "q1", f"{conn}/1") for k, m in enumerate(ids)]
    assert [r["body_digest"] for r in publishes] == [
        body_digest(message_body(m, 32)) for m in ids]
    confirms = _kinds(p, "confirm")
    assert sorted((r["msg_id"], r["pub_seq"]) for r in confirms) == [
        (m, k + 1) for k, m in enumerate(ids)]
    assert {r["outcome"] for r in confirms} == {"ok"}
    published_at = {r["msg_id"]: r["ts_ns"] for r in publishes}
    assert all(r["ts_ns"] >= published_at[r["msg_id"]] for r in confirms)
    assert _kinds(p, "pub_timeout") == [] and _kinds(p, "pub_nack") == []
    assert [(r["kind"], r["error"]) for r in p[-2:]] == [("channel_close", None),
                                                         ("conn_close", None)]

    c = _ops(run, "client-2")
    delivers = _kinds(c, "deliver")
    assert [(r["msg_id"], r["pub_chan"], r["pub_seq"], r["redelivered"], r["delivery_tag"])
            for r in delivers] == [(m, f"{conn}/1", k + 1, False, k + 1)
                                   for k, m in enumerate(ids)]
    assert [r["body_digest"] for r in delivers] == [r["body_digest"] for r in publishes]
    assert len({r["consumer_tag"] for r in delivers}) == 1
    acks = _kinds(c, "ack")
    assert sorted((r["delivery_tag"], r["msg_id"]) for r in acks) == [
        (k + 1, m) for k, m in enumerate(ids)]
    assert [r["kind"] for r in c if r["kind"].startswith(("consume", "drain"))] == [
        "consume_ok", "drain_start", "drain_end"]
    assert _kinds(c, "drain_end")[0]["outcome"] == "ok"


def test_a_lost_connection_is_recorded_and_the_publisher_moves_to_another_node(
        cluster: Cluster, clients: list[subprocess.Popen[bytes]], tmp_path: Path) -> None:
    run = tmp_path / "run"
    dead = ("127.0.0.1", free_port())
    n1 = cluster.nodes[0]
    endpoints = [dead, *cluster.amqp_endpoints()]  # index 1 -> starts on n1's port
    pub = _start(run, 1, ClientSpec("publisher", "q1", rate=200, heartbeat_s=1), endpoints,
                 clients)
    consumers = [_start(run, 3 + k, ClientSpec("consumer", "q1"), [ep], clients)
                 for k, ep in enumerate(cluster.amqp_endpoints())]
    _wait_for(run, "client-1", lambda rows: any(r["kind"] == "confirm" for r in rows))
    cluster.kill_node(n1)
    _wait_for(run, "client-1", lambda rows: any(
        r["kind"] == "confirm" and r["conn_id"] == "client-1.2" for r in rows))
    assert _drain(pub) == 0
    _drain(consumers[1])
    compact(run)

    p = _ops(run, "client-1")
    closes = _kinds(p, "conn_close")
    assert [r["conn_id"] for r in closes] == ["client-1.1", "client-1.2"]
    assert closes[0]["error"] is not None and closes[1]["error"] is None
    # every publish has exactly one completion; on the dead connection none is a confirm
    # that came after the connection closed
    done = {}
    for r in p:
        if r["kind"] in ("confirm", "pub_nack", "pub_timeout"):
            assert r["msg_id"] not in done, r
            done[r["msg_id"]] = r
    assert sorted(done) == sorted(r["msg_id"] for r in _kinds(p, "publish"))
    second = [r for r in _kinds(p, "publish") if r["conn_id"] == "client-1.2"]
    assert second and second[0]["pub_seq"] == 1
    assert all(done[r["msg_id"]]["kind"] == "confirm" for r in second)
    lost_window = [r for r in done.values() if r["kind"] == "pub_timeout"]
    assert all(r["conn_id"] == "client-1.1" and r["outcome"] == "info" for r in lost_window)


def _wait_for(run: Path, client: str, seen: Callable[[list[dict[str, Any]]], bool]) -> None:
    """Wait (boundedly) until the client's raw history, as flushed so far, shows `seen`."""
    def flushed() -> list[dict[str, Any]]:
        return [r for f in sorted((run / "raw" / "client_ops" / client).glob("*.arrows"))
                for b in read_segment(f)[0] for r in b.to_pylist()]

    wait_until(lambda: seen(flushed()), f"{client} recording what the test waits for",
               20.0, poll_s=0.05)
