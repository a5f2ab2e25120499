"""The parts of OTP's gen_statem a Ra server needs, for a warren process.

`ra_server_proc` relies on four gen_statem features that a plain receive
loop lacks: ``next_event`` actions (handled before anything already in the
mailbox), ``postpone`` (an event is kept and replayed after the next state
change), one *state timeout* (cancelled by any state change) and *named
generic timeouts* (which survive state changes). `Events` provides them over
the process mailbox; timers are `send_after` messages carrying a token, so a
cancelled or re-armed timer that fires late is recognised and ignored.
"""

from __future__ import annotations

import itertools
from collections import deque
from typing import Any

import actors
from actors.pid import Ref

#: Event types: ``("call", from)``, ``"cast"``, ``"info"``, ``"timeout"``.
CAST = "cast"
INFO = "info"
TIMEOUT = "timeout"

_TIMER_TAG = "$statem_timeout"
_STATE = "$state_timeout"


class Events:
    """The event source of one statem process; call only from that process."""

    def __init__(self) -> None:
        self._next: deque[tuple[Any, Any]] = deque()
        self._postponed: list[tuple[Any, Any]] = []
        #: timeout name -> (token, tref, event)
        self._timers: dict[Any, tuple[int, Ref, Any]] = {}
        self._tokens = itertools.count(1)

    # ---- events --------------------------------------------------------

    def push_next(self, events: list[tuple[Any, Any]]) -> None:
        """``next_event`` actions: handled next, in the order given."""
        self._next.extendleft(reversed(events))

    def postpone(self, evtype: Any, msg: Any) -> None:
        self._postponed.append((evtype, msg))

    def state_changed(self) -> None:
        """Cancel the state timeout and replay postponed events first."""
        self.cancel(_STATE)
        postponed, self._postponed = self._postponed, []
        self._next.extendleft(reversed(postponed))

    def take(self) -> tuple[Any, Any]:
        """The next event as ``(evtype, msg)``; blocks on the mailbox."""
        while True:
            if self._next:
                return self._next.popleft()
            msg = actors.receive()
            evt = self._classify(msg)
            if evt is not None:
                return evt

    def take_waiting(self) -> tuple[Any, Any] | None:
        """The next mailbox event if one is already there, else None; never blocks.

        Only when no ``next_event`` is queued: those come before the mailbox.
        """
        if self._next:
            return None
        while True:
            msg = actors.receive(0)
            if msg is actors.TIMEOUT:
                return None
            evt = self._classify(msg)
            if evt is not None:
                return evt

    def push_back_first(self, event: tuple[Any, Any]) -> None:
        """Return an event taken by `take_waiting` to the head of the queue."""
        self._next.appendleft(event)

    def _classify(self, msg: Any) -> tuple[Any, Any] | None:
        if type(msg) is tuple and msg:
            tag = msg[0]
            if tag == "$gen_call" and len(msg) == 3:
                return (("call", msg[1]), msg[2])
            if tag == "$gen_cast" and len(msg) == 2:
                return (CAST, msg[1])
            if tag == _TIMER_TAG and len(msg) == 3:
                _, name, token = msg
                current = self._timers.get(name)
                if current is None or current[0] != token:
                    return None  # cancelled or re-armed since it was set
                del self._timers[name]
                return (TIMEOUT, current[2])
        return (INFO, msg)

    # ---- timeouts ------------------------------------------------------

    def set_state_timeout(self, ms: int, event: Any) -> None:
        self.set_timeout(_STATE, ms, event)

    def state_timeout_pending(self) -> bool:
        return _STATE in self._timers

    def cancel_state_timeout(self) -> None:
        self.cancel(_STATE)

    def set_timeout(self, name: Any, ms: int, event: Any) -> None:
        """Arm (or re-arm) the generic timeout `name` to deliver `event`."""
        self.cancel(name)
        token = next(self._tokens)
        tref = actors.send_after(max(0, int(ms)), actors.self(), (_TIMER_TAG, name, token))
        self._timers[name] = (token, tref, event)

    def cancel(self, name: Any) -> None:
        current = self._timers.pop(name, None)
        if current is not None:
            actors.cancel_timer(current[1])

    def pending(self, name: Any) -> bool:
        return name in self._timers
