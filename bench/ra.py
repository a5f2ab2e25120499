"""Ra end to end: three durable replicas in three OS processes, against PySyncObj.

Both sides replicate a counter machine over loopback with three replicas, one
OS process each, measured in the same run on the same disk:

* throughput: commands per second with `--inflight` (1,000) commands
  pipelined, for 16-byte and 1-KiB payloads;
* commit latency: p50 / p99 from sending one command to hearing it applied,
  with one command in flight (Ra only; PySyncObj's latency is printed too);
* fsyncs: the WAL fdatasyncs of all three Ra nodes per 1,000 commands of the
  16-byte run (other syncs, of segments and meta, are reported apart).

Ra runs with warren's disk WAL (fdatasync per batch) in a data dir per node;
the client is this process, a fourth node, using ``pipeline_command`` with
``normal`` priority as ``rabbit_fifo_client`` does. PySyncObj runs with its
journal file (its most durable mode: the journal is an mmap, never fsynced)
and its workload is driven inside the leader's process, which spares it the
client hop Ra pays.

Usage: ``python bench/ra.py [--commands 20000] [--commands-1k 8000]
[--inflight 1000] [--latency-samples 500] [--dir DIR]``. The last line
printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import actors
from actors import Node
from bench.proc_cpu import process_cpu_s
from ra import api
from ra import system as ra_system
from ra.directory import lookup
from ra.machine import Machine
from transports.tick import TickConfig
from transports.zmq import ZmqTransport
from transports.zmq_node import free_port, start_node_process, stop_node_process

COOKIE = "warren-bench-ra"
PSO_LATENCY_SAMPLES = 50


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# ------------------------------------------------------------------ Ra


class Counter(Machine):
    """Counts commands; the payload is carried and logged, not kept."""

    def init(self, config: dict[str, Any]) -> Any:
        return 0

    def apply(self, meta: dict[str, Any], command: Any, state: Any) -> tuple[Any, ...]:
        return (state + 1, state + 1)


def _start_system(data_dir: str) -> Any:
    result = ra_system.start(ra_system.disk_system_config(data_dir))
    return "ok" if result[0] == "ok" else result


def _syncs() -> dict[str, int]:
    handle = lookup(actors.get_node(), "default")
    assert handle is not None
    return handle.disk.syncs()  # type: ignore[union-attr]


def _total_syncs(nodes: list[str]) -> dict[str, int]:
    total = {"wal": 0, "other": 0}
    for name in nodes:
        for key, value in ra_system.rpc(name, _syncs).items():
            total[key] += value
    return total


def ra_throughput(leader: Any, payload: bytes, n: int, window: int) -> float:
    """Commands/s with `window` pipelined commands outstanding."""
    cmd = ("add", payload)
    sent = done = 0
    started = time.perf_counter()
    while sent < min(window, n):
        api.pipeline_command(leader, cmd, sent, "normal")
        sent += 1
    while done < n:
        msg = actors.receive(30_000)
        match msg:
            case ("ra_event", _, ("applied", replies)):
                done += len(replies)
                top_up = min(len(replies), n - sent)
                for _ in range(top_up):
                    api.pipeline_command(leader, cmd, sent, "normal")
                    sent += 1
            case _:
                raise RuntimeError(f"unexpected {msg!r}")
    return n / (time.perf_counter() - started)


def ra_latencies(leader: Any, payload: bytes, samples: int) -> list[float]:
    """Milliseconds from a pipelined command to its ``applied`` event, one at a time."""
    out = []
    for i in range(samples):
        started = time.perf_counter()
        api.pipeline_command(leader, ("add", payload), i, "normal")
        msg = actors.receive(10_000)
        assert msg[0] == "ra_event" and msg[2][0] == "applied", msg
        out.append((time.perf_counter() - started) * 1000.0)
    return out


def run_ra(args: argparse.Namespace, root: str) -> dict[str, Any]:
    transport = ZmqTransport(cookie=COOKIE, tick=TickConfig(2.0))
    client = Node(f"bench@127.0.0.1:{free_port()}", transport=transport).start()
    procs = []
    try:
        names = [f"ra{i}@127.0.0.1:{free_port()}" for i in range(1, 4)]
        for name in names:
            procs.append(start_node_process(name, cookie=COOKIE, net_ticktime=2.0)[0])
        with client.attached():
            for i, name in enumerate(names):
                assert ra_system.rpc(name, _start_system, os.path.join(root, f"ra{i}"),
                                     timeout=10_000) == "ok"
            ids = [(f"c{i}", name) for i, name in enumerate(names)]
            result = api.start_cluster("default", "bench", Counter(), ids, 10_000)
            assert result[0] == "ok", result
            leader = api.members(ids)[2]
            small, big = b"x" * 16, b"x" * 1024
            ra_throughput(leader, small, 2000, args.inflight)  # warm up
            before = _total_syncs(names)
            pids = [p.pid for p in procs] + [os.getpid()]
            cpu_before, wall_before = [process_cpu_s(p) for p in pids], time.perf_counter()
            cmds_16b = ra_throughput(leader, small, args.commands, args.inflight)
            wall = time.perf_counter() - wall_before
            # share of one core each process used during the 16-byte run
            busy = [round((process_cpu_s(p) - c) / wall, 2)
                    for p, c in zip(pids, cpu_before, strict=True)]
            after = _total_syncs(names)
            leader_pos = names.index(leader[1])
            cmds_1k = ra_throughput(leader, big, args.commands_1k, args.inflight)
            lat = ra_latencies(leader, small, args.latency_samples)
        return {
            "ra_cmds_s_16b": round(cmds_16b),
            "ra_cmds_s_1k": round(cmds_1k),
            "commit_p50_ms": round(percentile(lat, 0.50), 3),
            "commit_p99_ms": round(percentile(lat, 0.99), 3),
            "fsyncs_per_1000": round((after["wal"] - before["wal"]) * 1000 / args.commands, 2),
            "other_syncs_per_1000": round(
                (after["other"] - before["other"]) * 1000 / args.commands, 2),
            "cpu_leader_16b": busy[leader_pos],
            "cpu_followers_16b": [b for i, b in enumerate(busy[:3]) if i != leader_pos],
            "cpu_client_16b": busy[3],
        }
    finally:
        for proc in procs:
            stop_node_process(proc)
        client.stop()


# ------------------------------------------------------------ PySyncObj


def pysyncobj_node(args: argparse.Namespace) -> int:
    """One PySyncObj replica; the one that is leader runs the workload and prints it."""
    from pysyncobj import SyncObj, SyncObjConf, replicated

    class PCounter(SyncObj):  # type: ignore[misc]
        def __init__(self, addr: str, partners: list[str], conf: Any) -> None:
            super().__init__(addr, partners, conf)
            self.__count = 0

        @replicated
        def add(self, payload: bytes) -> int:
            self.__count += 1
            return self.__count

    ports = [int(p) for p in args.ports.split(",")]
    addrs = [f"127.0.0.1:{p}" for p in ports]
    me = addrs[args.pysyncobj_node]
    conf = SyncObjConf(journalFile=os.path.join(args.dir, f"pso{args.pysyncobj_node}.journal"),
                       dynamicMembershipChange=False)
    obj = PCounter(me, [a for a in addrs if a != me], conf)
    while obj._getLeader() is None:
        time.sleep(0.05)
    time.sleep(0.5)  # let the term settle before deciding who drives
    if not obj._isLeader():
        sys.stdin.read()  # until the parent closes the pipe
        return 0

    def throughput(payload: bytes, n: int) -> float:
        window = threading.BoundedSemaphore(args.inflight)
        all_done = threading.Event()
        count = [0]

        def applied(_res: Any, _err: Any) -> None:
            window.release()
            count[0] += 1
            if count[0] == n:
                all_done.set()

        started = time.perf_counter()
        for _ in range(n):
            window.acquire()
            obj.add(payload, callback=applied)
        all_done.wait(120)
        return n / (time.perf_counter() - started)

    small, big = b"x" * 16, b"x" * 1024
    throughput(small, 2000)
    cmds_16b = throughput(small, args.commands)
    cmds_1k = throughput(big, args.commands_1k)
    lat = []
    # a synchronous PySyncObj call waits for its ~100 ms poll: a few samples suffice
    for _ in range(min(args.latency_samples, PSO_LATENCY_SAMPLES)):
        started = time.perf_counter()
        obj.add(small, sync=True)
        lat.append((time.perf_counter() - started) * 1000.0)
    print("result " + json.dumps({
        "pysyncobj_cmds_s_16b": round(cmds_16b), "pysyncobj_cmds_s_1k": round(cmds_1k),
        "pysyncobj_p50_ms": round(percentile(lat, 0.5), 3),
        "pysyncobj_p99_ms": round(percentile(lat, 0.99), 3)}), flush=True)
    sys.stdin.read()
    return 0


def run_pysyncobj(args: argparse.Namespace, root: str) -> dict[str, Any]:
    ports = ",".join(str(free_port()) for _ in range(3))
    cmd = [sys.executable, os.path.abspath(__file__), "--ports", ports, "--dir", root,
           "--commands", str(args.commands), "--commands-1k", str(args.commands_1k),
           "--inflight", str(args.inflight), "--latency-samples", str(args.latency_samples)]
    procs = [subprocess.Popen([*cmd, "--pysyncobj-node", str(i)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for i in range(3)]
    try:
        import selectors

        sel = selectors.DefaultSelector()
        for proc in procs:
            assert proc.stdout is not None
            sel.register(proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            for key, _ in sel.select(1.0):
                line = key.fileobj.readline()  # type: ignore[union-attr]
                if line.startswith("result "):
                    return dict(json.loads(line[len("result "):]))
        raise RuntimeError("PySyncObj gave no result")
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(5)


# ----------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--commands", type=int, default=20_000)
    parser.add_argument("--commands-1k", type=int, default=8_000)
    parser.add_argument("--inflight", type=int, default=1000)
    parser.add_argument("--latency-samples", type=int, default=500)
    parser.add_argument("--dir", default=None, help="where the data dirs go (default: a temp dir)")
    parser.add_argument("--pysyncobj-node", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--ports", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.pysyncobj_node is not None:
        return pysyncobj_node(args)
    root = tempfile.mkdtemp(prefix="warren-bench-ra-", dir=args.dir)
    try:
        ra = run_ra(args, root)
        print("ra", json.dumps(ra), flush=True)
        pso = run_pysyncobj(args, root)
        print("pysyncobj", json.dumps(pso), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    out = {**ra, **pso,
           "ratio_16b": round(ra["ra_cmds_s_16b"] / pso["pysyncobj_cmds_s_16b"], 2),
           "ratio_1k": round(ra["ra_cmds_s_1k"] / pso["pysyncobj_cmds_s_1k"], 2),
           "inflight": args.inflight, "commands_16b": args.commands,
           "commands_1k": args.commands_1k}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
