"""Supervisor flags and child specs: defaults, validation, the child record.

Validation returns the same error terms `supervisor.erl` throws (as tuples of
strings), so a caller can match on them exactly as Erlang code matches on
``{invalid_shutdown, X}``; everything is checked before anything is started,
because a half-validated tree is worse than none.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from actors.pid import Pid

__all__ = [
    "AUTO_SHUTDOWNS",
    "RESTART_TYPES",
    "STRATEGIES",
    "Child",
    "InvalidSpec",
    "Restarting",
    "check_childspec",
    "check_flags",
    "check_startspec",
    "child_to_spec",
]

STRATEGIES = ("one_for_one", "one_for_all", "rest_for_one", "simple_one_for_one")
RESTART_TYPES = ("permanent", "transient", "temporary")
CHILD_TYPES = ("worker", "supervisor")
AUTO_SHUTDOWNS = ("never", "any_significant", "all_significant")

DEFAULT_FLAGS: dict[str, Any] = {
    "strategy": "one_for_one",
    "intensity": 1,
    "period": 5,
    "auto_shutdown": "never",
}


class InvalidSpec(Exception):
    """Internal: validation failed with the Erlang-shaped error term `term`."""

    def __init__(self, term: Any) -> None:
        super().__init__(term)
        self.term = term


@dataclass(frozen=True, slots=True)
class Restarting:
    """Erlang's ``{restarting, OldPid}``: a restart was tried and failed.

    Kept as a value distinct from any pid so the child cannot be mistaken for
    a running one (`which_children` shows ``"restarting"``); `pid` is the pid
    of the incarnation that died, or None inside a group restart.
    """

    pid: Pid | None


@dataclass(slots=True)
class Child:
    """The supervisor's record of one child spec plus its current process."""

    id: Any
    func: Any  # a callable or "pkg.mod:func"
    args: tuple[Any, ...] | None  # None: not kept (temporary children added later)
    restart: str
    shutdown: int | str
    type: str
    significant: bool
    modules: list[Any] | str
    pid: Pid | Restarting | None = None

    @property
    def is_permanent(self) -> bool:
        return self.restart == "permanent"

    @property
    def is_temporary(self) -> bool:
        return self.restart == "temporary"


def check_flags(flags: Any) -> dict[str, Any]:
    """Complete `flags` with defaults; raise `InvalidSpec` like `check_flags/1`."""
    if isinstance(flags, tuple) and len(flags) == 3:
        strategy, intensity, period = flags
        flags = {"strategy": strategy, "intensity": intensity, "period": period}
    if not isinstance(flags, dict):
        raise InvalidSpec(("invalid_type", flags))
    full = {**DEFAULT_FLAGS, **flags}
    if full["strategy"] not in STRATEGIES:
        raise InvalidSpec(("invalid_strategy", full["strategy"]))
    if type(full["intensity"]) is not int or full["intensity"] < 0:
        raise InvalidSpec(("invalid_intensity", full["intensity"]))
    if type(full["period"]) is not int or full["period"] <= 0:
        raise InvalidSpec(("invalid_period", full["period"]))
    if full["auto_shutdown"] not in AUTO_SHUTDOWNS:
        raise InvalidSpec(("invalid_auto_shutdown", full["auto_shutdown"]))
    return full


def check_startspec(specs: Any, auto_shutdown: str | None) -> list[Child]:
    """Validate a list of specs in order; duplicate ids are an error."""
    if not isinstance(specs, list | tuple):
        raise InvalidSpec(("invalid_child_spec", specs))
    children: list[Child] = []
    seen: set[Any] = set()
    for spec in specs:
        child = check_childspec(spec, auto_shutdown)
        if child.id in seen:
            # supervisor.erl keeps the historical name of this error
            raise InvalidSpec(("duplicate_child_name", child.id))
        seen.add(child.id)
        children.append(child)
    return children


def check_childspec(spec: Any, auto_shutdown: str | None) -> Child:
    """One spec to a `Child`, or `InvalidSpec`.

    `auto_shutdown` None means "not known" (`check_childspecs/1`): then only
    the significant/permanent combination is checked.
    """
    if isinstance(spec, tuple) and len(spec) == 6:
        id_, start, restart, shutdown, type_, modules = spec
        spec = {"id": id_, "start": start, "restart": restart, "shutdown": shutdown,
                "type": type_, "modules": modules}
    if not isinstance(spec, dict):
        raise InvalidSpec(("invalid_child_spec", spec))
    if "id" not in spec:
        raise InvalidSpec("missing_id")
    if "start" not in spec:
        raise InvalidSpec("missing_start")
    id_ = spec["id"]
    if not isinstance(id_, Hashable):
        raise InvalidSpec(("invalid_id", id_))
    start = spec["start"]
    func, args = _check_start(start)
    restart = spec.get("restart", "permanent")
    if restart not in RESTART_TYPES:
        raise InvalidSpec(("invalid_restart_type", restart))
    significant = spec.get("significant", False)
    _check_significant(significant, restart, auto_shutdown)
    type_ = spec.get("type", "worker")
    if type_ not in CHILD_TYPES:
        raise InvalidSpec(("invalid_child_type", type_))
    shutdown = spec.get("shutdown", 5000 if type_ == "worker" else "infinity")
    if not (shutdown in ("infinity", "brutal_kill")
            or (type(shutdown) is int and shutdown >= 0)):
        raise InvalidSpec(("invalid_shutdown", shutdown))
    modules = spec.get("modules", [_module_of(func)])
    _check_modules(modules)
    return Child(id=id_, func=func, args=tuple(args), restart=restart, shutdown=shutdown,
                 type=type_, significant=significant, modules=modules)


def _check_start(start: Any) -> tuple[Any, Any]:
    if isinstance(start, tuple | list) and len(start) == 2:
        func, args = start
        good_func = callable(func) or (isinstance(func, str) and ":" in func)
        if good_func and isinstance(args, list | tuple):
            return func, args
    raise InvalidSpec(("invalid_mfa", start))


def _check_significant(significant: Any, restart: str, auto_shutdown: str | None) -> None:
    if significant is True and auto_shutdown == "never":
        raise InvalidSpec(("bad_combination", [("auto_shutdown", "never"), ("significant", True)]))
    if significant is True and restart == "permanent":
        raise InvalidSpec(("bad_combination", [("restart", "permanent"), ("significant", True)]))
    if type(significant) is not bool:
        raise InvalidSpec(("invalid_significant", significant))


def _check_modules(modules: Any) -> None:
    if modules == "dynamic":
        return
    if not isinstance(modules, list):
        raise InvalidSpec(("invalid_modules", modules))
    for mod in modules:
        if not isinstance(mod, str | type):
            raise InvalidSpec(("invalid_module", mod))


def _module_of(func: Any) -> str:
    """The default `modules` entry: the module of the start function (Erlang's `M`)."""
    if isinstance(func, str):
        return func.partition(":")[0]
    return str(getattr(func, "__module__", None) or repr(func))


def child_to_spec(child: Child) -> dict[str, Any]:
    """The full spec map `get_childspec` returns (every key present)."""
    return {
        "id": child.id,
        "start": (child.func, child.args),
        "restart": child.restart,
        "significant": child.significant,
        "shutdown": child.shutdown,
        "type": child.type,
        "modules": child.modules,
    }


def resolve_func(func: Any) -> Callable[..., Any]:
    """A start function from a callable or ``"pkg.mod:func"``."""
    if callable(func):
        return func
    import importlib

    mod_name, _, attr = func.partition(":")
    obj: Any = importlib.import_module(mod_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj
