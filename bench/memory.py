"""Memory per queued message: one queue filled on three nodes, RSS per node.

A quorum queue's backlog should cost each member its machine state and a bounded
window of recent log entries, not the messages themselves: those live in the Ra
log's segments on disk once the segment writer has flushed them. This bench fills
one quorum queue (declared on node 1, its leader under ``client-local``) on a local
three-node warren cluster (``harness.cluster``, disk data dirs) with persistent
16-byte messages (``delivery_mode`` 2) from one pika publisher with confirms (at
most ``--window`` unconfirmed), nobody consuming. At each count of ``--counts``
(cumulative: 100k, then on to 1M) it waits ``--settle`` seconds and reads every
node process's resident set (``VmRSS``); the figure is its growth since the queue
was declared, divided by the messages in the queue, for the leader and the
followers. The fill rate is confirmed messages per second over the whole fill.

``--queue-type classic`` fills a non-durable classic queue (declared on node 1, its
home node) with transient 16-byte messages instead: a classic queue holds such
messages in its process's memory, on its home node only, so the figure is the home
node's (``bytes_per_msg_home``; the other nodes' growth is printed too).

When a RabbitMQ server is installed (Debian's ``rabbitmq-server``, 3.10.8 on
bookworm; no dependency of warren), three RabbitMQ nodes on loopback
(``bench/rabbitmq_local.py``) are measured the same way in the same run, after
warren (``--rabbitmq no`` skips them, ``yes`` requires them). Their queue is
declared on node 1 too, which makes that node the leader (or the home node).

Usage: ``python bench/memory.py [--queue-type quorum|classic] [--counts
100000,1000000] [--window 1000] [--settle 5] [--rabbitmq auto|yes|no] [--ra
KEY=VALUE ...]``

Prints one line per count and target, and last one JSON object with, for the
largest count, ``bytes_per_msg_leader`` and ``bytes_per_msg_follower_max`` (quorum)
or ``bytes_per_msg_home`` (classic), and ``fill_msgs_s`` (warren), a ``reference``
object with the same keys (RabbitMQ, or null), and ``per_count`` with every count's
figures. Figures of runs are written up in docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pika
import pika.spec
from pika.adapters.select_connection import IOLoop

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import rabbitmq_local
from bench.e2e import QUEUE_TYPES, Target, declare, ra_settings, rabbit_target, warren_cluster

QUEUE = "bench-memory"
BODY = b"0123456789abcdef"  # 16 bytes
#: a fill that makes no progress for this long has failed
STALL_S = 120.0


def rss_bytes(pid: int) -> int:
    """Resident set of process `pid` (``VmRSS``), in bytes; 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class Filler:
    """A pika ``SelectConnection`` publisher: `count` messages (persistent unless
    `delivery_mode` is 1) to the default exchange with at most `window` unconfirmed;
    returns once all are confirmed."""

    def __init__(self, url: str, queue: str, window: int, delivery_mode: int = 2) -> None:
        self.params = pika.URLParameters(url)
        self.queue = queue
        self.window = window
        self.ioloop = IOLoop()
        self.channel: Any = None
        self.published = 0
        self.confirmed = 0
        self.target = 0
        self.error: str | None = None
        self._watchdog: Any = None
        self.props = pika.BasicProperties(delivery_mode=delivery_mode)
        self.conn = pika.SelectConnection(
            self.params, on_open_callback=self._on_open,
            on_open_error_callback=lambda _c, err: self._fail(f"connect: {err!r}"),
            on_close_callback=lambda _c, why: self._fail(f"closed: {why!r}"),
            custom_ioloop=self.ioloop)
        self.ioloop.start()  # returns once confirms are selected
        if self.error:
            raise RuntimeError(self.error)

    def _fail(self, why: str) -> None:
        self.error = self.error or why
        self.ioloop.stop()

    def _on_open(self, conn: Any) -> None:
        conn.channel(on_open_callback=self._on_channel)

    def _on_channel(self, channel: Any) -> None:
        self.channel = channel
        channel.add_on_close_callback(lambda _ch, why: self._fail(f"channel: {why!r}"))
        channel.confirm_delivery(self._on_confirm, callback=lambda _f: self.ioloop.stop())

    def _on_confirm(self, frame: Any) -> None:
        method = frame.method
        if isinstance(method, pika.spec.Basic.Nack):
            self._fail(f"nack {method.delivery_tag}")
            return
        tag = method.delivery_tag
        self.confirmed = tag if method.multiple else self.confirmed + 1
        if self.confirmed >= self.target:
            self.ioloop.stop()
        else:
            self._publish()

    def _publish(self) -> None:
        while self.published < self.target and self.published - self.confirmed < self.window:
            self.channel.basic_publish("", self.queue, BODY, self.props)
            self.published += 1

    def fill_to(self, target: int) -> None:
        """Publish until `target` messages in all are confirmed."""
        self.target = target
        self._watch(-1)
        self.ioloop.add_callback_threadsafe(self._publish)
        self.ioloop.start()
        self.ioloop.remove_timeout(self._watchdog)
        if self.error:
            raise RuntimeError(self.error)

    def _watch(self, seen: int) -> None:
        """Fail once no confirm has come for `STALL_S` seconds."""
        if self.confirmed == seen:
            self._fail(f"no confirm for {STALL_S:.0f} s at {seen}")
            return
        now = self.confirmed
        self._watchdog = self.ioloop.call_later(STALL_S, lambda: self._watch(now))

    def close(self) -> None:
        if self.conn.is_open:
            self.conn.close()
            self.ioloop.start()


def roles(target: Target) -> dict[str, int]:
    """Node pids by role: warren knows a quorum queue's leader; RabbitMQ's is node 1
    (declared there); a classic queue's home node is node 1 on both."""
    pids = target.node_pids(QUEUE)
    if target.cluster is None and target.queue_type == "quorum":
        ordered = [pids[role] for role in sorted(pids)]
        return {"leader": ordered[0],
                **{f"follower-{n}": pid for n, pid in enumerate(ordered[1:], start=1)}}
    return pids


def measure(target: Target, counts: list[int], window: int,
            settle_s: float) -> list[dict[str, Any]]:
    """Fill one queue to each count in turn; RSS growth per message per node at each.

    A quorum queue is filled with persistent messages; a classic one is declared
    non-durable and filled with transient messages, which it keeps in memory."""
    classic = target.queue_type == "classic"
    declare(target.publisher_url, QUEUE, target.queue_type, durable=not classic)
    time.sleep(settle_s)
    pids = roles(target)
    base = {role: rss_bytes(pid) for role, pid in pids.items()}
    filler = Filler(target.publisher_url, QUEUE, window, delivery_mode=1 if classic else 2)
    out: list[dict[str, Any]] = []
    started = time.monotonic()
    fill_s = 0.0
    try:
        for count in counts:
            t0 = time.monotonic()
            filler.fill_to(count)
            fill_s += time.monotonic() - t0
            time.sleep(settle_s)
            per_node = {role: round((rss_bytes(pid) - base[role]) / count, 1)
                        for role, pid in pids.items()}
            row: dict[str, Any] = {"messages": count}
            if classic:
                row["bytes_per_msg_home"] = per_node.get("home")
            else:
                followers = [v for role, v in per_node.items() if role != "leader"]
                row["bytes_per_msg_leader"] = per_node.get("leader")
                row["bytes_per_msg_follower_max"] = max(followers) if followers else None
            row["bytes_per_msg_by_node"] = per_node
            row["fill_msgs_s"] = round(count / fill_s, 1)
            out.append(row)
            print(f"{target.label}: {count} messages in {time.monotonic() - started:.0f} s; "
                  f"RSS growth per message {per_node}; fill {row['fill_msgs_s']} msg/s",
                  flush=True)
    finally:
        filler.close()
    return out


def headline(rows: list[dict[str, Any]]) -> dict[str, Any]:
    last = rows[-1]
    return {k: last[k] for k in ("bytes_per_msg_leader", "bytes_per_msg_follower_max",
                                 "bytes_per_msg_home", "fill_msgs_s", "messages")
            if k in last}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queue-type", choices=QUEUE_TYPES, default="quorum",
                        help="quorum: persistent messages in a quorum queue; classic: "
                             "transient messages in a non-durable classic queue")
    parser.add_argument("--counts", default="100000,1000000",
                        help="comma-separated message counts, increasing (cumulative)")
    parser.add_argument("--window", type=int, default=1000, help="unconfirmed at most")
    parser.add_argument("--settle", type=float, default=5.0,
                        help="seconds to wait before each RSS reading")
    parser.add_argument("--rabbitmq", choices=("auto", "yes", "no"), default="auto")
    parser.add_argument("--ra", action="append", default=[], metavar="KEY=VALUE",
                        help="a Ra system setting for warren's nodes (repeatable)")
    parser.add_argument("--dir", default=None, help="where data dirs and logs go")
    args = parser.parse_args()
    try:
        counts = [int(c) for c in args.counts.split(",") if c]
        ra = ra_settings(args.ra)
    except ValueError as exc:
        parser.error(str(exc))
    if not counts or counts != sorted(set(counts)) or counts[0] < 1:
        parser.error("--counts: positive, increasing")
    if args.rabbitmq == "yes" and not rabbitmq_local.available():
        parser.error("--rabbitmq yes: rabbitmq-server is not installed")
    want_rabbit = args.rabbitmq == "yes" or (args.rabbitmq == "auto"
                                             and rabbitmq_local.available())
    root = Path(tempfile.mkdtemp(prefix="warren-bench-memory-", dir=args.dir))
    reference_rows: list[dict[str, Any]] | None = None
    try:
        with warren_cluster(root, 3, ra) as target:
            target.queue_type = args.queue_type
            rows = measure(target, counts, args.window, args.settle)
        if want_rabbit:
            try:
                with rabbit_target(root / "rabbitmq", 3) as rabbit:
                    rabbit.queue_type = args.queue_type
                    reference_rows = measure(rabbit, counts, args.window, args.settle)
            except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
                if args.rabbitmq == "yes":
                    raise
                print(f"RabbitMQ reference not measured: {exc}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    out: dict[str, Any] = {
        "queue_type": args.queue_type, **headline(rows),
        "reference": headline(reference_rows) if reference_rows else None,
        "per_count": {"warren": rows, "rabbitmq": reference_rows},
        "body_bytes": len(BODY), "window": args.window, "settle_s": args.settle, "ra": ra,
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
