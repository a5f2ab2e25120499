"""The node's one source of time.

Every read of time and every timer in the runtime goes through a `Clock`, so a
simulated clock can replace the real one for deterministic replays without
touching process code.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from gevent.hub import get_hub

__all__ = ["Clock", "GeventClock", "TimerHandle"]


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
