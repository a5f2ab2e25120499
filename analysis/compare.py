"""Runs of one scenario side by side: what each release made of the same workload.

A scenario run under each RabbitMQ release warren models (`warren scenario run NAME
--rabbitmq-version V`) records the same client operations; what differs is how fast
the broker took them, how much memory it held per queued message, and what the
consumers saw: how often a requeued message came back, which `x-delivery-count` each
delivery carried, where in the stream a requeued message was redelivered, and whether
the broker itself removed it (a delivery limit) before the consumer gave up on it.

Pure: every function takes recorded rows (`RunOps`) and returns values, so the
comparison is tested without a cluster or a file; `analysis.compare_load` reads a
run directory into a `RunOps` and `analysis.compare_report` renders the result.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Comparison", "Delivery", "Op", "RunOps", "RunSummary", "Sample", "compare",
           "summarize"]

NS_PER_S = 1_000_000_000
NS_PER_MS = 1_000_000
#: below this many queued messages RSS growth per message is noise: not reported
MIN_BACKLOG = 200
#: messages whose deliveries differ, listed by example in a comparison
EXAMPLES = 5


@dataclass(frozen=True)
class Op:
    """One workload client operation (a `client_ops` row), the fields compared."""

    kind: str
    ts_ns: int
    msg_id: int | None = None
    client: str = ""
    redelivered: bool | None = None
    delivery_count: int | None = None
    requeue: bool | None = None


@dataclass(frozen=True)
class Sample:
    """One resource sample of a broker node (its resident set)."""

    ts_ns: int
    node: str
    rss_bytes: int


@dataclass(frozen=True)
class RunOps:
    """What a run recorded that the comparison reads; `label` names the run in the
    report (its release, such as ``4.3``)."""

    label: str
    run_id: str
    scenario: str
    ops: tuple[Op, ...]
    samples: tuple[Sample, ...] = ()


@dataclass(frozen=True)
class Delivery:
    """One delivery of a message as its consumer saw it."""

    delivery_count: int | None
    redelivered: bool


@dataclass
class RunSummary:
    """One run's figures (a row of the comparison)."""

    label: str
    run_id: str
    scenario: str
    published: int
    confirmed: int
    acked: int
    deliveries: int
    confirmed_msgs_s: float | None
    confirm_p50_ms: float | None
    confirm_p99_ms: float | None
    end_to_end_p50_ms: float | None
    end_to_end_p99_ms: float | None
    #: RSS growth of the most grown broker node at the largest backlog, per message
    bytes_per_queued_msg: float | None
    peak_backlog: int
    #: messages a consumer rejected or nacked with requeue at least once
    requeued_msgs: int
    #: of those, the ones no consumer ever acked (the broker removed them)
    requeued_removed_by_broker: int
    max_deliveries_per_msg: int
    #: deliveries of other messages between a requeue and the message's next
    #: delivery: 0 when a requeued message comes back first, large when it
    #: goes to the back of the queue
    requeue_distance_median: float | None
    requeue_distance_max: int | None
    #: `x-delivery-count` on a first delivery (None: the header is absent)
    first_delivery_count: int | None
    #: per message, every delivery in order (what the consumers saw)
    per_message: dict[int, tuple[Delivery, ...]] = field(repr=False, default_factory=dict)
    #: messages the consumers acked
    acked_ids: frozenset[int] = field(repr=False, default_factory=frozenset)

    def figures(self) -> dict[str, Any]:
        """The row without the per-message detail (what compare.json holds)."""
        return {k: v for k, v in vars(self).items() if k not in ("per_message", "acked_ids")}


@dataclass
class Comparison:
    """Every run's summary, and the differences between them as sentences."""

    rows: list[RunSummary]
    #: figure name -> value per run label, for the delivery figures that differ
    differing: dict[str, dict[str, Any]]
    #: message -> per run label, its `x-delivery-count` sequence and fate, for the
    #: first `EXAMPLES` messages whose deliveries differ
    examples: dict[int, dict[str, str]]
    #: how many messages delivered in every run were delivered differently
    messages_differing: int
    messages_compared: int


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def _latencies(ops: list[Op], start_kind: str, end_kind: str) -> list[float]:
    """Milliseconds from each message's first `start_kind` to its first `end_kind`."""
    start: dict[int, int] = {}
    end: dict[int, int] = {}
    for op in ops:
        if op.msg_id is None:
            continue
        if op.kind == start_kind:
            start.setdefault(op.msg_id, op.ts_ns)
        elif op.kind == end_kind:
            end.setdefault(op.msg_id, op.ts_ns)
    return [(end[m] - start[m]) / NS_PER_MS for m in end if m in start]


def _backlog_memory(ops: list[Op], samples: tuple[Sample, ...]) -> tuple[float | None, int]:
    """RSS growth per queued message of the most grown node when the most
    messages were queued (confirmed, not yet acked), read at the samples."""
    if not samples:
        return None, 0
    events = sorted((op.ts_ns, +1 if op.kind == "confirm" else -1) for op in ops
                    if op.kind in ("confirm", "ack") and op.msg_id is not None)
    by_node: dict[str, list[Sample]] = defaultdict(list)
    for s in sorted(samples, key=lambda s: s.ts_ns):
        by_node[s.node].append(s)
    times = sorted({s.ts_ns for s in samples})
    backlog, i, best_t, best = 0, 0, None, 0
    for t in times:
        while i < len(events) and events[i][0] <= t:
            backlog += events[i][1]
            i += 1
        if backlog > best:
            best_t, best = t, backlog
    if best_t is None or best < MIN_BACKLOG:
        return None, best
    growth = []
    for rows in by_node.values():
        at = [s.rss_bytes for s in rows if s.ts_ns <= best_t]
        if at:
            growth.append(at[-1] - rows[0].rss_bytes)
    return (round(max(growth) / best, 1) if growth else None), best


def _requeue_distances(ops: list[Op]) -> list[int]:
    """For each requeue, deliveries of other messages before the message's next one."""
    waiting: dict[int, int] = {}  # msg_id -> deliveries seen since its requeue
    out: list[int] = []
    for op in ops:
        if op.msg_id is None:
            continue
        if op.kind in ("reject", "nack") and op.requeue:
            waiting[op.msg_id] = 0
        elif op.kind == "deliver":
            if op.msg_id in waiting:
                out.append(waiting.pop(op.msg_id))
            for m in waiting:
                waiting[m] += 1
    return out


def summarize(run: RunOps) -> RunSummary:
    """One run's figures from its client operations and node samples."""
    ops = sorted(run.ops, key=lambda o: o.ts_ns)
    kinds: dict[str, set[int]] = defaultdict(set)
    per_message: dict[int, list[Delivery]] = defaultdict(list)
    for op in ops:
        if op.msg_id is None:
            continue
        kinds[op.kind].add(op.msg_id)
        if op.kind == "deliver":
            per_message[op.msg_id].append(Delivery(op.delivery_count, bool(op.redelivered)))
    requeued = {op.msg_id for op in ops if op.kind in ("reject", "nack") and op.requeue
                and op.msg_id is not None}
    confirms = [op.ts_ns for op in ops if op.kind == "confirm"]
    publishes = [op.ts_ns for op in ops if op.kind == "publish"]
    span_s = ((max(confirms) - min(publishes)) / NS_PER_S) if confirms and publishes else 0.0
    confirm_lat = _latencies(ops, "publish", "confirm")
    e2e_lat = _latencies(ops, "publish", "deliver")
    memory, backlog = _backlog_memory(ops, run.samples)
    distances = _requeue_distances(ops)
    firsts = [d[0].delivery_count for d in per_message.values() if d]
    return RunSummary(
        label=run.label, run_id=run.run_id, scenario=run.scenario,
        published=len(kinds["publish"]), confirmed=len(kinds["confirm"]),
        acked=len(kinds["ack"]), deliveries=sum(len(d) for d in per_message.values()),
        confirmed_msgs_s=round(len(confirms) / span_s, 1) if span_s > 0 else None,
        confirm_p50_ms=_percentile(confirm_lat, 0.5), confirm_p99_ms=_percentile(confirm_lat, 0.99),
        end_to_end_p50_ms=_percentile(e2e_lat, 0.5), end_to_end_p99_ms=_percentile(e2e_lat, 0.99),
        bytes_per_queued_msg=memory, peak_backlog=backlog,
        requeued_msgs=len(requeued),
        requeued_removed_by_broker=len(requeued - kinds["ack"]),
        max_deliveries_per_msg=max((len(d) for d in per_message.values()), default=0),
        requeue_distance_median=(None if not distances
                                 else float(sorted(distances)[len(distances) // 2])),
        requeue_distance_max=max(distances, default=None),
        first_delivery_count=Counter(firsts).most_common(1)[0][0] if firsts else None,
        per_message={m: tuple(d) for m, d in per_message.items()},
        acked_ids=frozenset(kinds["ack"]),
    )


#: delivery figures whose difference between runs is a difference in behaviour
#: (throughput, latency and memory always differ a little: they are shown, not listed)
BEHAVIOUR = ("first_delivery_count", "requeued_msgs", "requeued_removed_by_broker",
             "max_deliveries_per_msg", "requeue_distance_median")


def describe(deliveries: tuple[Delivery, ...], acked: bool) -> str:
    """A message's deliveries as its `x-delivery-count` values, runs of consecutive
    counts shortened (``-, 1..20``), then its fate."""
    counts = [d.delivery_count for d in deliveries]

    def follows(a: int | None, b: int | None) -> bool:
        return a is not None and b is not None and b == a + 1

    parts: list[str] = []
    i = 0
    while i < len(counts):
        j = i
        while j + 1 < len(counts) and follows(counts[j], counts[j + 1]):
            j += 1
        first = "-" if counts[i] is None else str(counts[i])
        parts.append(first if j - i < 2 else f"{first}..{counts[j]}")
        if j - i == 1:
            parts.append(str(counts[j]))
        i = j + 1
    fate = "acked" if acked else "not acked"
    return f"{len(counts)} deliveries (x-delivery-count {', '.join(parts)}), {fate}"


def compare(runs: list[RunOps]) -> Comparison:
    """Every run summarised; the delivery figures that differ between them; and the
    messages delivered in every run whose deliveries or fate differ, by example."""
    rows = [summarize(r) for r in runs]
    differing: dict[str, dict[str, Any]] = {}
    for name in BEHAVIOUR:
        values = {row.label: getattr(row, name) for row in rows}
        if len({repr(v) for v in values.values()}) > 1:
            differing[name] = values
    common = set.intersection(*(set(r.per_message) for r in rows)) if rows else set()
    differ = []
    for m in sorted(common):
        seen = {(tuple(d.delivery_count for d in r.per_message[m]), m in r.acked_ids)
                for r in rows}
        if len(seen) > 1:
            differ.append(m)
    examples = {m: {r.label: describe(r.per_message[m], m in r.acked_ids) for r in rows}
                for m in differ[:EXAMPLES]}
    return Comparison(rows, differing, examples, len(differ), len(common))
