"""Definitions shared by the Spark checks and the reference checker.

Both implementations compute the same counts and violation rows; everything that is
decided from those (verdict status, fault windows, percentiles from log-bucketed
histograms) lives here once, in plain Python, so the two cannot drift apart.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

PASS, FAIL, UNKNOWN, SKIPPED = "pass", "fail", "unknown", "skipped"
EXIT_PASS, EXIT_FAIL, EXIT_UNKNOWN, EXIT_ERROR, EXIT_BAD_INPUT = 0, 1, 2, 3, 4
NS = 1_000_000_000
LOG_BASE = math.log(1.01)
#: the client operations whose throughput is counted (docs/analysis.md, "Metrics")
OPS = ("publish", "confirm", "deliver", "ack")
#: the broker side of the same four, from `channel_events`: per node, the node whose
#: channel handled them (a client's own `node` is the client)
BROKER_OPS = ("publish_in", "confirm_out", "deliver_out", "settle_in")
PERCENTILES: tuple[float, ...] = (0.5, 0.9, 0.95, 0.99, 0.999)

VIOLATION_FIELDS: list[tuple[str, pa.DataType]] = [
    ("check", pa.string()),
    ("violation", pa.string()),
    ("queue", pa.string()),
    ("msg_id", pa.int64()),
    ("other_id", pa.int64()),
    ("key", pa.string()),
    ("raft_index", pa.int64()),
    ("ts_ns", pa.int64()),
    ("detail", pa.string()),
]
VIOLATION_SCHEMA = pa.schema([pa.field(n, t) for n, t in VIOLATION_FIELDS])
VIOLATION_COLUMNS = [n for n, _ in VIOLATION_FIELDS]
Violation = tuple[Any, ...]  # in VIOLATION_COLUMNS order

CHECKS: tuple[str, ...] = (
    "total_queue", "ordering_channel_fifo", "ordering_consumer_monotonic", "ordering_sac_fifo",
    "ordering_returns", "replica_determinism", "local_delivery", "dlx_at_least_once",
    "flow_not_stuck", "supervision_liveness", "post_drain_emptiness", "dlx_worker_liveness",
)


@dataclass(frozen=True)
class Params:
    """Tunables of the checks (seconds in the CLI, nanoseconds here)."""

    ack_grace_ns: int = 5 * NS
    flow_grace_ns: int = 30 * NS
    bucket_ns: int = NS
    dlx_grace_ns: int = 30 * NS


#: `rabbit_quorum_queue` applies this delivery limit when a queue declares none
DEFAULT_QQ_DELIVERY_LIMIT = 20


@dataclass
class RunConfig:
    """The `run_meta` row, parsed; defaults describe a run without metadata."""

    run_id: str = ""
    workload: str = ""
    drain_expected: bool = False
    state_digest_every: int = 1
    queues: dict[str, dict[str, Any]] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_row(cls, row: dict[str, Any] | None) -> RunConfig:
        if not row:
            return cls()
        return cls(
            run_id=row.get("run_id") or "",
            workload=row.get("workload") or "",
            drain_expected=bool(row.get("drain_expected")),
            state_digest_every=int(row.get("state_digest_every") or 1),
            queues=json.loads(row.get("queues_json") or "{}"),
            config=json.loads(row.get("config_json") or "{}"),
        )

    def dlx_sources(self) -> list[str]:
        """Queues that dead-letter at least once (their target is combined with them)."""
        return sorted(q for q, c in self.queues.items()
                      if c.get("dlx_strategy") == "at-least-once")

    def dlx_queues(self) -> list[str]:
        """Queues with any dead-letter target: a drop there may reappear elsewhere."""
        return sorted(q for q, c in self.queues.items() if c.get("dlx_target"))

    def dlx_chain(self, queue: str) -> list[str]:
        """The queues a message of `queue` can be dead-lettered into, in order (a
        target that loops back ends the chain)."""
        chain = [queue]
        while (target := self.queues.get(chain[-1], {}).get("dlx_target")) \
                and target not in chain:
            chain.append(target)
        return chain[1:]

    def release(self) -> dict[str, Any]:
        """The record of the RabbitMQ release the run's nodes modelled, as the runner
        recorded it (`releases.Release` fields); empty for a run that recorded none."""
        release = self.config.get("release")
        return dict(release) if isinstance(release, dict) else {}

    def delivery_limit(self, queue: str) -> int | None:
        """Returns of a message `queue` allows before it is dead-lettered or dropped:
        the declared limit, else the default for quorum queues of the release the run's
        nodes modelled (its recorded record: none for 3.10), else RabbitMQ's
        default from 4.0 on."""
        conf = self.queues.get(queue, {})
        if conf.get("delivery_limit") is not None:
            return int(conf["delivery_limit"])
        if conf.get("type") != "quorum":
            return None
        release = self.release()
        if "default_delivery_limit" in release:
            default = release["default_delivery_limit"]
        elif "quorum_default_delivery_limit" in self.config:  # recorded before the record
            default = self.config["quorum_default_delivery_limit"]
        else:
            return DEFAULT_QQ_DELIVERY_LIMIT
        return None if default is None else int(default)

    def requeue_counts_toward_limit(self) -> bool:
        """Whether a message given back by its consumer's `basic.nack`/`basic.reject`
        with requeue counts toward its queue's delivery limit, from the release record:
        up to 4.2 it does, in 4.3 it does not. Returns by the consumer's end (its
        channel or connection closed) count in every release; a run that recorded no
        record is taken as 4.0 to 4.2."""
        return bool(self.release().get("requeue_counts_toward_limit", True))

    def sac_fifo_queues(self) -> list[str]:
        """Single-active-consumer queues consumed with prefetch 1 (strict FIFO applies)."""
        return sorted(q for q, c in self.queues.items()
                      if c.get("sac") and int(c.get("prefetch") or 0) == 1)


@dataclass(frozen=True)
class FaultWindow:
    fault: str
    start_ns: int
    stop_ns: int
    closed_at_end: bool


def fault_windows(rows: list[dict[str, Any]], run_end_ns: int) -> list[FaultWindow]:
    """Pair each nemesis `start` with the next `stop` of the same fault type."""
    open_: dict[str, list[int]] = {}
    out: list[FaultWindow] = []
    for r in sorted(rows, key=lambda r: (r["ts_ns"], r.get("emitter") or "", r.get("seq") or 0)):
        fault = r.get("fault") or "?"
        if r["kind"] == "start":
            open_.setdefault(fault, []).append(r["ts_ns"])
        elif r["kind"] == "stop" and open_.get(fault):
            out.append(FaultWindow(fault, open_[fault].pop(0), r["ts_ns"], False))
    for fault, starts in open_.items():
        out.extend(FaultWindow(fault, s, max(s, run_end_ns), True) for s in starts)
    return sorted(out, key=lambda w: (w.start_ns, w.fault))


def last_fault_stop(windows: list[FaultWindow]) -> int | None:
    return max((w.stop_ns for w in windows), default=None)


def log_bucket(latency_ns: int) -> int:
    """Histogram bucket of a latency: floor(ln(ns) / ln(1.01)), <= 1% relative error."""
    return math.floor(math.log(max(latency_ns, 1)) / LOG_BASE)


def bucket_value_ms(bucket: int) -> float:
    """Lower bound of a bucket in milliseconds."""
    return math.exp(bucket * LOG_BASE) / 1e6


def rank_key(hist: dict[int, int], q: float) -> int:
    """The first key (in order) whose cumulative count reaches q*n: the q-quantile of a
    histogram `{value or bucket: count}` with at least one count."""
    rank = max(1, math.ceil(q * sum(hist.values())))
    seen = 0
    ordered = sorted(hist)
    for key in ordered:
        seen += hist[key]
        if seen >= rank:
            return key
    return ordered[-1]


def percentiles(hist: dict[int, int], qs: tuple[float, ...] = PERCENTILES) -> dict[str, float]:
    """Percentiles read from cumulative bucket counts: the first bucket reaching q*n."""
    if sum(hist.values()) == 0:
        return {}
    return {f"p{q * 100:g}": round(bucket_value_ms(rank_key(hist, q)), 6) for q in qs}


# -- verdicts -----------------------------------------------------------------------

def total_queue_status(counts: dict[str, int], drained: bool, drain_expected: bool) -> tuple[
        str, str]:
    """Jepsen's total-queue verdict: lost only counts once the queue was drained."""
    hard = counts.get("unexpected", 0) + counts.get("duplicated_beyond_redelivery", 0)
    if hard or (drained and counts.get("lost", 0)):
        return FAIL, ""
    if not drained:
        if drain_expected:
            return UNKNOWN, "no completed drain: lost messages cannot be decided"
        return PASS, "workload has no drain: lost not checked"
    notes = []
    if counts.get("dropped", 0):
        notes.append(f"{counts['dropped']} messages dropped by the last queue they reached "
                     "(rejected without requeue, returned past its delivery limit, expired, "
                     "over a length limit or purged, with no dead-letter target)")
    gone = [(counts.get("unroutable", 0), "returned unroutable"),
            (counts.get("deleted_with_queue", 0), "deleted with their queue"),
            (counts.get("lost_with_node", 0), "gone with a transient queue's or message's node")]
    notes += [f"{n} {what}" for n, what in gone if n]
    return PASS, ("; ".join(notes) + ": not lost") if notes else ""


def simple_status(n_violations: int, applicable: bool, why_skipped: str = "") -> tuple[str, str]:
    if not applicable:
        return SKIPPED, why_skipped
    return (FAIL if n_violations else PASS), ""


def unrecorded_note(counts: dict[str, int]) -> str:
    """What a replica check left undecided or excused (missing node data), for the verdict note."""
    parts = []
    if counts.get("unrecorded_decisions") or counts.get("unrecorded_deliveries"):
        parts.append(f"{counts.get('unrecorded_decisions', 0)} decisions and "
                     f"{counts.get('unrecorded_deliveries', 0)} client deliveries not "
                     "decidable: the sender's history has a hole (killed before its "
                     "recorder flushed)")
    if counts.get("unrecorded_indexes"):
        parts.append(f"{counts['unrecorded_indexes']} server indexes with decisions cut "
                     "short by a kill left out of decision agreement")
    if counts.get("resent_after_restart"):
        parts.append(f"{counts['resent_after_restart']} sends repeated by a restarted "
                     "member (effects above its persisted last_applied re-executed)")
    return "; ".join(parts)


def channel_fifo_note(counts: dict[str, int]) -> str:
    """First deliveries per-channel FIFO left out, for the verdict note."""
    n = counts.get("dead_lettered", 0)
    if not n:
        return ""
    return (f"{n} first deliveries of dead-lettered messages left out: they reached their "
            "queue by dead-lettering, not from the publishing channel")


def returns_note(counts: dict[str, int], n_violations: int) -> str:
    """What `ordering_returns` judged: pairs of messages one consumer's end returned
    together whose next deliveries went to one consumer."""
    pairs = counts.get("pairs", 0)
    judged = f"{pairs} pair{'' if pairs == 1 else 's'} returned together"
    if n_violations:
        head = f"{n_violations} of {judged} redelivered out of the order they were returned in"
    elif pairs:
        head = f"{judged} and redelivered to one consumer, all in order"
    else:
        head = "no pair returned together and redelivered to one consumer"
    return (f"{head} ({counts.get('returned', 0)} deliveries returned by their consumer's "
            f"end, {counts.get('traced', 0)} traced to their next delivery)")


def supervision_note(counts: dict[str, int]) -> str:
    """Ended actors `supervision_liveness` did not count, for the verdict note."""
    n = counts.get("excused", 0) + counts.get("excused_give_ups", 0)
    if not n:
        return ""
    return (f"{n} ended actors not counted: not permanent children, or under a supervisor "
            "that ended (gave up or was stopped) and is judged as its parent's child")


def dlx_status(counts: dict[str, int], applicable: bool, drained: bool) -> tuple[str, str]:
    if not applicable:
        return SKIPPED, "no at-least-once dead-lettering configured"
    if counts.get("dlx_lost", 0):
        return FAIL, ""
    if counts.get("dlx_pending", 0):
        if drained:
            return FAIL, "messages still in the discard backlog after drain"
        return UNKNOWN, "messages in the discard backlog and no completed drain"
    return PASS, ""


def exit_code(valid: bool | str) -> int:
    """0 when every check passed, 1 when any failed, 2 when none failed but some unknown."""
    if valid is True:
        return EXIT_PASS
    if valid is False:
        return EXIT_FAIL
    return EXIT_UNKNOWN
