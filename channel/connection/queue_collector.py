"""The queue collector of one connection (`rabbit_queue_collector`).

Exclusive queues belong to their connection and go when it goes, whichever
way it goes: the reader asks the collector to delete them while it closes
(before `close-ok` is written, so a client that reconnects finds them gone),
and when the connection's supervision tree is stopped without a close (the
reader died, the node shuts down) the collector deletes them as it stops.
"""

from __future__ import annotations

import logging
from typing import Any

import actors

__all__ = ["collector_main", "delete_all"]

log = logging.getLogger("warren.collector")


def delete_all(collector: Any, timeout_ms: int = 30_000) -> bool:
    """Synchronously delete the connection's exclusive queues; False on timeout."""
    ref = actors.make_ref()
    actors.send(collector, ("delete_all", actors.self(), ref))
    reply = actors.receive(timeout_ms, match=lambda m: m == ("deleted", ref))
    return reply is not actors.TIMEOUT


def _delete(backend: Any, owner: Any) -> None:
    try:
        backend.connection_closed(owner)
    except Exception:  # the connection is gone either way
        log.exception("deleting the exclusive queues of %r failed", owner)


def collector_main(backend: Any, owner: Any) -> None:
    actors.process_flag("trap_exit", True)
    while True:
        msg = actors.receive()
        match msg:
            case ("delete_all", pid, ref):
                _delete(backend, owner)
                actors.send(pid, ("deleted", ref))
            case ("EXIT", _pid, reason):
                # only the helper supervisor is linked to us: we are being stopped
                _delete(backend, owner)
                actors.exit(reason)
