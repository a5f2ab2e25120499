"""The node's supervisor of classic queue processes (``rabbit_amqqueue_sup_sup``).

RabbitMQ starts every classic queue under one ``simple_one_for_one``
supervisor per node (per vhost in 3.7+), with ``temporary`` children: a queue
process that ends is not restarted by it. A restart would need the queue's
messages back from disk, and there is no message store here yet, so a queue
that crashes is gone, as a transient queue is in RabbitMQ.
"""

from __future__ import annotations

from typing import Any

import actors
from actors import gen_server
from classic.config import QueueConfig
from classic.process import QueueEnv, QueueProcess
from supervision import supervisor

__all__ = ["QUEUE_SUP", "child_spec", "start_queue", "start_queue_sup"]

QUEUE_SUP = "rabbit_amqqueue_sup_sup"
"""The registered name of a node's queue supervisor."""

#: upstream's restart intensity for the queue supervisor (10 restarts in 10 s)
_FLAGS = ("simple_one_for_one", 10, 10)


class _QueueSup:
    """Callback module: one template, a temporary queue process."""

    def init(self, _args: Any) -> Any:
        child = {"id": "rabbit_amqqueue", "start": (_start_queue_process, []),
                 "restart": "temporary", "shutdown": 600_000}
        return ("ok", (_FLAGS, [child]))


def _start_queue_process(config: QueueConfig, env: QueueEnv) -> Any:
    return gen_server.start_link(QueueProcess, (config, env))


def start_queue_sup(name: str | None = QUEUE_SUP) -> Any:
    """Start a queue supervisor linked to the caller (a node's supervision tree)."""
    return supervisor.start_link(_QueueSup(), None, name=name)


def child_spec(name: str = QUEUE_SUP) -> dict[str, Any]:
    """The queue supervisor as a child of a node's top supervisor."""
    return {"id": name, "type": "supervisor", "start": (start_queue_sup, [name])}


def start_queue(sup: Any, config: QueueConfig, env: QueueEnv) -> Any:
    """Start one queue process under `sup`; ``("ok", pid)`` or the start error."""
    if sup is None:
        sup = actors.whereis(QUEUE_SUP)
    return supervisor.start_child(sup, [config, env])
