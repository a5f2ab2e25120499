"""Per-node registry of Ra systems and of the servers they run.

``ra_directory`` answers "which process is server X, which supervisor owns
it, which cluster is it in"; ``ra_leaderboard`` remembers the last leader
seen per cluster. Both are node-local tables in Ra (ETS); here they hang off
a `SystemHandle`, one per (node, system), found through the `Node` object so
two nodes in one OS process never share one and a stopped node's tables go
with it.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from actors.node import Node
from actors.pid import Pid
from ra.memory_disk import MemoryDisk

if TYPE_CHECKING:
    from ra.disk_store import DiskStore


@dataclass
class DirEntry:
    uid: str
    cluster_name: Any
    pid: Pid | None = None
    #: the server's ``ra_server_sup``
    parent: Pid | None = None


@dataclass
class SystemHandle:
    """What the processes of one Ra system on one node share."""

    name: str
    config: dict[str, Any]
    #: the system's durable state: in memory, or a data dir in durable mode
    disk: MemoryDisk | DiskStore
    #: registered names of the system's processes (``ra_system``'s ``names``)
    names: dict[str, str]
    directory: dict[str, DirEntry] = field(default_factory=dict)
    #: ``ra_leaderboard``: cluster name -> (leader id, members)
    leaderboard: dict[Any, tuple[Any, list[Any]]] = field(default_factory=dict)

    @property
    def wal_name(self) -> str:
        return self.names["wal"]


_SYSTEMS: weakref.WeakKeyDictionary[Node, dict[str, SystemHandle]] = weakref.WeakKeyDictionary()


def register_system(node: Node, handle: SystemHandle) -> None:
    _SYSTEMS.setdefault(node, {})[handle.name] = handle


def lookup(node: Node, system: str) -> SystemHandle | None:
    return _SYSTEMS.get(node, {}).get(system)


def system_names(system: str) -> dict[str, str]:
    """Registered names: the default system uses Ra's plain names."""
    prefix = "ra_" if system == "default" else f"ra_{system}_"
    return {
        "wal": f"{prefix}log_wal",
        "wal_sup": f"{prefix}log_wal_sup",
        "segment_writer": f"{prefix}log_segment_writer",
        "log_sup": f"{prefix}log_sup",
        "server_sup_sup": f"{prefix}server_sup_sup",
        "system_sup": f"ra_system_sup_{system}",
    }
