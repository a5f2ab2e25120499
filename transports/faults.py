"""Fault rules consulted by every transport for every frame, ticks included.

One `FaultRules` object describes the network's misbehaviour as seen by the
nodes that share it: partitions ({A} | {B, C}), dropped frames, delayed
frames and paused nodes. Transports ask `verdict(src, dst)` before a frame
leaves; because ticks pass through the same gate, a partition or a pause is
detected by the net tick exactly as a real one would be. Tests use it
directly; the harness drives it through `warren ctl` (`partition`, `heal`,
`pause_node`), which changes the rules of the target node's own transport.

A node that must stay reachable during a fault (the short-lived node of
`warren ctl`, which has to deliver `heal` and `resume_node`) is simply not
named: `partition(..., isolate_unlisted=False)` and `pause(node, towards=...)`
leave every unnamed node's frames alone.
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
        #: the nodes named by the partition when unlisted nodes are not isolated
        self._listed: frozenset[str] | None = None
        self._drops: dict[tuple[str, str], _Drop] = {}
        self._delays: dict[tuple[str, str], float] = {}
        #: paused node -> the peers it is paused towards (None: every node)
        self._paused: dict[str, frozenset[str] | None] = {}
        self._rng = random.Random(seed)

    # -- configuration -----------------------------------------------------

    def partition(self, *groups: Iterable[str], isolate_unlisted: bool = True) -> None:
        """Split the nodes: frames cross only within a group.

        By default a node in no group is isolated from everyone. With
        ``isolate_unlisted=False`` a frame to or from a node in no group always
        crosses: that is how an operator's client node keeps reaching both sides.
        """
        with self._lock:
            self._groups = [frozenset(g) for g in groups]
            self._listed = None if isolate_unlisted else frozenset().union(*self._groups)

    def heal(self) -> None:
        """Remove the partition, drops and delays (paused nodes stay paused)."""
        with self._lock:
            self._groups = None
            self._listed = None
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

    def pause(self, node: str, towards: Iterable[str] | None = None) -> None:
        """Stop `node`'s traffic: frames from and to it wait until `resume`.

        ``towards`` limits the pause to the frames between `node` and those
        peers (the transport also holds what they sent it); other nodes still
        talk to it, so a paused broker can still be told to resume.
        """
        with self._lock:
            self._paused[node] = None if towards is None else frozenset(towards)

    def resume(self, node: str) -> None:
        with self._lock:
            self._paused.pop(node, None)

    # -- queries -------------------------------------------------------------

    def any_rule(self) -> bool:
        """Whether any rule is set: without one every frame is delivered at once."""
        return bool(self._groups is not None or self._drops or self._delays or self._paused)

    def is_paused(self, node: str) -> bool:
        """Paused towards every node (a `towards`-limited pause is not)."""
        return node in self._paused and self._paused[node] is None

    def paused_for(self, node: str, peer: str) -> bool:
        """Whether `node` is paused as far as `peer` is concerned (entirely or towards it)."""
        if node not in self._paused:
            return False
        towards = self._paused[node]
        return towards is None or peer in towards

    def holds(self, src: str, dst: str) -> bool:
        """Whether frames between src and dst wait, because either is paused for the other."""
        return bool(self._paused) and (self.paused_for(src, dst) or self.paused_for(dst, src))

    def connected(self, src: str, dst: str) -> bool:
        groups = self._groups
        if groups is None:
            return True
        listed = self._listed
        if listed is not None and (src not in listed or dst not in listed):
            return True
        return any(src in g and dst in g for g in groups)

    def verdict(self, src: str, dst: str) -> str:
        """What happens to one frame from src to dst right now."""
        with self._lock:
            if self.holds(src, dst):
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
