"""The `ra_machine` behaviour (Ra's ``ra_machine`` module) as a Python base class.

A machine is deterministic: `apply` must give the same state, reply and
effects on every member, because every member applies every committed entry.
Effects are the records of `ra.effect_types` (``SendMsg("send_msg", to,
msg)``, ``ReleaseCursor("release_cursor", idx, state)``, ``"garbage_collection"``
...), each equal to the Erlang-shaped tuple, so a trace reads like Ra's;
`ra.effects` decides which member executes each one.

Machines may subclass `Machine` or just provide the same method names
(duck typing); the server core calls the module-level helpers below, which
fall back to the behaviour's defaults when a method is absent.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterable
from typing import Any

from ra.effect_types import Effect
from ra.trace_context import TraceContext

Effects = list[Effect]


class Machine:
    """Base class carrying the defaults of the optional callbacks of Ra's ``ra_machine``."""

    def init(self, config: dict[str, Any]) -> Any:
        """Initial machine state; only called when no snapshot is recovered."""
        raise NotImplementedError

    def apply(self, meta: dict[str, Any], command: Any, state: Any) -> tuple[Any, ...]:
        """Return ``(state, reply)`` or ``(state, reply, effects_or_effect)``."""
        raise NotImplementedError

    def state_enter(self, ra_state: str, state: Any) -> Effects:
        """Called on every member for every Raft state entered (and ``eol``)."""
        return []

    def tick(self, time_ms: int, state: Any) -> Effects:
        """Called on the leader only, every ``tick_timeout``."""
        return []

    def init_aux(self, name: str) -> Any:
        return None

    def tracing(self) -> bool:
        """Whether the machine wants the server's `TraceContext` now (default: never).

        While it answers True, Ra calls ``apply`` and ``state_enter`` with the extra
        keyword argument ``trace_context``; while False, no context is built.
        """
        return False

    # ``handle_aux(ra_state, kind, cmd, aux_state, int_state)`` is optional, as in
    # Ra: a machine without it answers aux calls ``("error",
    # "aux_handler_not_implemented")``. `kind` is ``"cast"`` or ``("call", from)``;
    # it returns ``("reply", r, aux, int_state[, effects])`` or ``("no_reply",
    # aux, int_state[, effects])``; `int_state` is read through `ra.aux`.

    def overview(self, state: Any) -> Any:
        return state

    def version(self) -> int:
        return 0

    def which_module(self, version: int) -> Machine:
        """The machine implementation to use for `version` (default: self)."""
        return self

    def snapshot_installed(
        self, meta: dict[str, Any], state: Any, old_meta: Any, old_state: Any
    ) -> Effects:
        return []

    def live_indexes(self, state: Any) -> list[int]:
        """Indexes that must survive snapshotting; ``[]`` is plain Raft truncation."""
        return []


def flatten(effects: Any) -> Effects:
    """Flatten nested effect lists in order; a single effect becomes a list.

    Ra accepts one effect or an arbitrarily nested list and executes them
    depth-first, left to right.
    """
    if type(effects) is list:
        for eff in effects:
            if eff is None or isinstance(eff, list):
                break
        else:
            return effects[:]  # already flat, the usual case: one copy, no walk
    out: Effects = []
    _flatten_into(effects, out)
    return out


def _flatten_into(effects: Any, out: Effects) -> None:
    if isinstance(effects, list):
        for eff in effects:
            if isinstance(eff, list) or eff is None:
                _flatten_into(eff, out)
            else:
                out.append(eff)  # the usual case: no call per plain effect
    elif effects is None:
        return
    else:
        out.append(effects)


def normalise_apply_result(result: Any) -> tuple[Any, Any, Effects]:
    """Turn `apply`'s 2- or 3-tuple into ``(state, reply, flat_effects)``."""
    if not isinstance(result, tuple) or len(result) not in (2, 3):
        raise TypeError(f"machine apply must return (state, reply[, effects]), got {result!r}")
    if len(result) == 2:
        return result[0], result[1], []
    return result[0], result[1], flatten(result[2])


def tracing(machine: Any) -> bool:
    """Whether to build a `TraceContext` for `machine`'s next callbacks."""
    fun = getattr(machine, "tracing", None)
    return fun is not None and bool(fun())


def call_apply(
    machine: Any, meta: dict[str, Any], command: Any, state: Any,
    trace_context: TraceContext | None = None,
) -> tuple[Any, Any, Effects]:
    """``apply/3``; with `trace_context` (only for a machine that is `tracing`) as well."""
    if trace_context is None:
        return normalise_apply_result(machine.apply(meta, command, state))
    return normalise_apply_result(
        machine.apply(meta, command, state, trace_context=trace_context))


def call_state_enter(machine: Any, ra_state: str, state: Any,
                     trace_context: TraceContext | None = None) -> Effects:
    """``state_enter/2``; with `trace_context` (only for a machine that is `tracing`)."""
    fun = getattr(machine, "state_enter", None)
    if fun is None:
        return []
    if trace_context is None:
        return flatten(fun(ra_state, state))
    return flatten(fun(ra_state, state, trace_context=trace_context))


def call_tick(machine: Any, time_ms: int, state: Any) -> Effects:
    fun = getattr(machine, "tick", None)
    return flatten(fun(time_ms, state)) if fun is not None else []


def call_snapshot_installed(
    machine: Any, meta: dict[str, Any], state: Any, old_meta: Any, old_state: Any
) -> Effects:
    fun = getattr(machine, "snapshot_installed", None)
    return flatten(fun(meta, state, old_meta, old_state)) if fun is not None else []


@functools.cache
def _positional_params(fun: Any) -> int:
    params = inspect.signature(fun).parameters.values()
    return sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def aux_arity(fun: Any) -> int:
    """5 for ``handle_aux(ra_state, kind, cmd, aux, int_state)``; 6 for the legacy
    ``handle_aux(ra_state, kind, cmd, aux, log, machine_state)``."""
    target = getattr(fun, "__func__", fun)  # a bound method: count without `self`
    return _positional_params(target) - (1 if target is not fun else 0)


def version(machine: Any) -> int:
    fun = getattr(machine, "version", None)
    return int(fun()) if fun is not None else 0


def which_module(machine: Any, ver: int) -> Any:
    fun = getattr(machine, "which_module", None)
    return fun(ver) if fun is not None else machine


def overview(machine: Any, state: Any) -> Any:
    fun = getattr(machine, "overview", None)
    return fun(state) if fun is not None else state


def live_indexes(machine: Any, state: Any) -> Iterable[int]:
    fun = getattr(machine, "live_indexes", None)
    return fun(state) if fun is not None else []


class SimpleMachine(Machine):
    """``{simple, Fun/2, InitialState}``: replies with the new state after each command."""

    def __init__(self, fun: Any, initial_state: Any) -> None:
        self._fun = fun
        self._initial = initial_state

    def init(self, config: dict[str, Any]) -> Any:
        return self._initial

    def apply(self, meta: dict[str, Any], command: Any, state: Any) -> tuple[Any, ...]:
        new_state = self._fun(command, state)
        return (new_state, new_state)
