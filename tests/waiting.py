"""One bounded wait for every test: poll a condition until it holds, or fail naming it.

warren's tests assert no timings. Where something happens asynchronously (a signal
lands, a leader is elected, a client flushes its history), a test waits for it and
fails with what it waited for if it never comes. What a test does between polls depends
on what must keep running beside it, so the sleep (and the clock) are the caller's:

- a plain thread or process sleeps (`wait_until`'s defaults);
- a greenlet yields to gevent's hub and reads the hub's clock (`hub_wait_until`);
- an actor sleeps through `actors.sleep`, so that its mailbox keeps working.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import gevent

T = TypeVar("T")


def wait_until(pred: Callable[[], T], what: str, timeout_s: float = 10.0, *,
               poll_s: float = 0.01, sleep: Callable[[float], object] = time.sleep,
               clock: Callable[[], float] = time.monotonic) -> T:
    """`pred()`'s first truthy result; an AssertionError naming `what` at the deadline."""
    deadline = clock() + timeout_s
    while True:
        result = pred()
        if result:
            return result
        if clock() > deadline:
            raise AssertionError(f"never happened within {timeout_s} s: {what}")
        sleep(poll_s)


def hub_wait_until(pred: Callable[[], T], what: str, timeout_s: float = 10.0) -> T:
    """As `wait_until`, from a greenlet: every poll lets gevent's hub run."""
    return wait_until(pred, what, timeout_s, poll_s=0.005, sleep=gevent.sleep,
                      clock=lambda: gevent.get_hub().loop.now())
