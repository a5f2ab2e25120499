"""The durable state of one node's Ra system in a real data dir.

`ra.memory_disk.MemoryDisk` keeps a system's durable state in memory so that
tests can crash processes, not the node. A node that really dies (SIGKILL,
power loss) can only come back from files, laid out as Ra lays them out
(``ra_system`` and ``ra_directory``):

```
<data_dir>/names                 server name -> uid (Ra's names.dets)
<data_dir>/wal/*.wal             the node's WAL files and writers.snapshot
<data_dir>/<uid>/config          the server config restart_server re-reads
<data_dir>/<uid>/meta            current_term, voted_for, last_applied
<data_dir>/<uid>/*.segment, snapshots/, checkpoints/, recovery_checkpoint/
```

This store offers the server shell and the system tree the same methods as
`MemoryDisk` and starts the disk WAL and segment writer for the system tree
(`disk_wal_start`, `disk_segment_writer_start`). It owns the node's
`LogEts` (memtables outlive a WAL or server crash, as ``ra_log_ets`` does)
and counts the syncs it hands out, so a benchmark can report fsyncs per
command. Server configs hold the machine object and are stored with
cloudpickle; everything else is plain pickle.
"""

from __future__ import annotations

import os
import pickle
import shutil
import threading
from collections.abc import Callable
from typing import Any

import cloudpickle

from ra import segment as ra_segment
from ra import segment_writer as ra_sw
from ra import wal as ra_wal
from ra.disk_log import DiskLog
from ra.durable import make_dirs, replace_file, restrict_tree
from ra.log_ets import LogEts
from ra.log_meta import LogMeta

NAMES_FILE = "names"
CONFIG_FILE = "config"
WAL_DIR = "wal"

_SYNC: dict[str, Callable[[int], None]] = {
    "datasync": os.fdatasync, "sync": os.fsync, "none": lambda _fd: None}


class SyncCounter:
    """An fsync function that counts its calls (from any thread)."""

    def __init__(self, sync: Callable[[int], None]) -> None:
        #: the sync function (the WAL swaps fdatasync for fsync where it cannot pre-allocate)
        self.sync = sync
        self._lock = threading.Lock()
        self.calls = 0

    def __call__(self, fd: int) -> None:
        self.sync(fd)
        with self._lock:
            self.calls += 1


class DiskStore:
    """Everything of one system on one node that must survive the node."""

    def __init__(self, data_dir: str, wal_sync_method: str = "datasync") -> None:
        self.data_dir = os.path.abspath(data_dir)
        self.wal_dir = os.path.join(self.data_dir, WAL_DIR)
        restrict_tree(self.data_dir)
        make_dirs(self.wal_dir)
        self.log_ets = LogEts()
        #: the WAL's syncs (one per batch) and every other sync (segments, snapshots, meta)
        self.wal_sync = SyncCounter(_SYNC[wal_sync_method])
        self.other_sync = SyncCounter(os.fsync)
        self._names: dict[str, str] = self._load_names()

    # ---- the server registry (names file and per-server config) -----------

    def _load_names(self) -> dict[str, str]:
        try:
            with open(os.path.join(self.data_dir, NAMES_FILE), "rb") as f:
                return dict(pickle.load(f))
        except FileNotFoundError:
            return {}

    def _save_names(self) -> None:
        replace_file(os.path.join(self.data_dir, NAMES_FILE),
                     pickle.dumps(self._names, protocol=5), self.other_sync)

    def server_dir(self, uid: str) -> str:
        return ra_sw.server_dir(self.data_dir, uid)

    def is_registered(self, uid: str, name: str) -> bool:
        return name in self._names or os.path.exists(
            os.path.join(self.server_dir(uid), CONFIG_FILE))

    def register_server(self, uid: str, name: str, config: dict[str, Any]) -> None:
        """Write the server's ``config`` file, then its name: a name always has a config."""
        directory = self.server_dir(uid)
        make_dirs(directory)
        replace_file(os.path.join(directory, CONFIG_FILE),
                     cloudpickle.dumps(dict(config)), self.other_sync)
        self._names[name] = uid
        self._save_names()

    def has_uid(self, uid: str) -> bool:
        """Whether a registered server has this uid (the WAL recovers only theirs)."""
        return uid in self._names.values()

    def uid_of(self, name: str) -> str | None:
        return self._names.get(name)

    def registered_names(self) -> list[str]:
        """Every server this system has a config for (what a node restarts at boot)."""
        return sorted(self._names)

    def config_for(self, name: str) -> dict[str, Any] | None:
        uid = self._names.get(name)
        if uid is None:
            return None
        try:
            with open(os.path.join(self.server_dir(uid), CONFIG_FILE), "rb") as f:
                return dict(pickle.load(f))
        except FileNotFoundError:
            return None

    def forget(self, uid: str) -> None:
        """``force_delete_server``: the server's directory, name and memtables go."""
        shutil.rmtree(self.server_dir(uid), ignore_errors=True)
        for name in [n for n, u in self._names.items() if u == uid]:
            del self._names[name]
        self._save_names()
        self.log_ets.delete_mem_tables(uid)
        self.log_ets.snapshot_state.pop(uid, None)
        self.log_ets.directory.pop(uid, None)

    # ---- what a server process opens ---------------------------------------

    def open_log(self, uid: str, **log_args: Any) -> DiskLog:
        """Recover the server's log; call from the server process (it owns the uid)."""
        return DiskLog.open(self.server_dir(uid), uid, self.log_ets, fsync=self.other_sync,
                            **log_args)

    def meta_of(self, uid: str, log: Any = None) -> LogMeta:
        if isinstance(log, DiskLog):
            return log.meta
        return LogMeta(self.server_dir(uid), self.other_sync)

    def save_snapshot(self, uid: str, snap: Any, checkpoints: list[Any],
                      live_entries: list[Any] | None = None) -> None:
        """A `DiskLog` writes its snapshots itself (``bg_work``): nothing to do."""
        return None

    def save_recovery_checkpoint(self, uid: str, log: Any) -> None:
        """A `DiskLog` writes its recovery checkpoint itself: nothing to do."""
        return None

    def syncs(self) -> dict[str, int]:
        return {"wal": self.wal_sync.calls, "other": self.other_sync.calls}


# ---- the system tree's start functions (``wal_start``, ``segment_writer_start``)


def disk_wal_start(handle: Any) -> Any:
    """Start the disk WAL of the system in `handle` (its store is a `DiskStore`)."""
    store: DiskStore = handle.disk
    cfg = handle.config
    return ra_wal.start_link(ra_wal.WalConfig(
        dir=store.wal_dir,
        log_ets=store.log_ets,
        wal_max_size_bytes=int(cfg.get("wal_max_size_bytes",
                                       ra_wal.DEFAULT_WAL_MAX_SIZE_BYTES)),
        wal_max_entries=_opt_int(cfg.get("wal_max_entries")),
        wal_max_batch_size=int(cfg.get("wal_max_batch_size",
                                       ra_wal.DEFAULT_WAL_MAX_BATCH_SIZE)),
        wal_compute_checksums=bool(cfg.get("wal_compute_checksums", True)),
        wal_pre_allocate=bool(cfg.get("wal_pre_allocate", False)),
        fsync=store.wal_sync,
        registered=store.has_uid,
        segment_writer=handle.names["segment_writer"],
        name=handle.wal_name,
    ))


def _opt_int(value: Any) -> int | None:
    """A config key whose absence (or ``undefined``) means no limit."""
    return None if value is None or value == "undefined" else int(value)


def disk_segment_writer_start(handle: Any) -> Any:
    store: DiskStore = handle.disk
    return ra_sw.start_link(ra_sw.SegmentWriterConfig(
        data_dir=store.data_dir,
        log_ets=store.log_ets,
        segment_max_entries=int(handle.config.get("segment_max_entries",
                                                  ra_segment.DEFAULT_SEGMENT_MAX_ENTRIES)),
        segment_compute_checksums=bool(handle.config.get("segment_compute_checksums", True)),
        fsync=store.other_sync,
        name=handle.names["segment_writer"],
    ))
