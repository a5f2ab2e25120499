"""OTP's supervisor: a gen_server that traps exits and keeps children alive.

The structure follows `supervisor.erl` closely — the same state (flags, ordered
child specs or the dynamic-children map, the list of restart times), the same
functions (`do_restart`, `restart`, `try_again_restart`,
`terminate_children`, `do_auto_shutdown`) and the same return and error terms
— so that a supervision tree built here fails, restarts and escalates the way
the Erlang tree it models does.

A callback module is any object (class, instance or ``"pkg.mod:Name"``) whose
``init(args)`` returns ``("ok", (flags, [child_spec, ...]))`` or ``"ignore"``.

Everything the supervisor does to a child happens inside the supervisor's own
process and blocks it: starts are synchronous, stops wait for the child's
DOWN. Only a failed restart yields, by casting a retry to itself, so that a
request such as a shutdown can get in between two attempts.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Protocol

import actors
from actors import gen, gen_server
from actors.gen_server import GenServer
from actors.pid import Pid, ProcessExit, exception_reason, is_clean_reason
from supervision import reports
from supervision.children import Children, Dynamics, restarting
from supervision.childspec import (
    AUTO_SHUTDOWNS,
    Child,
    InvalidSpec,
    Restarting,
    check_childspec,
    check_flags,
    check_startspec,
    child_to_spec,
    resolve_func,
)
from supervision.intensity import add_restart, bucket
from supervision.shutdown import shutdown, terminate_dynamic_children

__all__ = [
    "SupervisorModule",
    "SupervisorServer",
    "check_childspecs",
    "count_children",
    "delete_child",
    "get_childspec",
    "restart_child",
    "start_child",
    "start_link",
    "terminate_child",
    "which_children",
]


class SupervisorModule(Protocol):
    """What a supervisor callback module provides."""

    def init(self, args: Any) -> Any: ...


# ------------------------------------------------------------------ public API


def start_link(module: Any, args: Any = None, name: str | None = None) -> Any:
    """Start a supervisor linked to the caller; returns once all children started.

    ``("ok", pid)``, ``"ignore"`` or ``("error", reason)`` — with reason
    ``("shutdown", ("failed_to_start_child", id, why))`` when a child failed.
    """
    mod = gen.resolve_module(module)
    return gen_server.start_link(SupervisorServer(mod), (name, args), name=name)


def _call(sup: Any, request: Any) -> Any:
    return gen_server.call(sup, request, None)


def start_child(sup: Any, spec_or_extra_args: Any) -> Any:
    """Add and start a child (a spec, or extra start args for simple_one_for_one)."""
    return _call(sup, ("start_child", spec_or_extra_args))


def terminate_child(sup: Any, id_or_pid: Any) -> Any:
    """Stop a child; its spec stays (unless temporary). No restart, no intensity."""
    return _call(sup, ("terminate_child", id_or_pid))


def restart_child(sup: Any, id_: Any) -> Any:
    """Start again a child whose spec is kept but which is not running."""
    return _call(sup, ("restart_child", id_))


def delete_child(sup: Any, id_: Any) -> Any:
    """Forget the spec of a child that is not running."""
    return _call(sup, ("delete_child", id_))


def get_childspec(sup: Any, id_or_pid: Any) -> Any:
    return _call(sup, ("get_childspec", id_or_pid))


def which_children(sup: Any) -> list[tuple[Any, Any, str, Any]]:
    """``(id, pid | "restarting" | None, type, modules)``, last started first."""
    return _call(sup, "which_children")


def count_children(sup: Any) -> dict[str, int]:
    return _call(sup, "count_children")


def check_childspecs(specs: Any, auto_shutdown: str | None = None) -> Any:
    """``"ok"`` if every spec is valid (for `auto_shutdown`, when given), else ``("error", e)``."""
    if not isinstance(specs, list):
        return ("error", ("badarg", specs))
    if auto_shutdown is not None and auto_shutdown not in AUTO_SHUTDOWNS:
        return ("error", ("badarg", auto_shutdown))
    try:
        check_startspec(specs, auto_shutdown)
    except InvalidSpec as exc:
        return ("error", exc.term)
    return "ok"


# ----------------------------------------------------------------------- state


@dataclass(slots=True)
class State:
    """`supervisor.erl`'s ``#state{}``."""

    name: Any
    module: Any
    args: Any
    strategy: str
    intensity: int
    period: int
    auto_shutdown: str
    children: Children = field(default_factory=lambda: Children([]))
    dynamics: Dynamics | None = None
    restarts: list[int] = field(default_factory=list)  # whole seconds, newest first

    @property
    def is_simple(self) -> bool:
        return self.strategy == "simple_one_for_one"


def _stopped_child(state: State, id_: Any) -> Child | tuple[str, str]:
    """The child `id_` when it may be restarted or deleted, else OTP's error for why not.

    ``restart_child`` and ``delete_child`` accept only a static child that is neither
    running nor waiting for a delayed restart.
    """
    if state.is_simple:
        return ("error", "simple_one_for_one")
    child = state.children.get(id_)
    if child is None:
        return ("error", "not_found")
    if isinstance(child.pid, Restarting):
        return ("error", "restarting")
    if child.pid is not None:
        return ("error", "running")
    return child


# ----------------------------------------------------------- starting children


def _do_start_child_i(func: Any, args: tuple[Any, ...]) -> Any:
    """Call a start function; normalise its result like OTP's ``catch apply``."""
    try:
        result = resolve_func(func)(*args)
    except ProcessExit as exc:
        if actors.current().dead:
            raise
        return ("error", ("EXIT", exc.reason))
    except Exception as exc:
        return ("error", ("EXIT", exception_reason(exc)))
    match result:
        case ("ok", Pid()):
            return result
        case ("ok", Pid(), _):
            return result
        case "ignore":
            return ("ok", None)
        case ("error", _):
            return result
        case _:
            return ("error", result)


def _do_start_child(state: State, child: Child) -> Any:
    result = _do_start_child_i(child.func, child.args or ())
    if result[0] == "ok" and result[1] is not None:
        pid = result[1]
        reports.report_progress(dataclasses.replace(child, pid=pid), state.name)
        reports.trace_child_start(state.name, child, pid)
    return result


class SupervisorServer(GenServer):
    """The gen_server callbacks of the supervisor behaviour."""

    def __init__(self, module: Any) -> None:
        self.mod = module

    # ---------------------------------------------------------------- init

    def init(self, args: Any) -> Any:
        sup_name, mod_args = args
        actors.process_flag("trap_exit", True)
        mod = self.mod
        if sup_name is None:
            sup_name = (actors.self(), type(mod).__qualname__)
        result = mod.init(mod_args)
        match result:
            case ("ok", (flags, specs)):
                pass
            case "ignore":
                return "ignore"
            case _:
                return ("stop", ("bad_return", (type(mod).__qualname__, "init", result)))
        try:
            f = check_flags(flags)
        except InvalidSpec as exc:
            return ("stop", ("supervisor_data", exc.term))
        state = State(name=sup_name, module=mod, args=mod_args, strategy=f["strategy"],
                      intensity=f["intensity"], period=f["period"],
                      auto_shutdown=f["auto_shutdown"])
        if state.is_simple:
            return self._init_dynamic(state, specs)
        return self._init_children(state, specs)

    def _init_children(self, state: State, specs: Any) -> Any:
        try:
            state.children = Children(check_startspec(specs, state.auto_shutdown))
        except InvalidSpec as exc:
            return ("stop", ("start_spec", exc.term))
        failed = self._start_children(state, list(state.children.ids))
        if failed is not None:
            self._terminate_children(state, list(state.children.ids))
            return ("stop", ("shutdown", ("failed_to_start_child", *failed)))
        return ("ok", state)

    def _init_dynamic(self, state: State, specs: Any) -> Any:
        if not (isinstance(specs, list | tuple) and len(specs) == 1):
            return ("stop", ("bad_start_spec", specs))
        try:
            children = check_startspec(specs, state.auto_shutdown)
        except InvalidSpec as exc:
            return ("stop", ("start_spec", exc.term))
        state.children = Children(children)
        state.dynamics = Dynamics(children[0])
        return ("ok", state)

    # --------------------------------------------------------------- calls

    def handle_call(self, request: Any, from_: Any, state: State) -> Any:
        match request:
            case ("start_child", arg):
                reply = self._handle_start_child(state, arg)
            case ("terminate_child", arg):
                reply = self._handle_terminate_child(state, arg)
            case ("restart_child", arg):
                reply = self._handle_restart_child(state, arg)
            case ("delete_child", arg):
                reply = self._handle_delete_child(state, arg)
            case ("get_childspec", arg):
                child = self._find_child(state, arg)
                reply = ("error", "not_found") if child is None else ("ok", child_to_spec(child))
            case "which_children":
                reply = self._which_children(state)
            case "count_children":
                reply = self._count_children(state)
            case _:
                reports.log.error("supervisor %r: unexpected call %r", state.name, request)
                reply = ("error", ("badcall", request))
        return ("reply", reply, state)

    def _handle_start_child(self, state: State, arg: Any) -> Any:
        if state.is_simple:
            dyn = state.dynamics
            assert dyn is not None
            if not isinstance(arg, list | tuple):
                return ("error", ("badarg", arg))
            args = tuple(dyn.template.args or ()) + tuple(arg)
            result = _do_start_child_i(dyn.template.func, args)
            if result[0] == "ok" and result[1] is not None:
                dyn.store(result[1], args)
                reports.trace_child_start(state.name, dyn.template, result[1], dynamic=True)
            return result
        try:
            child = check_childspec(arg, state.auto_shutdown)
        except InvalidSpec as exc:
            return ("error", exc.term)
        old = state.children.get(child.id)
        if old is not None:
            if isinstance(old.pid, Pid):
                return ("error", ("already_started", old.pid))
            return ("error", "already_present")
        result = _do_start_child(state, child)
        match result:
            case ("ok", None) if child.is_temporary:
                return result
            case ("ok", pid, *_):
                child.pid = pid
                if child.is_temporary:
                    # never restarted, so its arguments need not be kept
                    child.args = None
                state.children.save(child)
                return result
            case ("error", ("already_started", _)):
                return result
            case (_, what):
                return ("error", (what, child_to_spec(child)))
        return result

    def _handle_terminate_child(self, state: State, arg: Any) -> Any:
        if state.is_simple and not isinstance(arg, Pid):
            return ("error", "simple_one_for_one")
        child = self._find_child(state, arg)
        if child is None:
            return ("error", "not_found")
        self._do_terminate(state, child)
        self._del_child(state, child)
        return "ok"

    def _handle_restart_child(self, state: State, id_: Any) -> Any:
        child = _stopped_child(state, id_)
        if isinstance(child, tuple):
            return child
        result = _do_start_child(state, child)
        if result[0] == "ok":
            child.pid = result[1]
        return result

    def _handle_delete_child(self, state: State, id_: Any) -> Any:
        found = _stopped_child(state, id_)
        if isinstance(found, tuple):
            return found
        state.children.remove(id_)
        return "ok"

    def _which_children(self, state: State) -> list[tuple[Any, Any, str, Any]]:
        if state.is_simple:
            dyn = state.dynamics
            assert dyn is not None
            t = dyn.template
            return [(None, "restarting" if isinstance(k, Restarting) else k, t.type, t.modules)
                    for k in dyn.db]
        return [(c.id, "restarting" if isinstance(c.pid, Restarting) else c.pid, c.type,
                 c.modules) for c in state.children.termination_order()]

    def _count_children(self, state: State) -> dict[str, int]:
        if state.is_simple:
            dyn = state.dynamics
            assert dyn is not None
            size = len(dyn)
            sups = size if dyn.template.type == "supervisor" else 0
            return {"specs": 1, "active": size - dyn.restarts, "supervisors": sups,
                    "workers": size - sups}
        counts = {"specs": 0, "active": 0, "supervisors": 0, "workers": 0}
        for child in state.children.start_order():
            counts["specs"] += 1
            counts["supervisors" if child.type == "supervisor" else "workers"] += 1
            if isinstance(child.pid, Pid) and _is_alive(child.pid):
                counts["active"] += 1
        return counts

    # ---------------------------------------------------- casts and infos

    def handle_cast(self, msg: Any, state: State) -> Any:
        match msg:
            case ("try_again_restart", key):
                # the child may have been stopped or deleted meanwhile
                child = self._find_child_and_args(state, key)
                pending = child is not None and isinstance(child.pid, Restarting)
                if pending and child is not None and self._restart(state, child) == "shutdown":
                    return ("stop", "shutdown", state)
            case _:
                reports.log.error("supervisor %r: unexpected cast %r", state.name, msg)
        return ("noreply", state)

    def handle_info(self, msg: Any, state: State) -> Any:
        match msg:
            case ("EXIT", Pid() as pid, reason):
                child = self._find_child_and_args(state, pid)
                if child is not None and self._do_restart(state, reason, child) == "shutdown":
                    return ("stop", "shutdown", state)
            case _:
                reports.log.error("supervisor %r received unexpected message: %r",
                                  state.name, msg)
        return ("noreply", state)

    def terminate(self, reason: Any, state: State) -> None:
        if state.is_simple:
            self._terminate_dynamic_children(state)
        else:
            self._terminate_children(state, list(state.children.ids))

    # ------------------------------------------------------------ lookups

    def _find_child(self, state: State, key: Any) -> Child | None:
        """By id; on simple_one_for_one also by pid (a dead pid finds the template)."""
        if state.is_simple and isinstance(key, Pid):
            dyn = state.dynamics
            assert dyn is not None
            if key in dyn:
                return dyn.child(key)
            if Restarting(key) in dyn:
                return dyn.child(Restarting(key))
            if _is_alive(key):
                return None
            return dataclasses.replace(dyn.template, pid=None)
        return state.children.get(key)

    def _find_child_and_args(self, state: State, key: Any) -> Child | None:
        """The child an EXIT or a retry is about: by pid / marker, or by id."""
        if state.is_simple:
            dyn = state.dynamics
            assert dyn is not None
            return dyn.child(key) if key in dyn else None
        if isinstance(key, Pid | Restarting):
            return state.children.find_by_pid(key)
        return state.children.get(key)

    def _del_child(self, state: State, child: Child) -> None:
        if state.is_simple:
            assert state.dynamics is not None
            state.dynamics.erase(child.pid)
        elif child.id in state.children.db:
            state.children.del_child(child.id)

    # ----------------------------------------------------------- restarts

    def _do_restart(self, state: State, reason: Any, child: Child) -> str:
        """A child exited on its own: restart it, or drop it and check auto shutdown."""
        pid = child.pid
        assert isinstance(pid, Pid)
        reports.trace_child_exit(state.name, child, pid, reason, "exit")
        clean = is_clean_reason(reason)
        if child.is_permanent:
            if clean:
                reports.log.info("supervisor %r: permanent child %r exited with %r",
                                 state.name, child.id, reason)
            else:
                reports.report_error("child_terminated", reason, child, state.name)
            return self._restart(state, child)
        if clean:
            reports.trace_removed(state.name, child, pid)
            self._del_child(state, child)
            return self._do_auto_shutdown(state, child)
        reports.report_error("child_terminated", reason, child, state.name)
        if child.restart == "transient":
            return self._restart(state, child)
        reports.trace_removed(state.name, child, pid)
        self._del_child(state, child)
        return self._do_auto_shutdown(state, child)

    def _do_auto_shutdown(self, state: State, child: Child) -> str:
        if state.auto_shutdown == "never" or not child.significant:
            return "ok"
        if state.auto_shutdown == "all_significant":
            if state.is_simple:
                assert state.dynamics is not None
                if len(state.dynamics):
                    return "ok"
            elif any(c.pid is not None and c.significant
                     for c in state.children.start_order()):
                return "ok"
        reports.trace_shutdown(state.name, "auto_shutdown")
        return "shutdown"

    def _restart(self, state: State, child: Child) -> str:
        """Count the restart against intensity, then apply the strategy.

        A failed start leaves the child `Restarting` and casts a retry to
        ourselves, so the retry is queued behind whatever already waits.
        """
        now = bucket(actors.get_node().clock.monotonic())
        state.restarts, give_up = add_restart(state.restarts, now, state.period,
                                              state.intensity)
        if give_up:
            reports.report_error("shutdown", "reached_max_restart_intensity", child, state.name)
            reports.trace_shutdown(state.name, "reached_max_restart_intensity")
            self._del_child(state, child)
            return "shutdown"
        reports.count_restart(state.name)
        retry = self._restart_by_strategy(state, child)
        reports.trace_restart(state.name, child, state.strategy,
                              "ok" if retry is None else "failed")
        if retry is not None:
            gen_server.cast(actors.self(), ("try_again_restart", retry))
        return "ok"

    def _restart_by_strategy(self, state: State, child: Child) -> Any:
        """Returns None on success, else the key of the child to retry."""
        old_pid = child.pid
        if state.is_simple:
            return self._restart_dynamic(state, child)
        children = state.children
        if state.strategy == "one_for_one":
            result = _do_start_child(state, child)
            stored = children.db[child.id]
            if result[0] == "ok":
                stored.pid = result[1]
                return None
            stored.pid = restarting(old_pid)
            reports.report_error("start_error", result[1], child, state.name)
            return child.id
        if state.strategy == "rest_for_one":
            ids = children.ids_from(child.id)
            children.db[child.id].pid = None
        else:  # one_for_all
            ids = list(children.ids)
            children.del_child(child.id)
        return self._restart_multiple(state, child.id, old_pid, ids)

    def _restart_dynamic(self, state: State, child: Child) -> Any:
        dyn = state.dynamics
        assert dyn is not None
        old_pid = child.pid
        if isinstance(old_pid, Restarting):
            dyn.restarts -= 1
        dyn.erase(old_pid)
        args = child.args or ()
        result = _do_start_child_i(child.func, args)
        if result[0] == "ok":
            dyn.store(result[1], args)
            if result[1] is not None:
                reports.trace_child_start(state.name, child, result[1], dynamic=True,
                                          replaces=old_pid)
            return None
        marker = restarting(old_pid)
        dyn.restarts += 1
        dyn.store(marker, args)
        reports.report_error("start_error", result[1], child, state.name)
        return marker

    def _restart_multiple(self, state: State, failed_id: Any, old_pid: Any,
                          ids: list[Any]) -> Any:
        """Group restart: stop `ids` in reverse order, start them in order."""
        self._terminate_children(state, ids)
        failed = self._start_children(state, [i for i in ids if i in state.children.db])
        if failed is None:
            return None
        first_failed = failed[0]
        marker = restarting(old_pid) if first_failed == failed_id else Restarting(None)
        state.children.db[first_failed].pid = marker
        return first_failed

    # ------------------------------------------------------ start / stop

    def _start_children(self, state: State, ids: list[Any]) -> tuple[Any, Any] | None:
        """Start `ids` in order; stop at the first failure: ``(id, reason)``."""
        children = state.children
        for id_ in ids:
            child = children.db[id_]
            result = _do_start_child(state, child)
            match result:
                case ("ok", None) if child.is_temporary:
                    children.remove(id_)
                case ("ok", pid, *_):
                    child.pid = pid
                case (_, reason):
                    reports.report_error("start_error", reason, child, state.name)
                    return (id_, reason)
        return None

    def _terminate_children(self, state: State, ids: list[Any]) -> None:
        """Stop `ids` in reverse start order; temporary specs are dropped."""
        children = state.children
        for id_ in reversed(ids):
            child = children.db[id_]
            self._do_terminate(state, child)
            if child.is_temporary:
                children.remove(id_)
            else:
                child.pid = None

    def _do_terminate(self, state: State, child: Child) -> None:
        pid = child.pid
        if not isinstance(pid, Pid):
            return
        clean, reason = shutdown(child)
        reports.trace_child_exit(state.name, child, pid, reason, "shutdown")
        if not clean:
            reports.report_error("shutdown_error", reason, child, state.name)

    def _terminate_dynamic_children(self, state: State) -> None:
        dyn = state.dynamics
        assert dyn is not None
        errors: list[tuple[Any, list[Pid]]] = []
        for pid, reason, clean in terminate_dynamic_children(dyn.template, dyn.pids()):
            reports.trace_child_exit(state.name, dyn.template, pid, reason, "shutdown")
            if clean:
                continue
            for known, pids in errors:
                if known == reason:
                    pids.append(pid)
                    break
            else:
                errors.append((reason, [pid]))
        for reason, pids in errors:
            reports.report_error("shutdown_error", reason, dyn.template, state.name, pids)


def _is_alive(pid: Pid) -> bool:
    """`is_process_alive`, answering True for pids of other nodes (not checkable here)."""
    node = actors.get_node()
    if pid.node != node.name:
        return True
    return node.is_process_alive(pid)
