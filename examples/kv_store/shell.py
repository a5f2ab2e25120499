"""The store as a gen_server: it feeds the core and carries out its effects.

The shell is the only place that knows about processes and the clock; it reads
the node's clock, passes the time in, and turns each effect into a runtime call.
"""

from __future__ import annotations

from typing import Any

import actors
from actors import gen_server
from actors.gen_server import GenServer
from examples.kv_store.core import Command, Effect, Expire, StartTimer, State, apply


def now_ms() -> int:
    """The node's monotonic time, so a test's manual clock drives expiry."""
    return actors.get_node().clock.monotonic_ms()


class KvStore(GenServer):
    """Calls carry `Put` and `Get` commands; timers deliver `Expire`."""

    def init(self, args: Any) -> Any:
        return ("ok", {})

    def handle_call(self, request: Any, from_: Any, state: State) -> Any:
        state, reply = self._apply(state, request)
        return ("reply", reply, state)

    def handle_info(self, msg: Any, state: State) -> Any:
        if isinstance(msg, Expire):
            state, _ = self._apply(state, msg)
        return ("noreply", state)

    def _apply(self, state: State, command: Command) -> tuple[State, object]:
        state, reply, effects = apply(state, command, now_ms())
        for effect in effects:
            self._execute(effect)
        return state, reply

    def _execute(self, effect: Effect) -> None:
        match effect:
            case StartTimer(after_ms):
                actors.send_after(after_ms, actors.self(), Expire())
            case _:
                raise ValueError(f"unknown effect: {effect!r}")


def start_link(name: str) -> Any:
    """The child start function: ``("ok", pid)``, the store registered as `name`."""
    return gen_server.start_link(KvStore, None, name=name)
