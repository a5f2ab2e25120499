"""What the in-memory log stack keeps "on disk" for one node's Ra system.

A Ra server's durable state outlives its process: the WAL's entries per
writer uid, the snapshot, checkpoints and recovery checkpoint, the meta row (``current_term``,
``voted_for``, ``last_applied``), the ``ra_log_snapshot_state`` row the WAL
reads, and the persisted server config that ``restart_server`` re-reads.
With the in-memory WAL that durable state is this object, owned by the
system (like ``ra_log_ets`` owns memtables), so servers and the WAL can
crash and restart and find it again. It does no I/O and holds no process.

`ra.disk_store.DiskStore` is the same interface over a real data dir; the
server shell and the system tree only use the methods below the fields
(`open_log`, `meta_of`, `save_snapshot`, the server registry), never which
kind of store it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ra.log import MemoryLog
from ra.log_base import Snapshot
from ra.types import Entry


@dataclass
class WriterLog:
    """The entries the WAL has written for one uid, and its sequence state."""

    entries: dict[int, Entry] = field(default_factory=dict)
    first: int = 1
    last: int = 0
    #: ``in_seq`` or ``out_of_seq`` (as ``ra_log_wal`` tracks each writer)
    seq_state: str = "in_seq"

    def write(self, entry: Entry) -> None:
        idx = entry[0]
        for stale in range(max(idx, self.first), self.last + 1):
            # an index at or below the last written one overwrites the suffix
            self.entries.pop(stale, None)
        if not self.entries:
            self.first = idx
        self.entries[idx] = entry
        self.last = idx

    def truncate_below(self, snap_idx: int) -> None:
        """Entries at or below a snapshot are not needed any more (the snapshot's live
        entries are kept apart, with the snapshot)."""
        for idx in range(self.first, min(snap_idx, self.last) + 1):
            self.entries.pop(idx, None)
        self.first = max(self.first, snap_idx + 1)

    def contiguous(self, start: int) -> list[Entry]:
        """Entries from `start` up to the first hole."""
        out: list[Entry] = []
        idx = start
        while idx in self.entries:
            out.append(self.entries[idx])
            idx += 1
        return out


@dataclass
class MemoryDisk:
    """Durable state of every server of one system on one node."""

    wal: dict[str, WriterLog] = field(default_factory=dict)
    #: uid -> (snapshot, checkpoints)
    snapshots: dict[str, tuple[Snapshot | None, list[Snapshot]]] = field(default_factory=dict)
    #: uid -> the recovery checkpoint written at its last orderly stop
    recovery_checkpoints: dict[str, Snapshot] = field(default_factory=dict)
    #: ``ra_log_snapshot_state``: uid -> snapshot index (the WAL drops entries at or below)
    snapshot_index: dict[str, int] = field(default_factory=dict)
    #: uid -> the entries kept below its snapshot at the snapshot's live indexes
    live_entries: dict[str, list[Entry]] = field(default_factory=dict)
    #: ``ra_log_meta``: uid -> {"current_term", "voted_for", "last_applied"}
    meta: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the persisted ``config`` file of every server: uid -> server config
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: ``names.dets``: server name -> uid
    names: dict[str, str] = field(default_factory=dict)

    def writer(self, uid: str) -> WriterLog:
        return self.wal.setdefault(uid, WriterLog())

    def smallest_live_index(self, uid: str) -> int:
        """Snapshot index + 1, or 0 when no snapshot is known."""
        snap = self.snapshot_index.get(uid)
        return 0 if snap is None else snap + 1

    def save_snapshot(self, uid: str, snap: Snapshot | None, checkpoints: list[Snapshot],
                      live_entries: list[Entry] | None = None) -> None:
        self.snapshots[uid] = (snap, list(checkpoints))
        self.live_entries[uid] = list(live_entries or [])
        if snap is not None:
            snap_idx = int(snap[0]["index"])
            self.snapshot_index[uid] = snap_idx
            self.writer(uid).truncate_below(snap_idx)
            rc = self.recovery_checkpoints.get(uid)
            if rc is not None and int(rc[0]["index"]) <= snap_idx:
                del self.recovery_checkpoints[uid]  # overtaken, as the log dropped it

    def save_recovery_checkpoint(self, uid: str, log: Any) -> None:
        """Keep what `log` holds as its recovery checkpoint (written as the server stops)."""
        rc = log.read_recovery_checkpoint()
        if rc is None:
            self.recovery_checkpoints.pop(uid, None)
        else:
            self.recovery_checkpoints[uid] = rc

    def meta_of(self, uid: str, _log: Any = None) -> MemoryMeta:
        """The meta row of `uid` (``current_term``, ``voted_for``, ``last_applied``)."""
        return MemoryMeta(self.meta.setdefault(uid, {}))

    def is_registered(self, uid: str, name: str) -> bool:
        return uid in self.configs or name in self.names

    def register_server(self, uid: str, name: str, config: dict[str, Any]) -> None:
        """Persist a new server's config and name (``ra_directory`` + ``config`` file)."""
        self.configs[uid] = dict(config)
        self.names[name] = uid

    def config_for(self, name: str) -> dict[str, Any] | None:
        """The persisted config of the server registered as `name`, if any."""
        uid = self.names.get(name)
        return None if uid is None else self.configs.get(uid)

    def uid_of(self, name: str) -> str | None:
        return self.names.get(name)

    def registered_names(self) -> list[str]:
        """Every server this system has a config for (what a node restarts at boot)."""
        return sorted(self.names)

    def open_log(self, uid: str, **log_args: Any) -> MemoryLog:
        """``ra_log:init``: snapshot, checkpoints and the written entries after them."""
        snap, ckpts = self.snapshots.get(uid, (None, []))
        start = 1 if snap is None else int(snap[0]["index"]) + 1
        wlog = self.wal.get(uid)
        entries = wlog.contiguous(start) if wlog is not None else []
        log = MemoryLog(entries, snapshot=snap, checkpoints=ckpts,
                        recovery_checkpoint=self.recovery_checkpoints.get(uid),
                        live_entries=self.live_entries.get(uid), **log_args)
        log.take_wal_writes()
        return log

    def forget(self, uid: str) -> None:
        """Delete everything of `uid` (``force_delete_server``)."""
        self.wal.pop(uid, None)
        self.snapshots.pop(uid, None)
        self.recovery_checkpoints.pop(uid, None)
        self.snapshot_index.pop(uid, None)
        self.live_entries.pop(uid, None)
        self.meta.pop(uid, None)
        self.configs.pop(uid, None)
        for name, known in list(self.names.items()):
            if known == uid:
                del self.names[name]


class MemoryMeta:
    """`ra.log_meta.LogMeta`'s interface over a dict that is durable by itself."""

    dirty = False

    def __init__(self, row: dict[str, Any]) -> None:
        self._row = row

    def fetch(self, key: str, default: Any = None) -> Any:
        value = self._row.get(key)
        return default if value is None else value

    def store(self, key: str, value: Any) -> None:
        self._row[key] = value

    def store_sync(self, key: str, value: Any) -> None:
        self._row[key] = value

    def sync(self) -> None:
        return None
