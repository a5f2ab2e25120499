"""What RabbitMQ does not promise to keep: the rules that excuse a message from `lost`.

A confirmed message that nobody settled ok is lost, unless what happened to it was
allowed. Which things are allowed depends on the queue it sat in, which only the
queue's own rows say (`queue_events`, recorded by classic queue processes), and on the
faults (`nemesis_events`). In the order they are tried:

* `unroutable`: the broker returned the publish (`basic.return`, client op `return`):
  it never reached a queue, and the publisher was told;
* `dropped`: the queue dropped or dead-lettered it at most once (`queue_dropped`:
  message TTL, a length limit, a reject without requeue, a purge);
* `queue_deleted`: the queue it was published to was deleted (`queue_deleted`: by a
  client, by auto-delete, by `x-expires`, or with its exclusive owner's connection);
* `node_down`: its queue's home node was killed after the message was enqueued, and
  either the queue was not durable or exclusive (RabbitMQ removes such a queue with
  its node), or the message was not persistent (a transient message does not survive
  its node).

A persistent message in a durable, non-exclusive queue is never excused by a fault:
it must survive a kill of its node. Quorum queues record no `queue_events`, so only
`unroutable` applies to them. `queue_fate.rules` works on plain rows (the reference
checker, and the Spark check's driver side for the few queue rows).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from analysis.final_state import short_node

__all__ = ["WHY", "QueueFacts", "queue_facts"]

#: the excuses in the order they are tried, and the count each adds to
WHY: dict[str, str] = {"unroutable": "unroutable", "dropped": "dropped",
                       "queue_deleted": "deleted_with_queue", "node_down": "lost_with_node"}


@dataclass
class QueueFacts:
    """What the queue rows and the faults of a run say about its queues."""

    #: queues a recorded deletion removed
    deleted: set[str] = field(default_factory=set)
    #: non-durable or exclusive queues whose home node was killed after they were declared
    lost_with_node: set[str] = field(default_factory=set)
    #: queue -> the last kill of its home node (ns): a transient message enqueued at or
    #: before it went with the node
    last_kill: dict[str, int] = field(default_factory=dict)


def queue_facts(declared: Iterable[Mapping[str, Any]], deleted: Iterable[Mapping[str, Any]],
                kills: Iterable[tuple[str | None, int]]) -> QueueFacts:
    """From `queue_declared` and `queue_deleted` rows and the `(target node, ts_ns)` of
    every `kill` fault's start."""
    killed: dict[str | None, list[int]] = {}
    for node, ts in kills:
        killed.setdefault(short_node(node), []).append(ts)
    facts = QueueFacts(deleted={r["queue"] for r in deleted if r["queue"] is not None})
    for r in declared:
        q = r["queue"]
        times = [t for t in killed.get(short_node(r["node"]), []) if t >= r["ts_ns"]]
        if q is None or not times:
            continue
        facts.last_kill[q] = max(facts.last_kill.get(q, 0), max(times))
        if not r["durable"] or r["exclusive"]:
            facts.lost_with_node.add(q)
    return facts
