"""The Spark checks: one module per check, each `run(history, params) -> CheckResult`.

A check returns its counts, the verdict decided from them (shared with the reference
checker in `analysis.model`) and a lazy DataFrame of violation rows in the common
violation schema, which the caller counts, samples and writes.
"""

from __future__ import annotations

from collections.abc import Callable

from analysis.checks import (
    dlx,
    dlx_liveness,
    emptiness,
    flow,
    local_delivery,
    ordering,
    replicas,
    returns,
    supervision,
    total_queue,
)
from analysis.checks.common import CheckResult
from analysis.load import History
from analysis.model import Params

CheckFn = Callable[[History, Params], CheckResult]

ALL: dict[str, CheckFn] = {
    "total_queue": total_queue.run,
    "ordering_channel_fifo": ordering.channel_fifo,
    "ordering_consumer_monotonic": ordering.consumer_monotonic,
    "ordering_sac_fifo": ordering.sac_fifo,
    "ordering_returns": returns.run,
    "replica_determinism": replicas.run,
    "local_delivery": local_delivery.run,
    "dlx_at_least_once": dlx.run,
    "flow_not_stuck": flow.run,
    "supervision_liveness": supervision.run,
    "post_drain_emptiness": emptiness.run,
    "dlx_worker_liveness": dlx_liveness.run,
}

__all__ = ["ALL", "CheckFn", "CheckResult"]
