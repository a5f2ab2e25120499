"""Per-message memory of queued messages stays small (target <= 48 bytes)."""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from fifo import RabbitFifo, make_enqueue

from .helpers import QNAME, pid

N = 20_000


def bytes_per_ready_message(version: int) -> float:
    machine = RabbitFifo(version)
    state = machine.init({"name": "q1", "queue_resource": QNAME})
    p = pid(1)
    body = b"x" * 200
    meta = {"term": 1, "machine_version": version, "system_time": 0, "reply_mode": ("notify", 0, p)}
    state = machine.apply({**meta, "index": 1}, make_enqueue(p, 1, body), state)[0]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for i in range(2, N + 2):
        state = machine.apply({**meta, "index": 10_000_000 + i}, make_enqueue(p, i, body),
                              state)[0]
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert state.messages_total == N + 1
    return (after - before) / N


@pytest.mark.parametrize("version", [7, 8])
def test_ready_messages_cost_at_most_48_bytes_each(version: int) -> None:
    assert bytes_per_ready_message(version) <= 48
