"""Side by side: the end-to-end workload against warren modelling each RabbitMQ release.

``python bench/e2e.py --rabbitmq-version 3.10,4.0,4.2,4.3`` (or the option repeated)
starts, one after the other, a warren cluster whose nodes model each release
(``rabbitmq_version``: the quorum queue's machine version and every behaviour tagged
by release); first it fills a queue with ``--memory-messages`` persistent 16-byte
messages, nobody consuming, and reads each node's RSS growth per queued message as
``bench/memory.py`` does, then deletes that queue and runs the same phases as
``bench/e2e.py`` does (``0`` skips that; a release that refuses the queue, such
as 4.3 a transient classic one, gets ``memory_error`` instead).

Each release is measured beside a real RabbitMQ of the same release when this
machine runs one, measured the same way in the same run: 3.10 beside the installed
``rabbitmq-server`` (Debian 12's 3.10.8, ``bench/rabbitmq_local.py``), 4.0 beside
Debian 13's 4.0.5 in its chroot (``bench/rabbitmq4.py``; root only, built the first
time with network access). A release with no real counterpart here (4.2, 4.3) is
measured beside the nearest one (4.0.5), and the output says so. Each real broker
runs once, right after the releases measured beside it (``3.10``, RabbitMQ 3.10.8,
then ``4.0``, ``4.2``, ``4.3``, RabbitMQ 4.0.5), so a pair is minutes apart.
``--rabbitmq no`` measures warren only; ``yes`` fails when a reference fails to start.

Prints each phase as it ends, then one table: a column per release and real broker,
a line per figure, then each release's ratios to its reference (warren's figure over
the real broker's: a throughput below 1 is slower, a latency or memory above 1 more);
the last line is one JSON object keyed by release (``"3.10"``, ...; a real broker as
``"rabbitmq-<version>"``), each holding the release's figures as ``bench/e2e.py``
names them plus ``machine_version``, the memory figures, ``reference`` (the key of
the real broker it was measured beside), ``reference_same_release`` and the
``ratio_*`` figures. Figures of runs: docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import e2e, memory, rabbitmq4, rabbitmq_local
from releases import RELEASES

__all__ = ["TABLE", "Reference", "parse_versions", "plan", "ratios", "reference_for",
           "report", "run_side_by_side", "table"]

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
    "reference": "beside",
    "ratio_msgs_s_16b": "16 B msg/s confirmed / ref",
    "ratio_consumer_msgs_s_16b": "16 B msg/s consumed / ref",
    "ratio_msgs_s_16b_transient": "16 B transient msg/s / ref",
    "ratio_msgs_s_1k": "1 KiB msg/s confirmed / ref",
    "ratio_confirm_p50_ms_w1": "window 1 p50 / ref",
    "ratio_bytes_per_msg_leader": "RSS B/msg leader / ref",
    "ratio_bytes_per_msg_follower_max": "RSS B/msg follower / ref",
    "ratio_bytes_per_msg_home": "RSS B/msg home / ref",
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


@contextmanager
def rabbit4_target(root: Path, nodes: int,
                   ra: dict[str, Any] | None = None) -> Iterator[e2e.Target]:
    """A RabbitMQ 4.0.5 cluster of `nodes` in the Debian 13 chroot (`bench.rabbitmq4`),
    as a target like warren's. `root` is unused: its data lives in the chroot."""
    started = time.monotonic()
    with rabbitmq4.rabbitmq4_cluster(nodes, ra=ra) as rabbit:
        version = rabbit.version()
        print(f"RabbitMQ {version}: {nodes} nodes ready in "
              f"{time.monotonic() - started:.1f} s (Debian 13 chroot)", flush=True)
        yield e2e.Target(f"RabbitMQ {version} ({nodes} nodes, chroot)", rabbit.urls,
                         other_nodes={f"node-{i}": pid for i, pid in
                                      enumerate(rabbit.vm_pids(), start=1)})


@dataclass(frozen=True)
class Reference:
    """A real RabbitMQ release this machine can run, to measure a release beside."""

    series: str
    version: str
    start: Callable[[Path, int, dict[str, Any] | None],
                    AbstractContextManager[e2e.Target]]

    @property
    def key(self) -> str:
        """Its column and key in the last line: ``rabbitmq-4.0.5``."""
        return f"rabbitmq-{self.version}"


def references() -> list[Reference]:
    """The real releases this machine can run: the installed ``rabbitmq-server``
    (Debian 12's 3.10.8) and Debian 13's 4.0.5 in its chroot (root only)."""
    out: list[Reference] = []
    if rabbitmq_local.available():
        version = rabbitmq_local.installed_version() or "3.10.8"
        out.append(Reference(_series(version), version, e2e.rabbit_target))
    if rabbitmq4.available():
        out.append(Reference("4.0", "4.0.5", rabbit4_target))
    return out


def _series(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _numbers(series: str) -> tuple[int, int]:
    major, minor = (int(p) for p in series.split(".")[:2])
    return major, minor


def reference_for(release: str, refs: list[Reference]) -> Reference | None:
    """The real release to put `release` beside: its own series when one runs here,
    else the nearest (the same major release first, then the closest minor)."""
    if not refs:
        return None
    major, minor = _numbers(release)

    def distance(ref: Reference) -> tuple[int, int]:
        m, n = _numbers(ref.series)
        return abs(m - major), abs(n - minor)

    return min(refs, key=distance)


def plan(versions: list[str], refs: list[Reference]
         ) -> list[tuple[list[str], Reference | None]]:
    """The order of the run: each reference right after the releases measured beside
    it (in the order given), so a pair is measured minutes apart, not an hour."""
    groups: dict[str, tuple[list[str], Reference | None]] = {}
    for v in versions:
        ref = reference_for(v, refs)
        groups.setdefault(ref.key if ref else "", ([], ref))[0].append(v)
    return list(groups.values())


def run_side_by_side(args: argparse.Namespace, versions: list[str], phases: list[e2e.Phase],
                     ra: dict[str, Any], want_rabbit: bool, root: Path,
                     ) -> dict[str, dict[str, Any]]:
    """Each release's figures (a fresh cluster each), each real release's after the
    releases measured beside it (keyed ``rabbitmq-<version>``), and each release's
    ratios to its reference."""
    out: dict[str, dict[str, Any]] = {}
    refs = references() if want_rabbit else []
    for releases, ref in plan(versions, refs):
        for v in releases:
            beside = ("" if ref is None else f" (beside RabbitMQ {ref.version}"
                      + ("" if ref.series == v else ", the nearest real release measured")
                      + ")")
            print(f"--- warren modelling RabbitMQ {v}{beside}", flush=True)
            cluster = e2e.warren_cluster(root / v, args.nodes, ra, args.record, v)
            _label, figures = _one(cluster, phases, args, root)
            out[v] = {"machine_version": RELEASES[v].machine_version, **figures}
        if ref is None:
            continue
        print(f"--- RabbitMQ {ref.version} (the reference of {', '.join(releases)})",
              flush=True)
        try:
            _label, figures = _one(ref.start(root / ref.key, args.nodes, ra),
                                   phases, args, root)
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            if args.rabbitmq == "yes":
                raise
            print(f"RabbitMQ {ref.version} not measured: {exc}", flush=True)
            continue
        out[ref.key] = figures
        for v in releases:
            out[v].update(reference=ref.key, reference_same_release=ref.series == v,
                          **ratios(out[v], figures))
    return out


#: figure -> its ratio's name; warren's over the reference's (latency and memory:
#: how many times the reference's, throughput: what fraction of it)
RATIOS: dict[str, str] = {
    "msgs_s_16b": "ratio_msgs_s_16b",
    "consumer_msgs_s_16b": "ratio_consumer_msgs_s_16b",
    "msgs_s_16b_transient": "ratio_msgs_s_16b_transient",
    "msgs_s_1k": "ratio_msgs_s_1k",
    "confirm_p50_ms_w1": "ratio_confirm_p50_ms_w1",
    "bytes_per_msg_leader": "ratio_bytes_per_msg_leader",
    "bytes_per_msg_follower_max": "ratio_bytes_per_msg_follower_max",
    "bytes_per_msg_home": "ratio_bytes_per_msg_home",
}


def ratios(ours: dict[str, Any], ref: dict[str, Any]) -> dict[str, float]:
    """Each figure of `RATIOS` both have, warren's over the reference's."""
    return {name: round(ours[key] / ref[key], 3) for key, name in RATIOS.items()
            if isinstance(ours.get(key), (int, float)) and isinstance(ref.get(key), (int, float))
            and ref[key] > 0}


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
