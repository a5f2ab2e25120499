"""Supervisor reports (logging) and trace points.

Erlang's supervisor writes a report for every start ("progress") and for every
error (`child_terminated`, `start_error`, `shutdown_error`,
`reached_max_restart_intensity`). Here they go to the `warren.supervisor`
logger with the same context names, so a log reads like a SASL log; the
structured fields are also attached as ``extra`` for tests and handlers. Trace
points carry only plain values (pids, strings, ints) so any sink can pickle
them.
"""

from __future__ import annotations

import logging
from typing import Any

from actors import trace
from actors.pid import Pid
from supervision.childspec import Child, Restarting

__all__ = [
    "log",
    "plain",
    "report_error",
    "report_progress",
    "trace_child_exit",
    "trace_child_start",
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


def trace_child_start(sup: Pid, child: Child, pid: Pid) -> None:
    if trace.enabled():
        trace.emit("supervisor_child_start", sup=sup, id=plain(child.id), pid=pid,
                   restart=child.restart, type=child.type)


def trace_child_exit(sup: Pid, child_id: Any, pid: Pid, reason: Any, context: str) -> None:
    """`context` is ``"exit"`` (the child ended by itself) or ``"shutdown"`` (stopped)."""
    if trace.enabled():
        trace.emit("supervisor_child_exit", sup=sup, id=plain(child_id), pid=pid,
                   reason=repr(reason), context=context)


def trace_restart(sup: Pid, child_id: Any, strategy: str, outcome: str) -> None:
    if trace.enabled():
        trace.emit("supervisor_restart", sup=sup, id=plain(child_id), strategy=strategy,
                   outcome=outcome)


def trace_shutdown(sup: Pid, reason: str) -> None:
    if trace.enabled():
        trace.emit("supervisor_shutdown", sup=sup, reason=reason)
