"""Side by side: the end-to-end workload against warren modelling each RabbitMQ release.

``python bench/e2e.py --rabbitmq-version 3.10,4.0,4.2,4.3`` (or the option repeated)
starts, one after the other, a warren cluster whose nodes model each release
(``rabbitmq_version``: the quorum queue's machine version and every behaviour tagged
by release); first it fills a queue with ``--memory-messages`` persistent 16-byte
messages, nobody consuming, and reads each node's RSS growth per queued message as
``bench/memory.py`` does, then deletes that queue and runs the same phases as
``bench/e2e.py`` does (``0`` skips that; a release that refuses the queue, such
as 4.3 a transient classic one, gets ``memory_error`` instead). When a RabbitMQ server is installed
(``--rabbitmq auto|yes|no`` as for one release), its three nodes are measured the
same way after warren's clusters, as the reference.

Prints each phase as it ends, then one table: a column per release (and the
reference), a line per figure; the last line is one JSON object keyed by release
(``"3.10"``, ...; the reference as ``"rabbitmq-<version>"``), each holding the
release's figures as ``bench/e2e.py`` names them plus ``machine_version`` and the
memory figures. Figures of runs: docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from bench import e2e, memory
from releases import RELEASES

__all__ = ["TABLE", "parse_versions", "report", "run_side_by_side", "table"]

#: how long the memory fill waits before reading RSS, and its confirm window
MEMORY_SETTLE_S = 3.0
MEMORY_WINDOW = 1000

#: figure -> its label in the side-by-side table, in the table's order
TABLE: dict[str, str] = {
    "machine_version": "rabbit_fifo machine",
    "msgs_s_16b": "16 B msg/s confirmed",
    "consumer_msgs_s_16b": "16 B msg/s consumed",
    "confirm_p50_ms_w256": "16 B confirm p50 ms",
    "confirm_p99_ms_w256": "16 B confirm p99 ms",
    "msgs_s_16b_transient": "16 B transient msg/s",
    "msgs_s_1k": "1 KiB msg/s confirmed",
    "confirm_p50_ms_w256_1k": "1 KiB confirm p50 ms",
    "confirm_p99_ms_w256_1k": "1 KiB confirm p99 ms",
    "confirm_p50_ms_w1": "window 1 confirm p50 ms",
    "confirm_p99_ms_w1": "window 1 confirm p99 ms",
    "bytes_per_msg_leader": "RSS B/msg, leader",
    "bytes_per_msg_follower_max": "RSS B/msg, follower max",
    "bytes_per_msg_home": "RSS B/msg, home node",
}


def parse_versions(values: list[str]) -> list[str]:
    """The releases of ``--rabbitmq-version`` (repeated or comma separated), in the
    order given, each once; ValueError names one that warren does not model."""
    out: list[str] = []
    for value in values:
        for v in (p.strip() for p in value.split(",")):
            if not v:
                continue
            if v not in RELEASES:
                raise ValueError(f"{v!r} is not a release warren models "
                                 f"(one of {', '.join(RELEASES)})")
            if v not in out:
                out.append(v)
    if not out:
        raise ValueError("name at least one release")
    return out


def _memory(target: e2e.Target, count: int) -> dict[str, Any]:
    """RSS growth per queued message on each node of `target`, `count` messages in."""
    if count <= 0:
        return {}
    try:
        rows = memory.measure(target, [count], MEMORY_WINDOW, MEMORY_SETTLE_S)
    except RuntimeError as exc:
        # a release may refuse the queue (4.3 denies transient non-exclusive
        # classic queues): the phases' figures stand without it
        print(f"  memory not measured: {exc}", flush=True)
        return {"memory_error": str(exc).splitlines()[0][:200]}
    return memory.headline(rows)


def _one(target_cm: AbstractContextManager[e2e.Target], phases: list[e2e.Phase],
         args: argparse.Namespace, root: Path) -> tuple[str, dict[str, Any]]:
    """The target's label and its figures: the memory fill first, while the nodes'
    heaps hold only what starting took (after the phases, memory they freed would be
    reused and the growth understated), its queue deleted, then every phase."""
    with target_cm as target:
        target.queue_type = args.queue_type
        mem = _memory(target, args.memory_messages)
        if args.memory_messages > 0:
            e2e.delete(target.publisher_url, memory.QUEUE)
        figures = e2e.figures(e2e.measure(target, phases, args, root))
        return target.label, {**figures, **mem}


def run_side_by_side(args: argparse.Namespace, versions: list[str], phases: list[e2e.Phase],
                     ra: dict[str, Any], want_rabbit: bool, root: Path,
                     ) -> dict[str, dict[str, Any]]:
    """Each release's figures (a fresh cluster each), then the reference's if wanted,
    keyed ``rabbitmq-<version>``."""
    out: dict[str, dict[str, Any]] = {}
    for v in versions:
        print(f"--- warren modelling RabbitMQ {v}", flush=True)
        cluster = e2e.warren_cluster(root / v, args.nodes, ra, args.record, v)
        _label, figures = _one(cluster, phases, args, root)
        out[v] = {"machine_version": RELEASES[v].machine_version, **figures}
    if want_rabbit:
        print("--- RabbitMQ (the reference)", flush=True)
        try:
            label, figures = _one(e2e.rabbit_target(root / "rabbitmq", args.nodes, ra),
                                  phases, args, root)
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            if args.rabbitmq == "yes":
                raise
            print(f"RabbitMQ reference not measured: {exc}", flush=True)
        else:
            # "RabbitMQ 3.10.8 (3 nodes, local)" -> "rabbitmq-3.10.8"
            out[f"rabbitmq-{label.split()[1]}"] = figures
    return out


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.0f}" if value >= 100 else f"{value:.2f}"
    return str(value)


def table(results: dict[str, dict[str, Any]]) -> str:
    """A column per release, a line per figure any of them has."""
    rows = [["figure", *results]]
    for key, label in TABLE.items():
        if any(key in r for r in results.values()):
            rows.append([label, *(_cell(r.get(key)) for r in results.values())])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths, strict=True)))
                     for r in rows)


def report(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> str:
    """The JSON line: the figures keyed by release, each with how it was measured."""
    settings = {"queue_type": args.queue_type, "seconds": args.seconds,
                "warmup": args.warmup, "nodes": args.nodes,
                "memory_messages": args.memory_messages}
    return json.dumps({k: {**v, **settings} for k, v in results.items()})
