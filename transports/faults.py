"""Fault rules consulted by every transport for every frame, ticks included.

One `FaultRules` object describes the network's misbehaviour as seen by the
nodes that share it: partitions ({A} | {B, C}), dropped frames, delayed
frames and paused nodes. Transports ask `verdict(src, dst)` before a frame
leaves; because ticks pass through the same gate, a partition or a pause is
detected by the net tick exactly as a real one would be. Tests use it
directly; the harness drives it through node control messages.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["DELIVER", "DROP", "HOLD", "FaultRules"]

DELIVER = "deliver"
DROP = "drop"
HOLD = "hold"  # a paused node: frames wait, as in a stopped OS process's socket buffers


@dataclass(slots=True)
class _Drop:
    remaining: int | None  # None: every frame
    probability: float


class FaultRules:
    """Thread-safe: the ZeroMQ transport consults it from its I/O thread."""

    def __init__(self, seed: int | None = None) -> None:
        self._lock = threading.Lock()
        self._groups: list[frozenset[str]] | None = None
        self._drops: dict[tuple[str, str], _Drop] = {}
        self._delays: dict[tuple[str, str], float] = {}
        self._paused: set[str] = set()
        self._rng = random.Random(seed)

    # -- configuration -----------------------------------------------------

    def partition(self, *groups: Iterable[str]) -> None:
        """Split the nodes: frames cross only within a group; unlisted nodes are isolated."""
        with self._lock:
            self._groups = [frozenset(g) for g in groups]

    def heal(self) -> None:
        """Remove the partition, drops and delays (paused nodes stay paused)."""
        with self._lock:
            self._groups = None
            self._drops.clear()
            self._delays.clear()

    def drop(self, src: str, dst: str, count: int | None = None, probability: float = 1.0) -> None:
        """Drop frames src→dst: the next `count` (all if None) with `probability`."""
        with self._lock:
            self._drops[(src, dst)] = _Drop(count, probability)

    def delay(self, src: str, dst: str, seconds: float) -> None:
        """Delay every frame src→dst (later frames wait behind it: order is kept)."""
        with self._lock:
            if seconds <= 0:
                self._delays.pop((src, dst), None)
            else:
                self._delays[(src, dst)] = seconds

    def pause(self, node: str) -> None:
        with self._lock:
            self._paused.add(node)

    def resume(self, node: str) -> None:
        with self._lock:
            self._paused.discard(node)

    # -- queries -------------------------------------------------------------

    def is_paused(self, node: str) -> bool:
        return node in self._paused

    def connected(self, src: str, dst: str) -> bool:
        groups = self._groups
        if groups is None:
            return True
        return any(src in g and dst in g for g in groups)

    def verdict(self, src: str, dst: str) -> str:
        """What happens to one frame from src to dst right now."""
        with self._lock:
            if src in self._paused or dst in self._paused:
                return HOLD
            if not self.connected(src, dst):
                return DROP
            rule = self._drops.get((src, dst))
            if rule is not None:
                if rule.remaining is not None:
                    if rule.remaining <= 0:
                        del self._drops[(src, dst)]
                        return DELIVER
                    rule.remaining -= 1
                if rule.probability >= 1.0 or self._rng.random() < rule.probability:
                    return DROP
            return DELIVER

    def delay_for(self, src: str, dst: str) -> float:
        return self._delays.get((src, dst), 0.0)
