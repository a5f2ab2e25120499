"""How often the cyclic garbage collector runs in a dedicated node process.

Why: a node holds many long-lived objects (Ra logs and their in-memory tables,
queued messages, consumer records), and CPython's default thresholds
``(700, 10, 10)`` make every tenth second-generation collection a full one once
that heap has grown by a quarter. A full collection walks every tracked object
while the hub waits: at window 256 (`bench/e2e.py`'s workload) the followers
spent 17-22% of their CPU in five or six of them per 8 s run, 120-150 ms each.
An Erlang node has no such pause, since every process collects its own small
heap. Nearly all of warren's garbage is freed by reference counting (a run's
collections found a few thousand cyclic objects in all), so collecting cycles
less often costs little memory.

Only the node entry points (`warren node start`, ``python -m transports.zmq_node``)
apply this; a node embedded in another program leaves that program's collector
alone.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Mapping

__all__ = ["ENV", "NODE_THRESHOLDS", "node_thresholds", "tune_node_process"]

#: generation 0 every 5,000 net allocations; a full collection at most every
#: hundredth generation-1 collection (and, as always, only after a quarter's growth)
NODE_THRESHOLDS = (5000, 10, 100)
#: ``"T0,T1,T2"`` overrides them (``0,0,0`` leaves automatic collection off)
ENV = "WARREN_GC_THRESHOLDS"


def node_thresholds(env: Mapping[str, str] = os.environ) -> tuple[int, int, int]:
    """The thresholds a node process uses: `ENV` if set, else `NODE_THRESHOLDS`.

    Raises ValueError, naming the variable, unless it holds three non-negative
    integers separated by commas."""
    raw = env.get(ENV, "").strip()
    if not raw:
        return NODE_THRESHOLDS
    parts = [p.strip() for p in raw.split(",")]
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f"{ENV}={raw!r}: expected three non-negative integers, "
                         f"such as {','.join(map(str, NODE_THRESHOLDS))}")
    t0, t1, t2 = (int(p) for p in parts)
    return (t0, t1, t2)


def tune_node_process(env: Mapping[str, str] = os.environ) -> tuple[int, int, int]:
    """Set this process's collector thresholds for a node; returns them."""
    thresholds = node_thresholds(env)
    gc.set_threshold(*thresholds)
    return thresholds
