"""How fast the pure `rabbit_fifo` machine turns, and what a queued message costs.

(a) cycles/s: one enqueue, the delivery it triggers to a prefetch-1
    consumer, and the settle of that delivery, applied back to back on the
    pure machine (no Ra, no I/O). The reference, measured in the same run, is
    the smallest queue with acknowledgements a Python program would write: a
    deque of ready ids plus a dict of unacknowledged ones.
(b) bytes per queued message at 100k and 1M ready messages (tracemalloc,
    machine state only; bodies live in the Ra log, not in the machine, as in
    RabbitMQ). RabbitMQ needs about 32 B per message; the target is <= 48 B.
    The reference is a deque of ``(index, size)`` tuples, the naive layout.

Run ``python bench/fifo.py`` (``--quick``: fewer cycles). Tracing 1M
allocations is slow: a run takes a few minutes. The last line is one JSON
object.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
import tracemalloc
from collections import deque
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fifo import RabbitFifo, make_checkout, make_enqueue, make_settle

QNAME = ("resource", "/", "queue", "bench")
BODY = b"x" * 16


class _Pid:
    """A pid stand-in: the machine only reads ``node``."""

    __slots__ = ("n", "node")

    def __init__(self, node: str, n: int) -> None:
        self.node, self.n = node, n

    def __hash__(self) -> int:
        return hash((self.node, self.n))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Pid) and (self.node, self.n) == (other.node, other.n)


def _meta(idx: int, notify: Any = None) -> dict[str, Any]:
    """Command meta as Ra gives it; enqueues come pipelined with a notify reply mode."""
    meta = {"index": idx, "term": 1, "system_time": 0, "machine_version": 7}
    if notify is not None:
        meta["reply_mode"] = ("notify", idx, notify)
    return meta


def machine_cycles(n: int) -> float:
    """enqueue → deliver → settle cycles per second on the pure machine."""
    machine = RabbitFifo()
    state = machine.init({"name": "bench", "queue_resource": QNAME})
    publisher, consumer = _Pid("n1@h", 1), _Pid("n1@h", 2)
    key = ("ctag", consumer)
    state = machine.apply(_meta(1), make_checkout(key, ("auto", ("simple_prefetch", 1)), {}),
                          state)[0]
    apply = machine.apply
    idx = 1
    started = time.perf_counter()
    for i in range(n):
        idx += 1
        result = apply(_meta(idx, publisher), make_enqueue(publisher, i + 1, BODY), state)
        state = result[0]
        idx += 1
        # the delivery went to the consumer as msg id i; settle it
        state = apply(_meta(idx), make_settle(key, [i]), state)[0]
    elapsed = time.perf_counter() - started
    assert state.messages_total == 0, "every message was settled"
    return n / elapsed


def reference_cycles(n: int) -> float:
    """The same cycle on a deque of ready ids plus a dict of unacked ones."""
    ready: deque[int] = deque()
    unacked: dict[int, int] = {}
    started = time.perf_counter()
    for i in range(n):
        ready.append(i)
        unacked[i] = ready.popleft()
        del unacked[i]
    return n / (time.perf_counter() - started)


def machine_bytes_per_msg(n: int) -> float:
    """Bytes of machine state per ready message, for `n` messages queued."""
    machine = RabbitFifo()
    state = machine.init({"name": "bench", "queue_resource": QNAME})
    publisher = _Pid("n1@h", 1)
    state = machine.apply(_meta(1, publisher), make_enqueue(publisher, 1, BODY), state)[0]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    apply = machine.apply
    for i in range(2, n + 2):
        state = apply(_meta(i, publisher), make_enqueue(publisher, i, BODY), state)[0]
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert state.messages_total == n + 1
    return (after - before) / n


def reference_bytes_per_msg(n: int) -> float:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    q: deque[tuple[int, int]] = deque()
    for i in range(n):
        q.append((10_000_000 + i, 16 + i % 7))
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(q) == n
    return (after - before) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer cycles")
    args = parser.parse_args()
    n_cycles = 50_000 if args.quick else 200_000

    cycles = max(machine_cycles(n_cycles) for _ in range(2))
    ref_cycles = max(reference_cycles(n_cycles) for _ in range(2))
    print(f"(a) enqueue->deliver->settle: machine {cycles:,.0f} cycles/s  "
          f"deque+dict reference {ref_cycles:,.0f}/s  ratio {cycles / ref_cycles:.3f}")

    b100k = machine_bytes_per_msg(100_000)
    b1m = machine_bytes_per_msg(1_000_000)
    ref = reference_bytes_per_msg(1_000_000)
    print(f"(b) bytes per queued message: 100k {b100k:.1f} B  1M {b1m:.1f} B  "
          f"(target <= 48; naive deque of (index, size) tuples {ref:.1f} B)")
    print(json.dumps({
        "cycles_s": round(cycles),
        "reference_cycles_s": round(ref_cycles),
        "cycles_ratio_vs_reference": round(cycles / ref_cycles, 4),
        "bytes_per_msg_100k": round(b100k, 1),
        "bytes_per_msg_1m": round(b1m, 1),
        "reference_bytes_per_msg": round(ref, 1),
        "target_bytes_per_msg": 48,
    }))


if __name__ == "__main__":
    main()
