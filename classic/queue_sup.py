"""The node's supervisor of classic queue processes (``rabbit_amqqueue_sup_sup``).

RabbitMQ starts every classic queue under one ``simple_one_for_one``
supervisor per node (per vhost in 3.7+), with ``temporary`` children: a queue
process that ends is not restarted by it. Durable queues come back from the
message store when their node starts again (`channel.classic_store`), not
through this supervisor.
"""

from __future__ import annotations

from typing import Any

import actors
from actors import gen_server
from classic import effects as e
from classic.config import QueueConfig
from classic.msg_store import QueueStore
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


def _start_queue_process(config: QueueConfig, env: QueueEnv, store: QueueStore | None = None,
                         recovered: tuple[e.Delivery, ...] = ()) -> Any:
    return gen_server.start_link(QueueProcess, (config, env, store, recovered))


def start_queue_sup(name: str | None = QUEUE_SUP) -> Any:
    """Start a queue supervisor linked to the caller (a node's supervision tree)."""
    return supervisor.start_link(_QueueSup(), None, name=name)


def child_spec(name: str = QUEUE_SUP) -> dict[str, Any]:
    """The queue supervisor as a child of a node's top supervisor."""
    return {"id": name, "type": "supervisor", "start": (start_queue_sup, [name])}


def start_queue(sup: Any, config: QueueConfig, env: QueueEnv, store: QueueStore | None = None,
                recovered: tuple[e.Delivery, ...] = ()) -> Any:
    """Start one queue process under `sup`; ``("ok", pid)`` or the start error.

    A durable queue on a node with a message store gets its `store` handle, and,
    when it comes back after a restart, the messages it held (`recovered`)."""
    if sup is None:
        sup = actors.whereis(QUEUE_SUP)
    return supervisor.start_child(sup, [config, env, store, recovered])
