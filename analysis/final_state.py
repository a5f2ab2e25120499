"""The rules the final-state checks and the DOWN latency metric share.

Post-drain emptiness, DLX worker liveness, DOWN propagation latency and where a
lost message was last seen are computed twice: by Spark in `analysis.checks` and, as
their oracle, by `analysis.reference.final_state` over the reference checker's rows.
The verdict rules and the names both sides use live here, below both, so they cannot
drift apart. Nothing here imports Spark or the reference checker.
"""

from __future__ import annotations

from typing import Any

from analysis import model

EMPTINESS = "post_drain_emptiness"
DLX_LIVENESS = "dlx_worker_liveness"
#: rows that carry the machine state's message counts
COUNTED_KINDS = ("applied", "snapshot_installed")
#: the stages a message passes, in order; `last_seen` names the furthest one reached
STAGES = ("client_publish", "channel_publish_in", "ra_enqueued", "ra_delivered",
          "channel_deliver_out", "client_deliver")


def short_node(node: str | None) -> str | None:
    """``n2`` for ``n2@127.0.0.1:5000``: servers (``<queue>@n2``) and leaders name a
    node by its short name, a node's own rows and the nemesis's targets in full."""
    return None if node is None else node.partition("@")[0]


def server_node(server: str | None) -> str | None:
    """The node of a server named ``<queue>@<node>``."""
    return None if server is None else server.rpartition("@")[2]


# -- verdicts -------------------------------------------------------------------------

def emptiness_status(counts: dict[str, int], applicable: bool, drained: bool,
                     drain_expected: bool) -> tuple[str, str]:
    """Post-drain emptiness: only a drained run's final state must be empty."""
    if not applicable:
        return model.SKIPPED, "no replica_events"
    if not drained:
        if drain_expected:
            return model.UNKNOWN, "no completed drain: the final state cannot be judged"
        return model.SKIPPED, "workload has no drain"
    if counts.get("not_empty", 0):
        return model.FAIL, ""
    if counts.get("unrecorded_queues", 0):
        return model.UNKNOWN, (f"{counts['unrecorded_queues']} queues without recorded "
                               "ready/checked-out counts (history older than schema 1.1)")
    return model.PASS, ""


def dlx_liveness_status(counts: dict[str, int], applicable: bool, why: str,
                        n_violations: int) -> tuple[str, str]:
    if not applicable:
        return model.SKIPPED, why
    if n_violations:
        return model.FAIL, ""
    if why:
        return model.UNKNOWN, why
    if counts.get("no_leader", 0):
        return model.UNKNOWN, f"{counts['no_leader']} source queues with no known leader"
    return model.PASS, ""


def eval_point(drain_end: int | None, run_end: int, last_stop: int | None,
               grace_ns: int) -> tuple[int | None, str]:
    """When "after heal + grace" is judged: the end of a completed drain (it follows the
    settle period by construction), else the run's end once it is past the last fault
    stop plus the grace."""
    if drain_end is not None:
        return drain_end, ""
    if last_stop is None or run_end >= last_stop + grace_ns:
        return run_end, ""
    return None, "the run ended before the last fault stop plus the grace, without a drain"


def down_summary(hist: dict[str, dict[int, int]], counts: dict[str, int]) -> dict[str, Any]:
    """The `down_latency_ms` block of summary.json: p50/p99 overall, local, remote."""
    out: dict[str, Any] = dict(counts)
    for k in ("all", "local", "remote"):
        pct = model.percentiles(hist.get(k, {}), (0.5, 0.99))
        if pct:
            out[k] = {**pct, "n": sum(hist[k].values())}
    return out
