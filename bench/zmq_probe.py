"""Messages per second between two OS processes: transport choices compared.

    python bench/zmq_probe.py [--n 200000] [--only bare,green,green_batched,warren]

* ``bare``: plain pyzmq PUSH→PULL, one pickle per message, no gevent;
* ``green``: `zmq.green` PUSH→PULL under the gevent hub, one pickle per message;
* ``green_batched``: `zmq.green`, 1 000 messages pickled per frame;
* ``warren``: `ZmqTransport` end to end: a process on one node sends to a
  process on another node, which receives every message from its mailbox.

Each run prints msgs/s; the receiver runs in a child process and reports
the time from its first to its last message.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import pickle
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

BATCH = 1000


def _msg(i: int) -> tuple[int, int, int, int]:
    return (0, 17, 123456789, i)  # the shape of a SEND signal


def _pull(port: int, n: int, green: bool, batched: bool, out: Any) -> None:
    if green:
        import zmq.green as zmq
    else:
        import zmq
    ctx = zmq.Context()
    s = ctx.socket(zmq.PULL)
    s.setsockopt(zmq.RCVHWM, 0)
    s.bind(f"tcp://127.0.0.1:{port}")
    out.put("ready")
    got = 0
    t0 = 0.0
    while got < n:
        value = pickle.loads(s.recv())
        if got == 0:
            t0 = time.perf_counter()
        got += len(value) if batched else 1
    out.put(time.perf_counter() - t0)


def _push(port: int, n: int, green: bool, batched: bool) -> None:
    if green:
        import zmq.green as zmq
    else:
        import zmq
    ctx = zmq.Context()
    s = ctx.socket(zmq.PUSH)
    s.setsockopt(zmq.SNDHWM, 0)
    s.connect(f"tcp://127.0.0.1:{port}")
    if batched:
        for start in range(0, n, BATCH):
            s.send(pickle.dumps([_msg(i) for i in range(start, min(n, start + BATCH))], 5))
    else:
        for i in range(n):
            s.send(pickle.dumps(_msg(i), 5))
    s.close(linger=-1)
    ctx.term()


def socket_probe(n: int, green: bool, batched: bool) -> float:
    from transports.zmq_node import free_port

    port = free_port()
    q: Any = mp.get_context("spawn").Queue()
    child = mp.get_context("spawn").Process(target=_pull, args=(port, n, green, batched, q))
    child.start()
    try:
        assert q.get(timeout=20) == "ready"
        _push(port, n, green, batched)
        return n / q.get(timeout=120)
    finally:
        child.kill()
        child.join()


def warren_probe(n: int) -> float:
    """Two node processes: this one sends, a child node receives."""
    from actors import Node, api
    from transports.tick import TickConfig
    from transports.zmq import ZmqTransport
    from transports.zmq_node import free_port, start_node_process, stop_node_process

    cookie = "bench-cookie"
    peer = f"rx@127.0.0.1:{free_port()}"
    child, _ = start_node_process(peer, cookie=cookie)
    node = Node(f"tx@127.0.0.1:{free_port()}",
                transport=ZmqTransport(cookie=cookie, tick=TickConfig())).start()
    try:
        with node.attached() as me:
            my = me.pid

            def receiver(total: int) -> None:
                api.send(my, "ready")
                api.receive()
                t0 = time.perf_counter()
                for _ in range(total - 1):
                    api.receive()
                api.send(my, ("elapsed", time.perf_counter() - t0))

            sink = api.spawn(receiver, n, node=peer)
            assert api.receive(10_000) == "ready"
            for i in range(n):
                api.send(sink, i)
                if i % BATCH == 0:
                    api.sleep(0)  # let the hub flush, as a busy node would
            _, elapsed = api.receive(120_000)
            return n / elapsed
    finally:
        node.stop()
        stop_node_process(child)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--only", default="bare,green,green_batched,warren")
    args = parser.parse_args()
    for mode in args.only.split(","):
        if mode == "warren":
            rate = warren_probe(args.n)
        else:
            rate = socket_probe(args.n, green=mode.startswith("green"),
                                batched=mode.endswith("batched"))
        print(f"{mode:>14}: {rate:>10,.0f} msgs/s", flush=True)


if __name__ == "__main__":
    main()
