"""The distribution interface: what a node needs from a transport, and back.

`actors` knows transports only through this module (the broker plugs a
concrete one in). A transport carries *signals* (small tuples, below) between
nodes with these guarantees, which the node relies on for Erlang's semantics:

* one ordered stream per (sender node, receiver node): signals handed to
  `send(peer, ...)` are delivered to the peer's `dist_receive` in call order,
  or lost from some point on, never reordered or duplicated;
* sessions: `dist_nodeup(peer, creation)` is called before any signal of a new
  session is delivered; `dist_nodedown(peer, reason)` after the last one, and
  no signal of that session is delivered afterwards (frames still in flight
  from it are dropped);
* a peer that fails authentication never gets a byte unpickled;
* `send` never blocks the hub for long and never silently drops while the
  session is up; if no session can be set up the transport reports
  `dist_nodedown(peer, "connection_setup_failed")`.

All three callbacks run in the node's hub, one at a time.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = [
    "DEMONITOR",
    "DOWN",
    "EXIT",
    "LINK",
    "MONITOR",
    "REPLY",
    "SEND",
    "SEND_NAME",
    "SPAWN_REPLY",
    "SPAWN_REQUEST",
    "UNLINK",
    "DistHandler",
    "Transport",
]

# Signal tuples. The destination node is implied by the stream, so local pids
# travel as (serial, creation) where that saves pickling a Pid.
SEND = 0  # (SEND, serial, creation, msg)
SEND_NAME = 1  # (SEND_NAME, name, msg)
LINK = 2  # (LINK, from_pid, to_serial, to_creation)
UNLINK = 3  # (UNLINK, from_pid, to_serial, to_creation)
EXIT = 4  # (EXIT, from_pid, to_serial, to_creation, reason, is_link)
MONITOR = 5  # (MONITOR, watcher_pid, target (serial, creation) | name, ref)
DEMONITOR = 6  # (DEMONITOR, watcher_pid, target_serial, ref)
DOWN = 7  # (DOWN, watcher_serial, watcher_creation, ref, obj, reason)
REPLY = 8  # (REPLY, serial, creation, tag, value)
SPAWN_REQUEST = 9  # (SPAWN_REQUEST, caller_pid, ref, payload, link, monitor_ref)
SPAWN_REPLY = 10  # (SPAWN_REPLY, caller_serial, caller_creation, ref, pid_or_error)


class DistHandler(Protocol):
    """The node side of a transport."""

    name: str
    creation: int

    def dist_nodeup(self, peer: str, creation: int) -> None: ...

    def dist_receive(self, peer: str, signals: list[tuple[Any, ...]]) -> None: ...

    def dist_nodedown(self, peer: str, reason: str) -> None: ...


class Transport(Protocol):
    """Links one node to the others (ZeroMQ, in-memory, fault-injected ...)."""

    def attach(self, node: DistHandler) -> None:
        """Start serving `node`; called once by `Node.start`."""
        ...

    def send(self, peer: str, signal: tuple[Any, ...]) -> None:
        """Queue `signal` for `peer`, connecting first if needed."""
        ...

    def disconnect(self, peer: str) -> bool:
        """Force the session with `peer` down (reason ``disconnect``)."""
        ...

    def connected_nodes(self) -> list[str]: ...

    def close(self) -> None: ...
