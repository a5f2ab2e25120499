"""Expired quorum queues are deleted by the node that runs their leader.

A quorum queue unused for longer than its `x-expires` (or `expires` policy)
asks, from its leader, to be deleted (`rabbit_quorum_queue:spawn_deleter`,
carried out by `channel.queue_types.quorum.qq_delete`). The `queue_deleter` child of `warren_sup`
installs this node's deleter, over the node's queue table, for as long as the
node runs. It starts before the Ra system and so stops after it: no queue
member of this node ticks without a deleter to ask.
"""

from __future__ import annotations

from typing import Any

import actors
from actors import gen_server
from actors.gen_server import GenServer
from channel.queue_types.quorum import qq_delete
from channel.queue_types.quorum.qq_delete import QueueDeleter
from channel.queue_types.quorum.quorum_queue import QuorumBackend

__all__ = ["NAME", "QueueDeleterServer", "child_specs"]

NAME = "queue_deleter"


class QueueDeleterServer(GenServer):
    """Keeps the node's deleter installed while it lives."""

    def init(self, deleter: QueueDeleter) -> Any:
        actors.process_flag("trap_exit", True)
        qq_delete.install(actors.node(), deleter)
        return ("ok", deleter)

    def terminate(self, _reason: Any, _deleter: QueueDeleter) -> None:
        qq_delete.uninstall(actors.node())


def _start(deleter: QueueDeleter) -> Any:
    return gen_server.start_link(QueueDeleterServer, deleter, name=NAME)


def child_specs(backend: Any) -> list[dict[str, Any]]:
    """The `queue_deleter` child of a node that serves quorum queues; none otherwise."""
    if not isinstance(backend, QuorumBackend):
        return []
    deleter = QueueDeleter(backend.registry, timeout=backend.command_timeout,
                           on_deleted=backend.on_deleted)
    return [{"id": NAME, "start": (_start, [deleter])}]
