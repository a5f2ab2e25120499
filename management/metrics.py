"""The Prometheus endpoint: RabbitMQ's metric names where it has one, warren's own
(``warren_*``) where it has none.

`/metrics` aggregates over the node's objects (no labels), `/metrics/per-object`
labels each queue's metrics with ``vhost`` and ``queue`` (and warren's supervisor
restarts with ``supervisor``), as rabbitmq_prometheus does. prometheus_client
writes the text format; the values are read at scrape time.

Publishes and credit-flow time are those of the connections open now: a closed
connection's counts go with it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from broker import ctl_ops
from broker.node import BrokerNode
from management.calls import in_node
from supervision import reports

__all__ = ["BrokerCollector", "registry"]

QUEUE_LABELS = ["vhost", "queue"]


def _wal_stats() -> dict[str, Any] | None:
    """The disk WAL's counts; None for a node whose Ra system is in memory."""
    try:
        return ctl_ops.wal_status()
    except ctl_ops.CtlError:
        return None


def _quorum_status(vhost: str, name: str) -> list[dict[str, Any]]:
    try:
        return ctl_ops.quorum_status(vhost, name)
    except ctl_ops.CtlError:  # deleted while scraped
        return []


class BrokerCollector(Collector):
    """Reads the broker at each scrape."""

    def __init__(self, broker: BrokerNode, per_object: bool) -> None:
        self.broker, self.per_object = broker, per_object

    def _queue_family(self, cls: type, name: str, doc: str) -> Any:
        return cls(name, doc, labels=QUEUE_LABELS if self.per_object else None)

    def collect(self) -> Iterator[Metric]:
        b = self.broker
        readers = list(b.ctx.readers.values())
        yield GaugeMetricFamily("rabbitmq_connections", "Connections currently open",
                                value=len(readers))
        yield GaugeMetricFamily("rabbitmq_channels", "Channels currently open",
                                value=b.open_channels())
        yield CounterMetricFamily(
            "rabbitmq_channel_messages_published",
            "Total number of messages published into an exchange on a channel",
            value=sum(r.publishes_dispatched for r in readers))
        yield GaugeMetricFamily(
            "warren_connections_credit_flow_blocked",
            "Connections whose reader is blocked by credit flow right now",
            value=sum(1 for r in readers if r.credit.blocked()))
        now = b.node.clock.monotonic_ms()
        yield CounterMetricFamily(
            "warren_credit_flow_blocked_seconds",
            "Time the open connections' readers spent blocked by credit flow",
            value=sum(r.credit_blocked_time.total(now) for r in readers) / 1000)
        yield from self._restarts()
        yield from self._wal()
        ready = self._queue_family(GaugeMetricFamily, "rabbitmq_queue_messages_ready",
                                   "Messages ready to be delivered to consumers")
        unacked = self._queue_family(
            GaugeMetricFamily, "rabbitmq_queue_messages_unacked",
            "Messages delivered to consumers but not yet acknowledged")
        messages = self._queue_family(
            GaugeMetricFamily, "rabbitmq_queue_messages",
            "Sum of ready and unacknowledged messages - total queue depth")
        consumers = self._queue_family(GaugeMetricFamily, "rabbitmq_queue_consumers",
                                       "Consumers on a queue")
        term = self._queue_family(CounterMetricFamily, "rabbitmq_raft_term",
                                  "Current Raft term number")
        commit = self._queue_family(GaugeMetricFamily, "rabbitmq_raft_log_commit_index",
                                    "Raft log commit index")
        applied = self._queue_family(GaugeMetricFamily,
                                     "rabbitmq_raft_log_last_applied_index",
                                     "Raft log last applied index")
        families = {"ready": ready, "unacked": unacked, "messages": messages,
                    "consumers": consumers, "term": term, "commit": commit, "applied": applied}
        totals = dict.fromkeys(families, 0)
        count = 0
        for vhost in b.view.state.vhosts:
            for q in in_node(b.node, ctl_ops.list_queues, vhost):
                count += 1
                me = [r for r in (in_node(b.node, _quorum_status, vhost, q["name"])
                                  if q["type"] == "quorum" else [])
                      if r.get("node") == b.node.name and "term" in r]
                values = {"ready": q.get("messages_ready") or 0,
                          "unacked": q.get("messages_unacknowledged") or 0,
                          "messages": q["messages"] or 0, "consumers": q["consumers"] or 0}
                if me:
                    values.update(term=me[0]["term"], commit=me[0]["commit_index"],
                                  applied=me[0]["last_applied"])
                for key, value in values.items():
                    totals[key] += value
                    if self.per_object:
                        families[key].add_metric([vhost, q["name"]], value)
        if not self.per_object:
            for key, family in families.items():
                family.add_metric([], totals[key])
        yield GaugeMetricFamily("rabbitmq_queues", "Queues available", value=count)
        yield from families.values()

    def _restarts(self) -> Iterator[Metric]:
        by_sup = reports.restart_totals(self.broker.node.name)
        doc = "Child restarts made by the node's supervisors"
        if not self.per_object:
            yield CounterMetricFamily("warren_supervisor_restarts", doc,
                                      value=sum(by_sup.values()))
            return
        family = CounterMetricFamily("warren_supervisor_restarts", doc, labels=["supervisor"])
        for sup, count in sorted(by_sup.items()):
            family.add_metric([sup], count)
        yield family

    def _wal(self) -> Iterator[Metric]:
        stats = in_node(self.broker.node, _wal_stats)
        if stats is None:
            return
        yield CounterMetricFamily("warren_wal_batches", "Batches the Ra WAL wrote and synced",
                                  value=stats["syncs"])
        yield CounterMetricFamily("warren_wal_batch_entries",
                                  "Log entries in the batches the Ra WAL synced",
                                  value=stats["entries"])


def registry(broker: BrokerNode, per_object: bool) -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(BrokerCollector(broker, per_object))
    return reg
