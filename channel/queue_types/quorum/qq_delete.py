"""Deleting a quorum queue, because a client asked or because it expired.

`rabbit_quorum_queue:delete` is one procedure whoever asks: the queue's
ready-message count is read, its record leaves the queue table (its bindings
go with it), its Ra members are deleted on every node, and whoever enqueued
to or consumed from it hears that it ended (the machine's `eol`): a channel
then drops the queue and cancels its consumers of it, with a `basic.cancel`
when the client announced `consumer_cancel_notify`.

`queue.delete` runs it in the deleting channel. An expired queue asks for it
itself: on every tick the leader's machine checks `x-expires` (or the
`expires` policy) against the queue's last use and, once it is over, emits
`rabbit_quorum_queue:spawn_deleter`, which Ra runs inside the leader's
process. Nothing may block there, so `QueueDeleter` (installed per node,
like the dead-letter publisher) only spawns a process that deletes the queue
as `queue.delete` would, once at a time per queue: the machine asks again on
every tick until the queue is gone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import actors
from channel.queue_types.queue_registry import QueueRecord, QueueRegistry
from fifo import ra_hooks
from fifo.queries import query_processes, query_stat
from ra import api

__all__ = ["QueueDeleter", "delete_queue", "install", "uninstall"]

log = logging.getLogger("warren.channel.qq")

OnDeleted = Callable[[str, str], None]


def _servers(record: QueueRecord) -> list[Any]:
    """The members, the last known leader first."""
    leader = record.leader
    return ([leader] if leader else []) + [s for s in record.servers if s != leader]


def delete_queue(registry: QueueRegistry, vhost: str, name: str, *, timeout: int,
                 on_deleted: OnDeleted | None = None) -> int:
    """Delete the quorum queue `name`; the ready messages it had (0 when it is gone
    already, or when its leader does not answer in time)."""
    record = registry.lookup(vhost, name)
    if record is None:
        return 0
    servers = _servers(record)
    stat = api.leader_query(servers, query_stat, timeout)
    ready = int(stat[1][1][0]) if stat[0] == "ok" else 0
    found = api.leader_query(servers, query_processes, timeout)
    pids = found[1][1] if found[0] == "ok" else []
    registry.delete(vhost, name)
    # a member deleted by force never enters `eol` itself: tell every enqueuer and
    # consumer what the machine would have told them
    for pid in pids:
        actors.send(pid, ("ra_event", record.servers[0], ("machine", "eol")))
    if on_deleted is not None:
        on_deleted(vhost, name)
    return ready


class QueueDeleter:
    """One node's `rabbit_quorum_queue:spawn_deleter`: deletes the queues that expired."""

    def __init__(self, registry: QueueRegistry, *, timeout: int = 5000,
                 on_deleted: OnDeleted | None = None) -> None:
        self.registry = registry
        self.timeout = timeout
        self.on_deleted = on_deleted
        #: (vhost, queue) being deleted by a process of this deleter
        self.deleting: set[tuple[str, str]] = set()

    def __call__(self, queue_resource: Any) -> None:
        """The machine's request, in the leader's Ra server process: spawn, never block."""
        match queue_resource:
            case ("resource", str() as vhost, "queue", str() as name):
                pass
            case _:
                log.warning("cannot delete %r: not a queue resource", queue_resource)
                return
        key = (vhost, name)
        if key in self.deleting:
            return
        self.deleting.add(key)
        actors.spawn(self._delete, key)

    def _delete(self, key: tuple[str, str]) -> None:
        vhost, name = key
        try:
            if self.registry.lookup(vhost, name) is None:
                return  # a tick of a member that is being deleted already
            ready = delete_queue(self.registry, vhost, name, timeout=self.timeout,
                                 on_deleted=self.on_deleted)
            log.info("quorum queue '%s' in vhost '%s' expired and was deleted "
                     "(%d ready messages)", name, vhost, ready)
        except Exception:  # the machine asks again on its next tick
            log.exception("deleting expired quorum queue '%s' in vhost '%s' failed", name, vhost)
        finally:
            self.deleting.discard(key)


def install(node_name: str, deleter: QueueDeleter) -> None:
    """Make `deleter` the node's `spawn_deleter` target."""
    ra_hooks.set_queue_deleter(node_name, deleter)


def uninstall(node_name: str) -> None:
    ra_hooks.set_queue_deleter(node_name, None)
