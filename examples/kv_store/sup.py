"""A supervisor that starts the store and restarts it when it crashes."""

from __future__ import annotations

from typing import Any

from examples.kv_store import shell


class KvSup:
    """The supervisor's callback module: its flags and one child spec."""

    def init(self, name: str) -> Any:
        flags = {"strategy": "one_for_one", "intensity": 3, "period": 5}
        store = {"id": "kv_store", "start": (shell.start_link, (name,)),
                 "restart": "permanent", "shutdown": 5000, "type": "worker"}
        return ("ok", (flags, [store]))
