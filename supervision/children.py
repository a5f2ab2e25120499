"""The supervisor's two child stores, as `supervisor.erl` keeps them.

Static strategies keep an ordered list of ids plus a map id -> `Child`
(Erlang's ``{Ids, Db}``); the order is what makes start order, reverse stop
order and `rest_for_one` well defined. `supervisor.erl` stores the ids in
termination order; here they are in start order and reversed where Erlang
walks them as stored, which is observably the same.

`simple_one_for_one` keeps only one template `Child` and a map from each live
child's pid (or `Restarting` marker) to its start arguments, because such a
supervisor may hold very many children and none needs an id.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from actors.pid import Pid
from supervision.childspec import Child, Restarting

__all__ = ["Children", "Dynamics", "restarting"]


def restarting(pid: Pid | Restarting | None) -> Restarting | None:
    """Mark a child as restarting; an existing marker (or None) is kept as is."""
    if isinstance(pid, Pid):
        return Restarting(pid)
    return pid


class Children:
    """Ordered static children: ids in start order, records by id."""

    def __init__(self, children: list[Child]) -> None:
        self.ids: list[Any] = [c.id for c in children]
        self.db: dict[Any, Child] = {c.id: c for c in children}

    def __len__(self) -> int:
        return len(self.ids)

    def get(self, id_: Any) -> Child | None:
        try:
            return self.db.get(id_)
        except TypeError:  # an unhashable id cannot name any child
            return None

    def find_by_pid(self, pid: Any) -> Child | None:
        for child in self.db.values():
            if child.pid == pid:
                return child
        return None

    def start_order(self) -> Iterator[Child]:
        return (self.db[i] for i in self.ids)

    def termination_order(self) -> Iterator[Child]:
        return (self.db[i] for i in reversed(self.ids))

    def save(self, child: Child) -> None:
        """A child added at run time is the last started one."""
        self.ids.append(child.id)
        self.db[child.id] = child

    def remove(self, id_: Any) -> None:
        self.ids.remove(id_)
        del self.db[id_]

    def del_child(self, id_: Any) -> None:
        """The child's process is gone: a temporary spec goes with it."""
        child = self.db[id_]
        if child.is_temporary:
            self.remove(id_)
        else:
            child.pid = None

    def ids_from(self, id_: Any) -> list[Any]:
        """`id_` and every id started after it (what `rest_for_one` restarts)."""
        return self.ids[self.ids.index(id_):]


class Dynamics:
    """`simple_one_for_one` children: pid (or `Restarting`) -> start args.

    `restarts` counts the `Restarting` entries, so `count_children` can report
    active children without asking the runtime about every pid.
    """

    def __init__(self, template: Child) -> None:
        self.template = template
        self.db: dict[Pid | Restarting | None, tuple[Any, ...] | None] = {}
        self.restarts = 0

    def __len__(self) -> int:
        return len(self.db)

    def __contains__(self, key: Any) -> bool:
        try:
            return key in self.db
        except TypeError:
            return False

    def store(self, key: Pid | Restarting | None, args: tuple[Any, ...] | None) -> None:
        # temporary children are never restarted: their args are not kept
        self.db[key] = None if self.template.is_temporary else args

    def erase(self, key: Any) -> None:
        self.db.pop(key, None)

    def child(self, key: Pid | Restarting | None) -> Child:
        """The template with this child's pid and arguments filled in."""
        args = self.db.get(key, self.template.args)
        return dataclasses.replace(self.template, pid=key,
                                   args=args if args is not None else self.template.args)

    def pids(self) -> list[Pid]:
        return [k for k in self.db if isinstance(k, Pid)]
