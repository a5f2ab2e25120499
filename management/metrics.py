"""The Prometheus endpoint: RabbitMQ's metric names where it has one, warren's own
(``warren_*``) where it has none.

`/metrics` aggregates over the node's objects (no labels), `/metrics/per-object`
labels each queue's metrics with ``vhost`` and ``queue``, as rabbitmq_prometheus
does. prometheus_client writes the text format; the values are read at scrape time.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from broker import ctl_ops
from broker.node import BrokerNode
from management.calls import in_node

__all__ = ["BrokerCollector", "registry"]

QUEUE_LABELS = ["vhost", "queue"]


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
        yield GaugeMetricFamily(
            "warren_connections_credit_flow_blocked",
            "Connections whose reader is blocked by credit flow right now",
            value=sum(1 for r in readers if r.credit.blocked()))
        ready = self._queue_family(GaugeMetricFamily, "rabbitmq_queue_messages_ready",
                                   "Messages ready to be delivered to consumers")
        consumers = self._queue_family(GaugeMetricFamily, "rabbitmq_queue_consumers",
                                       "Consumers on a queue")
        term = self._queue_family(CounterMetricFamily, "rabbitmq_raft_term",
                                  "Current Raft term number")
        commit = self._queue_family(GaugeMetricFamily, "rabbitmq_raft_log_commit_index",
                                    "Raft log commit index")
        applied = self._queue_family(GaugeMetricFamily,
                                     "rabbitmq_raft_log_last_applied_index",
                                     "Raft log last applied index")
        totals = {"ready": 0, "consumers": 0, "term": 0, "commit": 0, "applied": 0}
        count = 0
        for vhost in b.view.state.vhosts:
            for q in in_node(b.node, ctl_ops.list_queues, vhost):
                count += 1
                me = [r for r in (in_node(b.node, _quorum_status, vhost, q["name"])
                                  if q["type"] == "quorum" else [])
                      if r.get("node") == b.node.name and "term" in r]
                values = {"ready": q["messages"] or 0, "consumers": q["consumers"] or 0}
                if me:
                    values.update(term=me[0]["term"], commit=me[0]["commit_index"],
                                  applied=me[0]["last_applied"])
                if self.per_object:
                    labels = [vhost, q["name"]]
                    ready.add_metric(labels, values["ready"])
                    consumers.add_metric(labels, values["consumers"])
                    if me:
                        term.add_metric(labels, values["term"])
                        commit.add_metric(labels, values["commit"])
                        applied.add_metric(labels, values["applied"])
                for key, value in values.items():
                    totals[key] += value
        if not self.per_object:
            for family, key in ((ready, "ready"), (consumers, "consumers"), (term, "term"),
                                (commit, "commit"), (applied, "applied")):
                family.add_metric([], totals[key])
        yield GaugeMetricFamily("rabbitmq_queues", "Queues available", value=count)
        yield from (ready, consumers, term, commit, applied)


def registry(broker: BrokerNode, per_object: bool) -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(BrokerCollector(broker, per_object))
    return reg
