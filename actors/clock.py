"""The node's one source of time.

Every read of time and every timer of the node (`send_after`, `start_timer`,
`read_timer`, and what is built on them: gen_statem-style timeouts, supervisor
shutdown timers, restart intensity) goes through a `Clock`, so a simulated
clock can replace the real one for deterministic replays and tests without
touching process code. `ManualClock` is that clock for tests: time moves only
when the test says so.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable
from typing import Any, Protocol

from gevent.hub import get_hub

__all__ = ["Clock", "GeventClock", "ManualClock", "TimerHandle"]


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a monotonic clock."""
        ...

    def monotonic_ms(self) -> int: ...

    def system_time_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (Erlang's system_time)."""
        ...

    def call_later(self, seconds: float, fn: Callable[..., Any], *args: Any) -> TimerHandle:
        """Run `fn(*args)` in the hub after `seconds`; the handle cancels it."""
        ...


class _GeventTimer:
    __slots__ = ("_watcher",)

    def __init__(self, watcher: Any) -> None:
        self._watcher = watcher

    def cancel(self) -> None:
        w = self._watcher
        if w is not None:
            self._watcher = None
            w.close()


class GeventClock:
    """Real time; timers are libev/libuv timers of the gevent hub."""

    def __init__(self) -> None:
        self._loop = get_hub().loop

    def monotonic(self) -> float:
        return time.monotonic()

    def monotonic_ms(self) -> int:
        return int(time.monotonic() * 1000)

    def system_time_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def call_later(self, seconds: float, fn: Callable[..., Any], *args: Any) -> TimerHandle:
        watcher = self._loop.timer(max(seconds, 0.0))
        handle = _GeventTimer(watcher)

        def fire() -> None:
            handle._watcher = None
            watcher.close()
            fn(*args)

        watcher.start(fire)
        return handle


class _ManualTimer:
    __slots__ = ("args", "cancelled", "fn")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.fn = fn
        self.args = args
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A clock whose time moves only when a test calls `advance`.

    Nothing fires on its own: `advance(ms)` moves time forward and runs every
    timer that falls due on the way, earliest deadline first (timers with the
    same deadline in the order they were set), each with the clock reading its
    own deadline. A timer set by a firing callback that falls due within the
    same advance fires too, as it would with real time. Callbacks run in the
    caller's greenlet, so drive the clock from the hub thread (a test body or
    a process), never from another OS thread.

    Time is kept in whole microseconds, so ``send_after(70, ...)`` is due after
    exactly ``advance(70)`` whatever the float rounding of ``70 / 1000``.
    """

    def __init__(self, monotonic_ms: int = 0, system_time_ms: int = 1_700_000_000_000) -> None:
        self._now_us = monotonic_ms * 1000
        self._system_offset_us = system_time_ms * 1000 - self._now_us
        self._timers: list[tuple[int, int, _ManualTimer]] = []
        self._seq = itertools.count()

    def monotonic(self) -> float:
        return self._now_us / 1_000_000

    def monotonic_ms(self) -> int:
        return self._now_us // 1000

    def system_time_ms(self) -> int:
        return (self._now_us + self._system_offset_us) // 1000

    def call_later(self, seconds: float, fn: Callable[..., Any], *args: Any) -> TimerHandle:
        timer = _ManualTimer(fn, args)
        due = self._now_us + max(0, round(seconds * 1_000_000))
        heapq.heappush(self._timers, (due, next(self._seq), timer))
        return timer

    def pending(self) -> int:
        """How many timers are set and not cancelled (not yet fired)."""
        return sum(1 for _, _, t in self._timers if not t.cancelled)

    def advance(self, ms: float) -> None:
        """Move time forward by `ms` milliseconds, firing what falls due meanwhile."""
        if ms < 0:
            raise ValueError(f"a monotonic clock cannot go back ({ms} ms)")
        target = self._now_us + round(ms * 1000)
        timers = self._timers
        while timers and timers[0][0] <= target:
            due, _, timer = heapq.heappop(timers)
            if timer.cancelled:
                continue
            self._now_us = due
            timer.cancelled = True  # fired: a late cancel is a no-op
            timer.fn(*timer.args)
        self._now_us = target
