"""The supervisors of classic queue processes (``rabbit_amqqueue_sup_sup`` and
``rabbit_amqqueue_sup``).

As in RabbitMQ, every queue gets a supervisor of its own (``rabbit_amqqueue_sup``,
``one_for_one``, 5 restarts in 10 s) under the node's ``simple_one_for_one``
``rabbit_amqqueue_sup_sup`` (10 in 10 s), where it is a ``temporary`` child.
The queue process is the per-queue supervisor's one child: restarted when it
crashes, and taking its supervisor with it when it ends normally (upstream's
``intrinsic``: here ``transient`` and ``significant`` under
``auto_shutdown = any_significant``). A queue that crashes more often than
that stays down, as in RabbitMQ.

A restarted queue process cannot be handed the messages of its first start
(they are stale): the start function carries a one-shot `StartOnce`, as
upstream's ``rabbit_prequeue`` tells a first start from a restart by its
marker process. The first start takes what the caller gave (a new queue, or
one recovered at node start); every later one starts in crash-restart mode
and recovers from the message store itself (`classic.process`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import actors
from actors import gen_server
from classic import effects as e
from classic.config import QueueConfig
from classic.msg_store import QueueStore
from classic.process import QueueEnv, QueueProcess
from supervision import supervisor

__all__ = ["QUEUE_SUP", "StartOnce", "child_spec", "start_queue", "start_queue_sup"]

QUEUE_SUP = "rabbit_amqqueue_sup_sup"
"""The registered name of a node's queue supervisor."""

#: upstream's restart intensity for the node's supervisor of queues (10 in 10 s)
_FLAGS = ("simple_one_for_one", 10, 10)

#: upstream's restart intensity for one queue's supervisor (5 restarts in 10 s)
_QUEUE_FLAGS = {"strategy": "one_for_one", "intensity": 5, "period": 10,
                "auto_shutdown": "any_significant"}


@dataclass
class StartOnce:
    """What only the first start of a queue process gets: the messages recovered
    at node start. Spent by that start; a restart finds it spent."""

    recovered: tuple[e.Delivery, ...]
    spent: bool = False
    pid: Any = None
    """The queue process of the first start."""

    def take(self) -> tuple[e.Delivery, ...] | None:
        """The recovered messages on the first call, ``None`` (a restart) after."""
        if self.spent:
            return None
        self.spent = True
        return self.recovered


class _QueueSupSup:
    """Callback module: one template, a temporary per-queue supervisor."""

    def init(self, _args: Any) -> Any:
        child: dict[str, Any] = {
            "id": "rabbit_amqqueue_sup", "start": (_start_one_queue_sup, []),
            "restart": "temporary", "shutdown": "infinity", "type": "supervisor"}
        return ("ok", (_FLAGS, [child]))


class _OneQueueSup:
    """Callback module of ``rabbit_amqqueue_sup``: the queue process, restarted on a crash."""

    def init(self, args: tuple[QueueConfig, QueueEnv, QueueStore | None, StartOnce]) -> Any:
        child = {"id": "rabbit_amqqueue", "start": (_start_queue_process, list(args)),
                 "restart": "transient", "significant": True, "shutdown": 600_000}
        return ("ok", (_QUEUE_FLAGS, [child]))


def _start_one_queue_sup(config: QueueConfig, env: QueueEnv, store: QueueStore | None,
                         once: StartOnce) -> Any:
    return supervisor.start_link(_OneQueueSup(), (config, env, store, once))


def _start_queue_process(config: QueueConfig, env: QueueEnv, store: QueueStore | None,
                         once: StartOnce) -> Any:
    first = not once.spent
    result = gen_server.start_link(QueueProcess, (config, env, store, once.take()))
    if first and result[0] == "ok":
        once.pid = result[1]
    return result


def start_queue_sup(name: str | None = QUEUE_SUP) -> Any:
    """Start a queue supervisor linked to the caller (a node's supervision tree)."""
    return supervisor.start_link(_QueueSupSup(), None, name=name)


def child_spec(name: str = QUEUE_SUP) -> dict[str, Any]:
    """The queue supervisor as a child of a node's top supervisor."""
    return {"id": name, "type": "supervisor", "start": (start_queue_sup, [name])}


def start_queue(sup: Any, config: QueueConfig, env: QueueEnv, store: QueueStore | None = None,
                recovered: tuple[e.Delivery, ...] = ()) -> Any:
    """Start one queue (its supervisor and process) under `sup`; ``("ok", pid)`` with
    the queue process's pid, or the start error.

    A durable queue on a node with a message store gets its `store` handle, and,
    when it comes back after a restart, the messages it held (`recovered`)."""
    if sup is None:
        sup = actors.whereis(QUEUE_SUP)
    once = StartOnce(recovered)
    result = supervisor.start_child(sup, [config, env, store, once])
    if result[0] != "ok":
        return result
    return ("ok", once.pid)
