"""Replay of synchronous calls, so that client operations stay pure.

An operation that needs an answer from Ra asks `Calls.call`. If the owner
already supplied that answer (``replies[i]`` for the i-th call) it is returned;
otherwise the operation is abandoned with `NeedCall` and the owner is handed
the effects produced so far (minus those handed out in an earlier round)
followed by the call itself. Because operations are deterministic, re-running
one with one more reply reaches exactly the same point again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fifo.client_effects import ClientCall, ClientEffect, Out
from fifo.client_records import ClientState, copy_state

__all__ = ["Calls", "NeedCall", "run"]


class NeedCall(Exception):
    def __init__(self, effects: list[ClientEffect | ClientCall]) -> None:
        super().__init__(effects)
        self.effects = effects


class Calls:
    """The answers to an operation's synchronous calls, consumed in order."""

    def __init__(self, replies: Sequence[Any]) -> None:
        self._replies = list(replies)
        self._next = 0
        #: effects before this position were handed out in an earlier round
        self.emitted = 0

    def call(self, request: ClientCall, fx: list[ClientEffect]) -> Any:
        if self._next < len(self._replies):
            reply = self._replies[self._next]
            self._next += 1
            self.emitted = len(fx)
            return reply
        raise NeedCall([*fx[self.emitted:], request])

    def new_effects(
        self, fx: Sequence[ClientEffect | ClientCall]
    ) -> list[ClientEffect | ClientCall]:
        return list(fx[self.emitted:])


Op = Callable[[Calls, ClientState, list[ClientEffect]], Out]


def run(op: Op, state: ClientState, replies: Sequence[Any]) -> Out:
    """Run `op` on a private copy of `state`; ``call`` leaves `state` as it was."""
    calls = Calls(replies)
    fx: list[ClientEffect] = []
    try:
        out = op(calls, copy_state(state), fx)
    except NeedCall as need:
        return Out("call", state, [], need.effects)
    if not calls.emitted:
        return out  # no call answered this round: every effect is new
    return out._replace(effects=calls.new_effects(out.effects))
