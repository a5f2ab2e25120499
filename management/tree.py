"""The node's supervision tree as the live page draws it, with restart counts.

Walked from `warren_sup` with `which_children`, in a process of the node (the
calls wait in its mailbox). A supervisor is named by its registered name, else by
its callback module; its restarts are those `supervision.reports` counted under
that name.
"""

from __future__ import annotations

from typing import Any

import actors
from actors.pid import CallExit, Pid
from supervision import reports, supervisor

__all__ = ["ROOT", "supervision_tree"]

ROOT = "warren_sup"
#: a dynamic supervisor's children beyond this many are summed up, not listed
MAX_CHILDREN = 50


def _label(child_id: Any) -> str:
    return child_id if isinstance(child_id, str) else repr(child_id)


def _walk(pid: Pid, name: str, names: dict[Pid, str], restarts: dict[str, int],
          depth: int) -> dict[str, Any]:
    try:
        children = supervisor.which_children(pid)
    except CallExit:
        children = []
    rows = []
    for child_id, child, kind, modules in children[:MAX_CHILDREN]:
        row: dict[str, Any] = {"id": _label(child_id), "type": kind,
                               "pid": str(child) if isinstance(child, Pid) else child}
        if kind == "supervisor" and isinstance(child, Pid) and depth < 6:
            module = str(modules[0]) if isinstance(modules, list) and modules else ""
            row.update(_walk(child, names.get(child, module), names, restarts, depth + 1))
        rows.append(row)
    return {"name": name, "restarts": restarts.get(name, 0), "children": rows,
            "more_children": max(0, len(children) - MAX_CHILDREN)}


def supervision_tree() -> dict[str, Any]:
    """The tree under `warren_sup` of the node this runs on (a process of it)."""
    root = actors.whereis(ROOT)
    if root is None:
        return {"name": ROOT, "restarts": 0, "children": [], "more_children": 0}
    names: dict[Pid, str] = {}
    for name in actors.registered():
        pid = actors.whereis(name)
        if pid is not None:
            names[pid] = name
    return {"id": ROOT, "type": "supervisor", "pid": str(root),
            **_walk(root, ROOT, names, reports.restart_totals(actors.node()), 0)}
