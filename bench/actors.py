"""Actor runtime throughput and latency, against references measured in the same run.

(a) local tell: messages/s from one process to another through warren, vs a
    bare gevent-backed pykka actor (warren's `GreenActor`, pykka's own loop),
    vs pykka's `ThreadingActor`;
(b) gen_server call round trip, p50 / p99, locally and to another node process;
(c) node-to-node messages/s between two OS processes through the ZeroMQ
    transport, vs bare pyzmq + pickle (PUSH/PULL, batches of the same size).

Usage: ``python bench/actors.py [--quick]``. The last line printed is one JSON
object with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pykka

import actors
from actors import Node, gen_server
from actors.gen_server import GenServer
from actors.runtime_gevent import GreenActor

# ---------------------------------------------------------------- (a) tell


def _receiver(n: int, done: actors.Pid) -> None:
    receive = actors.receive
    for _ in range(n):
        receive()
    actors.send(done, "done")


def _sender(dest: actors.Pid, n: int) -> None:
    send = actors.send
    for i in range(n):
        send(dest, i)


def warren_tell(n: int) -> float:
    node = Node("bench@127.0.0.1:0").start()
    try:
        with node.attached() as me:
            receiver = actors.spawn(_receiver, n, me.pid)
            start = time.perf_counter()
            actors.spawn(_sender, receiver, n)
            assert actors.receive(60_000) == "done"
            return n / (time.perf_counter() - start)
    finally:
        node.stop()


class _Counting:
    """Counts tells; answers the total when asked (same body on both runtimes)."""

    count = 0

    def on_receive(self, message: Any) -> Any:
        if message == "total":
            return self.count
        self.count += 1
        return None


class _CountingGreen(_Counting, GreenActor):
    pass


class _CountingThread(_Counting, pykka.ThreadingActor):
    pass


def pykka_tell(cls: type[pykka.Actor], n: int) -> float:
    ref = cls.start()
    try:
        start = time.perf_counter()
        tell = ref.tell
        for i in range(n):
            tell(i)
        assert ref.ask("total") == n
        return n / (time.perf_counter() - start)
    finally:
        ref.stop()


# ---------------------------------------------------------------- (b) call


class Echo(GenServer):
    def handle_call(self, request: Any, from_: Any, state: Any) -> Any:
        return ("reply", request, state)


def _percentiles(samples_ns: list[int]) -> tuple[float, float]:
    samples = sorted(samples_ns)
    p50 = samples[len(samples) // 2] / 1000
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))] / 1000
    return p50, p99


def call_roundtrip(server: Any, n: int) -> tuple[float, float]:
    samples: list[int] = []
    call = gen_server.call
    perf = time.perf_counter_ns
    for _ in range(min(200, n)):
        call(server, "warm")
    for i in range(n):
        t0 = perf()
        call(server, i)
        samples.append(perf() - t0)
    return _percentiles(samples)


def warren_call_local(n: int) -> tuple[float, float]:
    node = Node("bench@127.0.0.1:0").start()
    try:
        with node.attached():
            _, pid = gen_server.start(Echo, None)
            return call_roundtrip(pid, n)
    finally:
        node.stop()


# ------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller counts, for a smoke run")
    args = parser.parse_args()
    n_tell = 100_000 if args.quick else 1_000_000
    n_call = 2_000 if args.quick else 20_000

    def best(fn: Any, *a: Any, runs: int = 3) -> float:
        return max(fn(*a) for _ in range(runs))

    w = best(warren_tell, n_tell)
    g = best(pykka_tell, _CountingGreen, n_tell)
    t = best(pykka_tell, _CountingThread, max(n_tell // 5, 10_000))
    print(f"(a) local tell: warren {w:,.0f}/s  bare gevent pykka {g:,.0f}/s  "
          f"pykka ThreadingActor {t:,.0f}/s  ratio vs bare gevent {w / g:.2f}")
    p50, p99 = warren_call_local(n_call)
    print(f"(b) local call round trip: p50 {p50:.1f} us  p99 {p99:.1f} us")
    result: dict[str, Any] = {
        "local_tell_msgs_s": round(w),
        "bare_gevent_tell_msgs_s": round(g),
        "threading_tell_msgs_s": round(t),
        "local_tell_ratio_vs_bare_gevent": round(w / g, 3),
        "call_local_p50_us": round(p50, 1),
        "call_local_p99_us": round(p99, 1),
    }
    from bench import actors_remote

    result.update(actors_remote.run(quick=args.quick))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
