"""Where channels find classic queues: the records of their queue processes.

A classic queue runs as one process on its home node, but every node's
channels must find it by ``(vhost, name)``: RabbitMQ keeps one queue table in
its metadata store for all queue types. A `ClassicRecord` is one row of that
table for a classic queue (its pid names the home node). A broker keeps the
rows in its replicated metadata store (`broker.classic_directory`); a test
without a broker uses `LocalDirectory`, a dict for the nodes of one process.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from actors.pid import Pid

__all__ = ["ClassicDirectory", "ClassicRecord", "LocalDirectory"]


@dataclass(frozen=True)
class ClassicRecord:
    """One classic queue: where its process runs and how it was declared."""

    vhost: str
    name: str
    pid: Pid
    durable: bool
    auto_delete: bool
    owner: Any
    arguments: Mapping[str, Any]
    state: Literal["live", "crashed"] = "live"
    """``amqqueue``'s state: ``crashed`` from the moment the queue's process ended with
    an error until its supervisor's restart takes the record back (for good when the
    supervisor gives up). Channels answer such a queue at once with 404 "has crashed
    and failed to restart" rather than retrying; a process killed outright never
    marks it."""

    @property
    def node(self) -> str:
        """The queue's home node: the node its process runs on."""
        return self.pid.node

    @property
    def queue_type(self) -> str:
        return "classic"


class ClassicDirectory(Protocol):
    def lookup(self, vhost: str, name: str) -> ClassicRecord | None: ...

    def list(self, vhost: str | None = None) -> list[ClassicRecord]: ...

    def insert(self, record: ClassicRecord) -> ClassicRecord:
        """Store `record` unless a queue of that name exists; the stored record."""
        ...

    def remove(self, vhost: str, name: str, pid: Pid) -> bool:
        """Remove the record if it still names `pid`; whether it did."""
        ...

    def recover(self, record: ClassicRecord) -> ClassicRecord | None:
        """A queue restarted on its home node takes over its record (bindings kept), or
        its crashed process marks it `crashed`; the record holding the name after
        this, ``None`` if the queue is gone."""
        ...


class LocalDirectory:
    """Records in memory, for the nodes of one OS process (tests without a broker)."""

    def __init__(self) -> None:
        self.records: dict[tuple[str, str], ClassicRecord] = {}

    def lookup(self, vhost: str, name: str) -> ClassicRecord | None:
        return self.records.get((vhost, name))

    def list(self, vhost: str | None = None) -> list[ClassicRecord]:
        return [r for r in self.records.values() if vhost is None or r.vhost == vhost]

    def insert(self, record: ClassicRecord) -> ClassicRecord:
        return self.records.setdefault((record.vhost, record.name), record)

    def recover(self, record: ClassicRecord) -> ClassicRecord | None:
        """The record of the queue's node is replaced (bindings are the topology's);
        the records of one OS process do not outlive it, so a missing one is made
        anew."""
        key = (record.vhost, record.name)
        old = self.records.get(key)
        if old is not None and old.node != record.node:
            return old
        self.records[key] = record
        return record

    def remove(self, vhost: str, name: str, pid: Pid) -> bool:
        record = self.records.get((vhost, name))
        if record is None or record.pid != pid:
            return False
        del self.records[(vhost, name)]
        return True
