"""The pure core of a key-value store whose entries expire.

Input and the time in, ``(state, reply, effects)`` out: no clock, no I/O, no
processes. That makes every rule a row of a table test, and lets the shell decide
how an effect is carried out.
"""

from __future__ import annotations

from dataclasses import dataclass

#: what the core returns besides the new state: the reply and the effects
Result = tuple["State", object, list["Effect"]]


@dataclass(frozen=True)
class Put:
    """Store `value` under `key` for `ttl_ms` milliseconds."""

    key: str
    value: object
    ttl_ms: int


@dataclass(frozen=True)
class Get:
    """Read `key`; an entry whose time is up reads as missing even before `Expire`."""

    key: str


@dataclass(frozen=True)
class Expire:
    """A timer fired: drop every entry whose time is up."""


Command = Put | Get | Expire


@dataclass(frozen=True)
class StartTimer:
    """Effect: send `Expire()` to the store after `after_ms` milliseconds."""

    after_ms: int


Effect = StartTimer

#: key -> (value, the monotonic millisecond at which it expires)
State = dict[str, tuple[object, int]]


def apply(state: State, command: Command, now: int) -> Result:
    """The store's whole behaviour: one command at time `now` (milliseconds)."""
    match command:
        case Put(key, value, ttl_ms):
            return {**state, key: (value, now + ttl_ms)}, "ok", [StartTimer(ttl_ms)]
        case Get(key):
            entry = state.get(key)
            if entry is None or entry[1] <= now:
                return state, "not_found", []
            return state, ("ok", entry[0]), []
        case Expire():
            return {k: e for k, e in state.items() if e[1] > now}, None, []
