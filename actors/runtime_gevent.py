"""A gevent runtime for pykka 4, built on pykka's three actor hooks.

pykka 3 removed its gevent support and pykka 4 ships only threads. Its `Actor`
still lets a runtime supply the inbox (`_create_actor_inbox`), the future
(`_create_future`) and the loop (`_start_actor_loop`); this module supplies all
three on gevent. `GreenActor` is a complete pykka actor on its own (the
"bare gevent actor" that `bench/actors.py` compares warren against), and
`actors.process.Process` subclasses it, replacing the loop with warren's.

The inbox is a deque plus a single parked waiter rather than
`gevent.queue.Queue`: a receiver drains every queued item without touching the
hub, the hub is involved only to wake a receiver that had nothing to do, and
arbitrary items can be removed (selective flushes such as `demonitor(flush)`).
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import gevent
import pykka
from gevent.event import AsyncResult
from gevent.hub import Waiter, get_hub

__all__ = ["EMPTY", "GeventFuture", "GreenActor", "Mailbox"]


class _Empty:
    __slots__ = ()

    def __repr__(self) -> str:
        return "EMPTY"


EMPTY: Any = _Empty()
"""Returned by `Mailbox.get` when the timeout expires with nothing received."""


class Mailbox:
    """FIFO inbox of one actor: any greenlet may put, only its owner gets."""

    __slots__ = ("_hub", "_q", "_waiter")

    def __init__(self) -> None:
        self._q: deque[Any] = deque()
        self._waiter: Waiter | None = None
        self._hub = get_hub()

    def put(self, item: Any, /) -> None:
        self._q.append(item)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            self._hub.loop.run_callback(waiter.switch, None)

    def empty(self) -> bool:
        return not self._q

    def __len__(self) -> int:
        return len(self._q)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._q)

    def clear(self) -> None:
        self._q.clear()

    def get(self, timeout: float | None = None) -> Any:
        """Next item; blocks the calling greenlet (not the hub) until one arrives.

        ``timeout`` is in seconds; ``0`` polls. Returns `EMPTY` on timeout.
        """
        q = self._q
        if q:
            return q.popleft()
        if timeout is not None and timeout <= 0:
            return EMPTY
        self._wait(timeout)
        if q:
            return q.popleft()
        return EMPTY

    def wait_nonempty(self, timeout: float | None = None) -> bool:
        """Park until the mailbox holds something (or the timeout passes)."""
        if self._q:
            return True
        if timeout is not None and timeout <= 0:
            return False
        self._wait(timeout)
        return bool(self._q)

    def _wait(self, timeout: float | None) -> None:
        waiter = Waiter(self._hub)
        self._waiter = waiter
        timer = None
        if timeout is not None:
            timer = self._hub.loop.timer(timeout)
            timer.start(waiter.switch, None)
        try:
            waiter.get()
        finally:
            if self._waiter is waiter:
                self._waiter = None
            if timer is not None:
                timer.close()

    def remove_first(self, pred: Callable[[Any], bool]) -> Any:
        """Remove and return the first item matching `pred`, or `EMPTY`."""
        q = self._q
        for i, item in enumerate(q):
            if pred(item):
                del q[i]
                return item
        return EMPTY

    def take_all(self, pred: Callable[[Any], bool]) -> list[Any]:
        """Remove and return every item matching `pred`, in order; the others stay
        in theirs (a gen_server2-style priority for some messages). O(len)."""
        q = self._q
        taken = [item for item in q if pred(item)]
        if taken:
            kept = [item for item in q if not pred(item)]
            q.clear()
            q.extend(kept)
        return taken

    def take_first(self, pred: Callable[[Any], bool], timeout: float | None) -> Any:
        """Selective receive: wait for the first item matching `pred`."""
        deadline = None if timeout is None else self._hub.loop.now() + timeout
        seen = 0
        while True:
            q = self._q
            n = len(q)
            for i in range(seen, n):
                if pred(q[i]):
                    item = q[i]
                    del q[i]
                    return item
            seen = n
            remaining = None if deadline is None else deadline - self._hub.loop.now()
            if remaining is not None and remaining <= 0:
                return EMPTY
            self._wait(remaining)
            self._hub.loop.update_now()


class GeventFuture(pykka.Future[Any]):
    """pykka future over `gevent.event.AsyncResult`: waiting parks a greenlet."""

    def __init__(self, async_result: AsyncResult | None = None) -> None:
        super().__init__()
        self.async_result = async_result or AsyncResult()

    def get(self, *, timeout: float | None = None) -> Any:
        try:
            return super().get(timeout=timeout)
        except NotImplementedError:
            pass
        try:
            return self.async_result.get(timeout=timeout)
        except gevent.Timeout as exc:
            raise pykka.Timeout(f"{timeout} seconds") from exc

    def set(self, value: Any | None = None) -> None:
        assert not self.async_result.ready(), "value has already been set"
        self.async_result.set(value)

    def set_exception(self, exc_info: Any = None) -> None:
        assert exc_info is None or len(exc_info) == 3
        if exc_info is None:
            exc_info = sys.exc_info()
        self.async_result.set_exception(exc_info[1])


class GreenActor(pykka.Actor):
    """A pykka actor that runs as one greenlet on the gevent hub."""

    greenlet: gevent.Greenlet | None = None
    #: pykka types its inbox as its own queue protocol; ours also takes selectively
    actor_inbox: Mailbox

    @staticmethod
    def _create_actor_inbox() -> Mailbox:
        return Mailbox()

    @staticmethod
    def _create_future() -> GeventFuture:
        return GeventFuture()

    def _start_actor_loop(self) -> None:
        self.greenlet = gevent.spawn(self._actor_loop)

    def _actor_loop_running(self) -> None:
        # Same contract as pykka's loop (replies for ask, on_failure for tell),
        # with one difference: pykka stops *every* actor in the OS process on a
        # BaseException (GreenletExit when one greenlet is killed, say); here
        # such an exception stops only this actor.
        inbox = self.actor_inbox
        while not self.actor_stopped.is_set():
            envelope = inbox.get()
            try:
                response = self._handle_receive(envelope.message)
                if envelope.reply_to is not None:
                    envelope.reply_to.set(response)
            except Exception:
                if envelope.reply_to is not None:
                    envelope.reply_to.set_exception()
                else:
                    self._handle_failure(*sys.exc_info())
                    try:
                        self.on_failure(*sys.exc_info())
                    except Exception:
                        self._handle_failure(*sys.exc_info())
            except BaseException:
                self._stop()
