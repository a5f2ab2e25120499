"""The Prometheus endpoint parses as Prometheus text with RabbitMQ's metric names."""

from __future__ import annotations

import urllib.request

import pika
from prometheus_client.parser import text_string_to_metric_families

from tests.management.conftest import Managed


def scrape(m: Managed, path: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{m.prometheus_port}{path}",
                                timeout=30) as resp:
        text = resp.read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def test_metrics_name_connections_queues_and_raft_state(managed: Managed) -> None:
    conn = pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", managed.node.amqp_port, connection_attempts=1))
    try:
        ch = conn.channel()
        ch.queue_declare("prom-q", durable=True, arguments={"x-queue-type": "quorum"})
        ch.confirm_delivery()
        for _ in range(3):
            ch.basic_publish("", "prom-q", b"m")
        aggregated = scrape(managed, "/metrics")
        assert aggregated["rabbitmq_connections"][0][1] >= 1
        assert aggregated["rabbitmq_queue_messages_ready"][0][1] >= 3
        per = scrape(managed, "/metrics/per-object")
        mine = {"vhost": "/", "queue": "prom-q"}
        assert (mine, 3.0) in per["rabbitmq_queue_messages_ready"]
        terms = dict((tuple(sorted(lbl.items())), v)
                     for lbl, v in per["rabbitmq_raft_term_total"])
        assert terms[tuple(sorted(mine.items()))] >= 1
        commits = [v for lbl, v in per["rabbitmq_raft_log_commit_index"] if lbl == mine]
        assert commits and commits[0] >= 4  # the leader's noop and three enqueues
        ch.queue_delete("prom-q")
    finally:
        conn.close()


def test_metrics_count_publishes_wal_batches_and_supervisor_restarts(
        managed: Managed) -> None:
    conn = pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", managed.node.amqp_port, connection_attempts=1))
    try:
        ch = conn.channel()
        ch.queue_declare("prom-count-q", durable=True, arguments={"x-queue-type": "quorum"})
        ch.confirm_delivery()
        for _ in range(4):
            ch.basic_publish("", "prom-count-q", b"m")
        got = scrape(managed, "/metrics")
        assert got["rabbitmq_channel_messages_published_total"][0][1] >= 4
        batches = got["warren_wal_batches_total"][0][1]
        entries = got["warren_wal_batch_entries_total"][0][1]
        assert batches >= 1 and entries >= batches  # a batch holds one entry or more
        assert got["warren_supervisor_restarts_total"] == [({}, 0.0)]  # a quiet node
        assert "warren_credit_flow_blocked_seconds_total" in got
        ch.queue_delete("prom-count-q")
    finally:
        conn.close()


def test_a_classic_queue_has_message_metrics_and_no_raft_ones(managed: Managed) -> None:
    conn = pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", managed.node.amqp_port, connection_attempts=1))
    try:
        ch = conn.channel()
        ch.queue_declare("prom-classic", durable=True)
        ch.confirm_delivery()
        for _ in range(2):
            ch.basic_publish("", "prom-classic", b"m")
        per = scrape(managed, "/metrics/per-object")
        mine = {"vhost": "/", "queue": "prom-classic"}
        assert (mine, 2.0) in per["rabbitmq_queue_messages_ready"]
        assert (mine, 2.0) in per["rabbitmq_queue_messages"]
        assert (mine, 0.0) in per["rabbitmq_queue_messages_unacked"]
        assert [v for lbl, v in per.get("rabbitmq_raft_term_total", [])
                if lbl == mine] == []
        ch.queue_delete("prom-classic")
    finally:
        conn.close()
