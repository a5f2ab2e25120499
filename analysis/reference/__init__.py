"""Plain-Python implementation of every check: the oracle for the Spark checks.

It reads whole tables into lists of dicts, so it is for tests and small runs only.
Each check mirrors one module of `analysis.checks` and returns the same counts and
violation rows (in `model.VIOLATION_COLUMNS` order); tests assert they agree exactly.

One module per check, as in `analysis.checks`: `queue_total` (`total_queue`),
`ordering`, `returns`, `replicas`, `local_sends` (`local_delivery`), `dlx`, `flow`,
`supervision` and `final_state` (`post_drain_emptiness`, `dlx_worker_liveness`, the
DOWN latency and where a lost message was last seen), with `history` (the history and
result records) and `common` (what several checks derive) below them and `metrics`
beside them. The two check modules are not named after their checks because this
package exports the check functions under those names. Everything is re-exported
here, so callers import from `analysis.reference` only.
"""

from __future__ import annotations

from analysis.model import Params
from analysis.reference.common import (
    Delivery,
    Hole,
    dark_intervals,
    deliveries,
    enqueue_pos,
    first_publishes,
    server_node,
    settles,
    with_epochs,
)
from analysis.reference.dlx import dlx_at_least_once
from analysis.reference.final_state import (
    dlx_worker_liveness,
    down_counts,
    down_latency_hist,
    last_seen,
    post_drain_emptiness,
)
from analysis.reference.flow import blocked_intervals, flow_not_stuck
from analysis.reference.history import BIG, RefHistory, RefResult, Row, okey
from analysis.reference.local_sends import local_delivery
from analysis.reference.metrics import (
    latency_histograms,
    replication_histograms,
    throughput,
    wal_batches,
)
from analysis.reference.ordering import (
    ordering_channel_fifo,
    ordering_consumer_monotonic,
    ordering_sac_fifo,
)
from analysis.reference.queue_total import total_queue
from analysis.reference.replicas import replica_determinism
from analysis.reference.returns import ordering_returns
from analysis.reference.supervision import supervision_liveness

__all__ = [
    "ALL", "BIG", "Delivery", "Hole", "RefHistory", "RefResult", "Row", "blocked_intervals",
    "dark_intervals", "deliveries", "dlx_at_least_once", "dlx_worker_liveness", "down_counts",
    "down_latency_hist", "enqueue_pos", "first_publishes", "flow_not_stuck", "last_seen",
    "latency_histograms", "local_delivery", "okey", "ordering_channel_fifo",
    "ordering_consumer_monotonic", "ordering_returns", "ordering_sac_fifo", "post_drain_emptiness",
    "replica_determinism", "replication_histograms", "run_all", "server_node", "settles",
    "supervision_liveness", "throughput", "total_queue", "wal_batches", "with_epochs",
]

ALL = {
    "total_queue": total_queue,
    "ordering_channel_fifo": ordering_channel_fifo,
    "ordering_consumer_monotonic": ordering_consumer_monotonic,
    "ordering_sac_fifo": ordering_sac_fifo,
    "ordering_returns": ordering_returns,
    "replica_determinism": replica_determinism,
    "local_delivery": local_delivery,
    "dlx_at_least_once": dlx_at_least_once,
    "flow_not_stuck": flow_not_stuck,
    "supervision_liveness": supervision_liveness,
    "post_drain_emptiness": post_drain_emptiness,
    "dlx_worker_liveness": dlx_worker_liveness,
}


def run_all(h: RefHistory, p: Params | None = None) -> dict[str, RefResult]:
    p = p or Params()
    return {name: fn(h, p) for name, fn in ALL.items()}
