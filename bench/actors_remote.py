"""The cross-process half of `bench/actors.py`.

(b) call round trip to a gen_server on another node process;
(c) node-to-node messages/s: a process on node B sends N small messages to a
    process on node A, through the ZeroMQ transport, against bare pyzmq +
    pickle (PUSH/PULL, one pickle per message) between two processes in the
    same run. Both are timed from the sender's first send (a wall-clock stamp
    it sends ahead; both processes share the machine's clock) to the last
    message received.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time
from typing import Any

import zmq

import actors
from actors import Node, gen_server
from transports.tick import TickConfig
from transports.zmq import ZmqTransport
from transports.zmq_node import free_port, start_node_process, stop_node_process

COOKIE = "warren-bench"


def _serve_echo(parent: actors.Pid) -> None:
    from bench.actors import Echo

    _, pid = gen_server.start(Echo, None)
    actors.send(parent, ("echo", pid))
    actors.receive()


def _blast(dest: actors.Pid, n: int) -> None:
    send = actors.send
    send(dest, ("start", time.time()))
    for i in range(n):
        send(dest, ("m", i))


def warren_remote(n_msgs: int, n_calls: int) -> tuple[float, float, float]:
    """(msgs/s B->A, call p50 us, call p99 us) with node B in another OS process."""
    from bench.actors import call_roundtrip

    b_name = f"benchb@127.0.0.1:{free_port()}"
    proc, _creation = start_node_process(b_name, cookie=COOKIE, net_ticktime=60.0)
    node = Node(f"bencha@127.0.0.1:{free_port()}",
                transport=ZmqTransport(cookie=COOKIE, tick=TickConfig(60.0))).start()
    try:
        with node.attached() as me:
            actors.spawn(_serve_echo, me.pid, node=b_name)
            _, echo = actors.receive(10_000)
            p50, p99 = call_roundtrip(echo, n_calls)
            best = 0.0
            for _ in range(3):
                actors.spawn(_blast, me.pid, n_msgs, node=b_name)
                tag, started = actors.receive(10_000)
                assert tag == "start"
                for i in range(n_msgs):
                    assert actors.receive(10_000) == ("m", i)
                best = max(best, n_msgs / (time.time() - started))
            return best, p50, p99
    finally:
        node.stop()
        stop_node_process(proc)


_PUSHER = """
import pickle, sys, zmq
ctx = zmq.Context()
s = ctx.socket(zmq.PUSH)
s.setsockopt(zmq.SNDHWM, 0)
s.connect(sys.argv[1])
n = int(sys.argv[2])
dumps = pickle.dumps
import time
s.send(dumps(("start", time.time()), 5))
for i in range(n):
    s.send(dumps((0, 7, 123456, ("m", i)), 5))
s.close(linger=-1)
"""


def bare_zmq(n_msgs: int) -> float:
    """Bare pyzmq + pickle between two OS processes: the reference."""
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.setsockopt(zmq.RCVHWM, 0)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    best = 0.0
    try:
        for _ in range(3):
            pusher = subprocess.Popen(
                [sys.executable, "-c", _PUSHER, f"tcp://127.0.0.1:{port}", str(n_msgs)]
            )
            loads = pickle.loads
            _tag, started = loads(pull.recv())
            for _ in range(n_msgs):
                loads(pull.recv())
            best = max(best, n_msgs / (time.time() - started))
            pusher.wait()
    finally:
        pull.close(linger=0)
        ctx.term()
    return best


_ECHO_SERVER = """
import sys, zmq
s = zmq.Context().socket(zmq.ROUTER)
s.bind(sys.argv[1])
while True:
    rid, m = s.recv_multipart()
    if m == b"stop":
        break
    s.send_multipart([rid, m])
"""


def bare_zmq_roundtrip(n_calls: int) -> tuple[float, float]:
    """Reference for (b): a pickled request echoed by a bare pyzmq ROUTER in
    another process, timed one round trip at a time: (p50 us, p99 us)."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", _ECHO_SERVER, f"tcp://127.0.0.1:{port}"])
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.connect(f"tcp://127.0.0.1:{port}")
    try:
        times = []
        for i in range(n_calls + n_calls // 10):
            t0 = time.perf_counter()
            sock.send(pickle.dumps([("call", i)], 5))
            pickle.loads(sock.recv())
            times.append(time.perf_counter() - t0)
        sock.send(b"stop")
        server.wait(10)
    finally:
        sock.close(linger=0)
        ctx.term()
        if server.poll() is None:
            server.kill()
            server.wait()
    times = sorted(times[n_calls // 10:])  # the first tenth warms up
    return times[len(times) // 2] * 1e6, times[int(len(times) * 0.99)] * 1e6


def run(quick: bool = False) -> dict[str, Any]:
    n_msgs = 100_000 if quick else 500_000
    n_calls = 1_000 if quick else 10_000
    bare = bare_zmq(n_msgs)
    remote, p50, p99 = warren_remote(n_msgs, n_calls)
    bare50, bare99 = bare_zmq_roundtrip(n_calls)
    print(f"(b) remote call round trip: p50 {p50:.1f} us  p99 {p99:.1f} us  "
          f"(bare pyzmq echo p50 {bare50:.1f} us  p99 {bare99:.1f} us)")
    print(f"(c) node to node: warren {remote:,.0f}/s  bare pyzmq + pickle {bare:,.0f}/s  "
          f"ratio {remote / bare:.2f}")
    return {
        "call_remote_p50_us": round(p50, 1),
        "call_remote_p99_us": round(p99, 1),
        "bare_zmq_roundtrip_p50_us": round(bare50, 1),
        "call_remote_p50_vs_bare_zmq": round(p50 / bare50, 2),
        "remote_msgs_s": round(remote),
        "bare_zmq_msgs_s": round(bare),
        "remote_ratio_vs_bare_zmq": round(remote / bare, 3),
    }


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    print(run(quick="--quick" in sys.argv))
