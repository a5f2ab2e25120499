"""WAL throughput: many Ra writers sharing one `ra_log_wal`, against one fsync per entry.

N writer processes (default 3 and 30) each keep a window of single-entry
appends in flight to one WAL process, as pipelining Ra leaders do, for a fixed
time. The WAL batches whatever accumulated in its mailbox into one write and
one fdatasync. Reported per N: entries/s, mean entries per batch, fsyncs/s,
and the ratio against a reference measured in the same run: a naive loop that
writes and fdatasyncs every entry on its own (same record encoding, same
directory, so the same disk).

Usage: ``python bench/wal.py [--writers 3,30] [--seconds 2] [--payload 256]
[--window 64] [--dir DIR]``. The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import actors
from actors import Node, trace
from ra import seq as ra_seq
from ra import wal as ra_wal
from ra import wal_file


class CountingFsync:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, fd: int) -> None:
        self.calls += 1
        os.fdatasync(fd)


def _writer(uid: str, window: int, stop_at: float, payload: bytes, parent: actors.Pid) -> None:
    me = actors.self()
    idx = inflight = acked = 0
    while True:
        if time.monotonic() < stop_at:
            while inflight < window:
                idx += 1
                ra_wal.append(ra_wal.WAL_NAME, uid, me, [(idx, 1, payload)])
                inflight += 1
        elif inflight == 0:
            break
        msg = actors.receive()
        if msg[0] == "ra_log_event" and msg[1][0] == "written":
            n = ra_seq.length(msg[1][2])
            acked += n
            inflight -= n
    actors.send(parent, ("done", uid, acked))


def run_wal(root: str, writers: int, seconds: float, payload: bytes, window: int) -> dict[str, Any]:
    batches: list[int] = []
    previous = trace.set_sink(
        lambda kind, f: batches.append(f["entries"]) if kind == "ra_wal_batch" else None)
    fsync = CountingFsync()
    node = Node(f"bench_wal{writers}@127.0.0.1:1").start()
    try:
        with node.attached():
            cfg = ra_wal.WalConfig(dir=os.path.join(root, f"wal{writers}"), fsync=fsync,
                                   segment_writer=None)
            ok, wal_pid = ra_wal.start_link(cfg)
            assert ok == "ok"
            me = actors.self()
            started = time.monotonic()
            stop_at = started + seconds
            for n in range(writers):
                actors.spawn(_writer, f"uid{n}", window, stop_at, payload, me)
            total = 0
            for _ in range(writers):
                msg = actors.receive(60_000)
                assert msg is not actors.TIMEOUT, "a writer never finished"
                total += msg[2]
            elapsed = time.monotonic() - started
            actors.unlink(wal_pid)
            actors.exit(wal_pid, "kill")
    finally:
        node.stop()
        trace.set_sink(previous)
    return {
        "writers": writers,
        "entries": total,
        "entries_per_s": total / elapsed,
        "mean_batch": sum(batches) / len(batches) if batches else 0.0,
        "fsyncs_per_s": fsync.calls / elapsed,
    }


def run_naive(root: str, seconds: float, payload: bytes) -> dict[str, Any]:
    """One write and one fdatasync per entry, nothing shared."""
    path = os.path.join(root, "naive.wal")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.write(fd, wal_file.HEADER)
    n = 0
    started = time.monotonic()
    try:
        while time.monotonic() - started < seconds:
            n += 1
            os.write(fd, wal_file.encode([("uid0", [(n, 1, payload)])]))
            os.fdatasync(fd)
    finally:
        os.close(fd)
    elapsed = time.monotonic() - started
    return {"entries": n, "entries_per_s": n / elapsed, "fsyncs_per_s": n / elapsed}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--writers", default="3,30")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--payload", type=int, default=256, help="bytes per command")
    ap.add_argument("--window", type=int, default=64, help="appends in flight per writer")
    ap.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="warren-bench-wal-", dir=args.dir)
    payload = os.urandom(args.payload)
    try:
        naive = run_naive(root, args.seconds, payload)
        print(f"naive (write+fdatasync per entry): {naive['entries_per_s']:10.0f} entries/s")
        results = []
        for w in (int(x) for x in args.writers.split(",")):
            r = run_wal(root, w, args.seconds, payload, args.window)
            r["vs_naive"] = r["entries_per_s"] / naive["entries_per_s"]
            results.append(r)
            print(f"ra_log_wal, {w:3d} writers:        {r['entries_per_s']:10.0f} entries/s  "
                  f"mean batch {r['mean_batch']:7.1f}  {r['fsyncs_per_s']:7.1f} fsyncs/s  "
                  f"x{r['vs_naive']:.1f} vs naive")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps({"bench": "wal", "payload_bytes": args.payload, "window": args.window,
                      "seconds": args.seconds, "naive": naive, "wal": results}))


if __name__ == "__main__":
    main()
