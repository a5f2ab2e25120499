"""Supervisor reports (logging) and trace points.

Erlang's supervisor writes a report for every start ("progress") and for every
error (`child_terminated`, `start_error`, `shutdown_error`,
`reached_max_restart_intensity`). Here they go to the `warren.supervisor`
logger with the same context names, so a log reads like a SASL log; the
structured fields are also attached as ``extra`` for tests and handlers.

Trace points are the history's ``supervision_events`` (``started``,
``restarted``, ``crashed``, ``stopped``, ``intensity_exceeded``) keyed by an
actor path ``<node>/<supervisor>/<child id>`` that stays the same across
restarts (a restarted dynamic child keeps the path of the one it replaces).
They carry only plain values (pids, strings, ints) so any sink can pickle them.

Every event names the supervisor process that emits it (``sup_pid``); an event
about a child also carries the child's ``pid``, ``restart_type`` (``permanent``,
``transient``, ``temporary``), ``child_type`` (``worker``, ``supervisor``) and
``significant``, so a reader can tell a child that must be running from one
that may legitimately end, and link a supervisor's own events (its ``sup_pid``)
to its record as a child of its parent (that record's ``pid``).
"""

from __future__ import annotations

import logging
from typing import Any

import actors
from actors import trace
from actors.pid import Pid, is_clean_reason
from supervision.childspec import Child, Restarting

__all__ = [
    "count_restart",
    "log",
    "plain",
    "report_error",
    "report_progress",
    "restart_totals",
    "trace_child_exit",
    "trace_child_start",
    "trace_removed",
    "trace_restart",
    "trace_shutdown",
]

log = logging.getLogger("warren.supervisor")


def plain(term: Any) -> Any:
    """`term` if it is a plain picklable scalar or pid, else its repr."""
    if term is None or isinstance(term, str | int | float | bool | Pid):
        return term
    return repr(term)


def _offender(child: Child, pids: list[Any] | None = None) -> dict[str, Any]:
    pid: Any = child.pid
    if isinstance(pid, Restarting):
        pid = "restarting"
    offender: dict[str, Any] = {
        "id": child.id,
        "mfargs": (child.func, child.args),
        "restart_type": child.restart,
        "significant": child.significant,
        "shutdown": child.shutdown,
        "child_type": child.type,
    }
    if pids is None:
        offender["pid"] = pid
    else:
        offender["nb_children"] = len(pids)
    return offender


def report_error(context: str, reason: Any, child: Child, sup_name: Any,
                 pids: list[Any] | None = None) -> None:
    """A SUPERVISOR REPORT: `context` is Erlang's errorContext."""
    offender = _offender(child, pids)
    log.error(
        "supervisor %r: %s, reason %r, offender %r",
        sup_name, context, reason, offender,
        extra={"supervisor": sup_name, "error_context": context, "reason": reason,
               "offender": offender},
    )


def report_progress(child: Child, sup_name: Any) -> None:
    """A PROGRESS REPORT for a started child."""
    log.info("supervisor %r started %r (pid %r)", sup_name, child.id, child.pid,
             extra={"supervisor": sup_name, "started": _offender(child)})


# --- restart counts: what a node's metrics report -----------------------------------------

#: node -> supervisor -> restarts it made; always kept (the trace points below only
#: when a history is recorded). A supervisor without a registered name is counted
#: under its module, so the table stays as small as the tree's shape.
_restart_totals: dict[str, dict[str, int]] = {}


def count_restart(sup_name: Any) -> None:
    """One restart by the supervisor `sup_name` of this node."""
    if isinstance(sup_name, tuple) and len(sup_name) == 2 and isinstance(sup_name[0], Pid):
        label = str(sup_name[1])
    else:
        label = str(sup_name)
    per_node = _restart_totals.setdefault(actors.node(), {})
    per_node[label] = per_node.get(label, 0) + 1


def restart_totals(node: str) -> dict[str, int]:
    """The restarts `node`'s supervisors made so far, by supervisor."""
    return dict(_restart_totals.get(node, {}))


# --- trace points: the history's supervision_events ---------------------------------------

#: actor path -> restarts so far
_restarts: dict[str, int] = {}
#: pid of a dynamic child -> its actor path (kept by the child that replaces it)
_dynamic: dict[Pid, str] = {}


def sup_label(sup_name: Any) -> str:
    """A supervisor's name in actor paths: its registered name, else module and pid."""
    if isinstance(sup_name, tuple) and len(sup_name) == 2 and isinstance(sup_name[0], Pid):
        pid, module = sup_name
        return f"{module}<{pid.serial}.{pid.creation}>"
    return str(sup_name)


def _sup_path(sup_name: Any) -> str:
    return f"{actors.node()}/{sup_label(sup_name)}"


def _child_path(sup_name: Any, child: Child, pid: Any, dynamic: bool = False) -> str:
    if isinstance(pid, Pid):
        known = _dynamic.get(pid)
        if known is not None:
            return known
        if dynamic:
            path = f"{_sup_path(sup_name)}/{plain(child.id)}/{pid.serial}.{pid.creation}"
            _dynamic[pid] = path
            return path
    return f"{_sup_path(sup_name)}/{plain(child.id)}"


def _forget(path: str, pid: Any) -> None:
    if isinstance(pid, Pid) and _dynamic.pop(pid, None) is not None:
        _restarts.pop(path, None)


def actor_class(child: Child) -> str:
    """What a child runs: the qualified name of its start function."""
    func = child.func
    if isinstance(func, tuple) and func:
        return ":".join(str(f) for f in func[:2])
    owner = getattr(func, "__self__", None)
    name = getattr(func, "__qualname__", None) or repr(func)
    if owner is not None and not isinstance(owner, type):
        return f"{type(owner).__qualname__}.{getattr(func, '__name__', name)}"
    return f"{getattr(func, '__module__', '?')}.{name}"


def _self_pid() -> Pid | None:
    try:
        return actors.self()
    except actors.NotAProcess:
        return None


def _emit(kind: str, sup_name: Any, path: str, child: Child | None, **fields: Any) -> None:
    if child is not None:
        fields.update(restart_type=child.restart, child_type=child.type,
                      significant=child.significant)
    trace.emit(kind, actor_path=path, supervisor=sup_label(sup_name),
               actor_class=None if child is None else actor_class(child),
               restart_count=_restarts.get(path, 0), sup_pid=_self_pid(), **fields)


def trace_child_start(sup_name: Any, child: Child, pid: Pid, *, dynamic: bool = False,
                      replaces: Pid | Restarting | None = None) -> None:
    """``started``, or ``restarted`` when this child (id, or replaced pid) ran before.

    `dynamic` children (``simple_one_for_one``) are told apart by pid; a restarted
    one names the pid it `replaces`.
    """
    if not trace.enabled():
        return
    if replaces is not None and replaces in _dynamic:
        _dynamic[pid] = _dynamic.pop(replaces)
    path = _child_path(sup_name, child, pid, dynamic)
    if path in _restarts:
        _restarts[path] += 1
        kind = "restarted"
    else:
        _restarts[path] = 0
        kind = "started"
    _emit(kind, sup_name, path, child, pid=pid)


def trace_child_exit(sup_name: Any, child: Child, pid: Pid, reason: Any, context: str) -> None:
    """A child ended: ``crashed`` on an abnormal exit of its own, else ``stopped``.

    `context` is ``"exit"`` (the child ended by itself) or ``"shutdown"`` (stopped).
    """
    if not trace.enabled():
        return
    path = _child_path(sup_name, child, pid)
    crashed = context == "exit" and not is_clean_reason(reason)
    _emit("crashed" if crashed else "stopped", sup_name, path, child, pid=pid,
          reason=repr(reason), context=context)
    if context == "shutdown":
        _forget(path, pid)


def trace_removed(sup_name: Any, child: Child, pid: Pid) -> None:
    """The supervisor dropped an exited child it does not restart (temporary, transient)."""
    if not trace.enabled():
        return
    path = _child_path(sup_name, child, pid)
    _emit("stopped", sup_name, path, child, pid=pid, reason="not_restarted",
          context="removed")
    _forget(path, pid)


def trace_restart(sup_name: Any, child: Child, strategy: str, outcome: str) -> None:
    """A restart whose start failed leaves the child down until the retry."""
    if trace.enabled() and outcome != "ok":
        path = _child_path(sup_name, child, child.pid)
        _emit("crashed", sup_name, path, child, reason="restart_failed", strategy=strategy)


def trace_shutdown(sup_name: Any, reason: str) -> None:
    """The supervisor gives up: ``intensity_exceeded``, or ``stopped`` (auto shutdown)."""
    if trace.enabled():
        kind = "intensity_exceeded" if reason == "reached_max_restart_intensity" else "stopped"
        _emit(kind, sup_name, _sup_path(sup_name), None, reason=reason)
