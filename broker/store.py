"""A node's handle on the metadata store: its read copy and its write path.

Reads (routing, queue lookups, policy listing) must not cost a Raft round
trip, so each node keeps a *projection*: the `MetadataView` object, kept
current by the process registered as `PROJECTION`, which receives the new
machine state from its node's member after every applied command. Writes go
through `Metadata.command`: a Ra command to the cluster (local member first;
Ra follows the leader redirect), after which the caller waits until its own
node's copy has applied that index, so a channel that declares an exchange
can publish to it at once. This mirrors Khepri's projections and RabbitMQ's
synchronous metadata writes.
"""

from __future__ import annotations

from typing import Any

import gevent
from gevent.event import Event

from actors.gen_server import GenServer
from broker.metadata import CLUSTER_NAME, MetadataState, initial_state
from channel.errors import AmqpError
from ra import api

__all__ = ["Metadata", "MetadataView", "ProjectionServer", "StoreUnavailable"]

COMMAND_TIMEOUT = 10_000


class StoreUnavailable(RuntimeError):
    """The metadata cluster did not answer (no quorum, or this node is cut off)."""


class MetadataView:
    """The node's read copy of the metadata state, and who waits on it."""

    def __init__(self) -> None:
        self.state: MetadataState = initial_state()
        self.index = 0
        self._changed = Event()

    def update(self, index: int, state: MetadataState) -> None:
        if index <= self.index:
            return
        self.index, self.state = index, state
        self._changed.set()
        self._changed = Event()

    def wait_for(self, index: int, timeout_s: float) -> bool:
        deadline = gevent.get_hub().loop.now() + timeout_s
        while self.index < index:
            left = deadline - gevent.get_hub().loop.now()
            if left <= 0:
                return False
            self._changed.wait(left)
        return True


class ProjectionServer(GenServer):
    """Registered as `PROJECTION`: applies `("metadata_state", index, state)` to the view."""

    def init(self, view: MetadataView) -> Any:
        return ("ok", view)

    def handle_info(self, msg: Any, view: MetadataView) -> Any:
        match msg:
            case ("metadata_state", int() as index, MetadataState() as state):
                view.update(index, state)
        return ("noreply", view)

    def handle_call(self, request: Any, _from: Any, view: MetadataView) -> Any:
        if request == "index":
            return ("reply", view.index, view)
        return super().handle_call(request, _from, view)


class Metadata:
    """The write path, for processes of this node."""

    def __init__(self, node_name: str, view: MetadataView, peers: list[str]) -> None:
        self.node_name = node_name
        self.view = view
        self.peers = [p for p in peers if p != node_name]

    @property
    def servers(self) -> list[tuple[str, str]]:
        return [(CLUSTER_NAME, n) for n in [self.node_name, *self.peers]]

    def command(self, cmd: Any, timeout: int = COMMAND_TIMEOUT) -> Any:
        """Commit `cmd`; its reply once this node's copy includes it.

        An `("error", (name, text))` reply of the machine is raised as the
        `AmqpError` it stands for.
        """
        result = api.process_command(self.servers, cmd, timeout)
        if result[0] != "ok":
            raise StoreUnavailable(f"metadata store unavailable: {result!r}")
        index, reply = result[1]
        if not self.view.wait_for(index, timeout / 1000):
            raise StoreUnavailable(f"metadata copy of {self.node_name} is behind ({index})")
        match reply:
            case ("error", (str() as name, str() as text)):
                raise AmqpError(name, text)
        return reply

    def members(self, timeout: int = 2000) -> Any:
        """``("ok", member_ids, leader)`` of the metadata cluster, or Ra's error."""
        return api.members(self.servers, timeout)
