"""Fixtures for the supervisor tests: a fresh node, a pinned clock, a test process.

The node's clock keeps real timers but reports a monotonic time the test
sets, so restart-intensity arithmetic sees exact instants (0.1 s, 5.9 s, ...)
and never depends on how fast the machine runs the test.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest

import actors
from actors import Node
from actors.clock import GeventClock

_names = itertools.count(1)


class PinnedClock(GeventClock):
    """Real timers; `monotonic()` returns `now` unless it is None."""

    def __init__(self, now: float | None = 1000.0) -> None:
        super().__init__()
        self.now = now

    def monotonic(self) -> float:
        return time.monotonic() if self.now is None else self.now


@pytest.fixture
def clock() -> PinnedClock:
    return PinnedClock()


@pytest.fixture
def node(clock: PinnedClock) -> Iterator[Node]:
    n = Node(f"sup{next(_names)}@test", clock=clock).start()
    yield n
    n.stop()


@pytest.fixture
def me(node: Node) -> Iterator[actors.Process]:
    """The test body as a process that traps exits (supervisors it starts may die)."""
    with node.attached() as proc:
        actors.process_flag("trap_exit", True)
        yield proc
