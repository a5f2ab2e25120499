"""A server's durable metadata: ``current_term``, ``voted_for``, ``last_applied``.

Ra keeps one row per server in the system's ``meta.dets`` (``ra_log_meta``):
``store`` updates the row and lets DETS auto-save it later, ``store_sync``
forces the write to disk at once. The server uses ``store_sync`` for
``voted_for`` (a vote must survive a crash, or a member could vote twice in a
term) and ``store`` for ``current_term`` and the lazily persisted
``last_applied`` (as ``ra_server:persist_last_applied/1`` does). warren
keeps the row as a small file in the server's directory and replaces it
atomically (write, fsync, rename, fsync the directory); `sync` writes whatever `store` left pending.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from typing import Any

from ra import stored_terms
from ra.durable import make_dirs, replace_file

META_FILE = "meta"
KEYS = ("current_term", "voted_for", "last_applied")
DEFAULTS: dict[str, Any] = {"current_term": 0, "voted_for": None, "last_applied": 0}


class LogMeta:
    def __init__(self, directory: str, fsync: Callable[[int], None] = os.fsync) -> None:
        self.directory = directory
        self.path = os.path.join(directory, META_FILE)
        self._fsync = fsync
        self._values: dict[str, Any] = dict(DEFAULTS)
        self.dirty = False
        try:
            with open(self.path, "rb") as f:
                self._values.update(stored_terms.load(f))
        except FileNotFoundError:
            pass

    def fetch(self, key: str, default: Any = None) -> Any:
        if key not in KEYS:
            raise KeyError(key)
        value = self._values.get(key)
        return default if value is None else value

    def store(self, key: str, value: Any) -> None:
        """Update in memory; on disk at the next `sync` or `store_sync`."""
        if key not in KEYS:
            raise KeyError(key)
        if self._values.get(key) != value:
            self._values[key] = value
            self.dirty = True

    def store_sync(self, key: str, value: Any) -> None:
        """Update and write the whole row durably before returning."""
        self.store(key, value)
        self.sync()

    def sync(self) -> None:
        if not self.dirty:
            return
        make_dirs(self.directory)
        replace_file(self.path, pickle.dumps(self._values, protocol=5), self._fsync)
        self.dirty = False

    def update_term_and_voted_for(self, term: int, voted_for: Any) -> None:
        """What ``ra_server`` does on a term or vote change: the vote is synchronous."""
        self.store("current_term", term)
        self.store_sync("voted_for", voted_for)
