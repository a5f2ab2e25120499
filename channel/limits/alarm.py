"""The resource-alarm hub (`rabbit_alarm`): cluster-wide memory and disk alarms.

A node low on memory protects itself only if publishers stop *everywhere*: a
publisher connected to another node still fills the alarmed node's queue
replicas. So every node keeps which nodes have which resource alarmed, a local
alarm change is passed on to the hubs of the other nodes, and a reader is told
`("conserve_resources", resource, active)` where *active* means "some node
still has this resource alarmed". A node that goes down takes its alarms with
it. Readers register at connection.open and get every resource alarmed on
any node known to this one.

`AlarmHub` is the pure core (input in, effects out: sends, log lines, trace
points); `Alarm` is the node's instance, which carries the effects out. The
memory and disk monitors call `set_alarm` / `clear_alarm` for this node; the
node's `rabbit_alarm` process (`broker.alarms`) feeds in what other nodes
report and which nodes went down.
"""

from __future__ import annotations

import logging
from typing import Any, Literal, assert_never

from actors import Node, trace

__all__ = ["RESOURCES", "Alarm", "AlarmHub", "Effect"]

log = logging.getLogger("warren.alarm")

RESOURCES = ("memory", "disk")

Effect = (
    tuple[Literal["send"], Any, Any]
    | tuple[Literal["log"], int, str]
    | tuple[Literal["trace"], str, Any]
)
"""`("send", dest, msg)`, `("log", level, text)` or `("trace", kind, value)`."""

_TRACE_NAME = {"memory": "mem", "disk": "disk"}


class AlarmHub:
    """`#alarms{alertees, alarmed_nodes}` of one node, without I/O.

    Alertees are of two kinds, as in RabbitMQ: local readers (told
    `conserve_resources`) and the alarm hubs of other nodes (told this node's
    own alarm changes as `set_alarm` / `clear_alarm` of
    `("resource_limit", resource, node)`).
    """

    def __init__(self, node: str) -> None:
        self.node = node
        self.alarmed_nodes: dict[str, set[str]] = {}
        self.readers: set[Any] = set()
        #: alarm server pid of another node -> that node
        self.peers: dict[Any, str] = {}

    # ---------------------------------------------------------------- queries

    def resources(self) -> set[str]:
        """Resources alarmed on any node known to this one."""
        return set().union(*self.alarmed_nodes.values())

    def local(self) -> set[str]:
        return set(self.alarmed_nodes.get(self.node, ()))

    def alarms(self) -> list[tuple[str, str]]:
        """`get_alarms`: every (resource, node) pair, sorted."""
        return sorted((r, n) for n, rs in self.alarmed_nodes.items() for r in rs)

    def is_alarmed(self, resource: str, node: str) -> bool:
        return resource in self.alarmed_nodes.get(node, ())

    # ------------------------------------------------------------- alertees

    def register_reader(self, pid: Any) -> set[str]:
        self.readers.add(pid)
        return self.resources()

    def unregister_reader(self, pid: Any) -> None:
        self.readers.discard(pid)

    def register_peer(self, pid: Any, node: str) -> list[Effect]:
        """Another node's hub asks to hear our alarms: replay the current ones to it.

        A pid of an earlier life of that node means the node restarted without
        us noticing; what it had alarmed then is gone.
        """
        effects: list[Effect] = []
        stale = [p for p, n in self.peers.items() if n == node and p != pid]
        if stale:
            effects += self.node_down(node)
        self.peers[pid] = node
        effects += [("send", pid, ("set_alarm", ("resource_limit", r, self.node)))
                    for r in sorted(self.local())]
        return effects

    def peer_down(self, pid: Any) -> list[Effect]:
        """DOWN of another node's hub: its node's alarms are gone with it."""
        node = self.peers.pop(pid, None)
        if node is None or node in self.peers.values():
            return []
        return self._clear_node(node)

    def node_down(self, node: str) -> list[Effect]:
        for pid in [p for p, n in self.peers.items() if n == node]:
            del self.peers[pid]
        return self._clear_node(node)

    def _clear_node(self, node: str) -> list[Effect]:
        effects: list[Effect] = []
        for resource in sorted(self.alarmed_nodes.get(node, ())):
            effects.append(("log", logging.WARNING,
                            f"{resource} resource limit alarm cleared for dead node {node}"))
            effects += self._change(resource, node, False)
        return effects

    # ---------------------------------------------------------------- changes

    def set_alarm(self, resource: str, node: str) -> list[Effect]:
        _check(resource)
        if self.is_alarmed(resource, node):
            return []
        return [("log", logging.WARNING,
                 f"{resource} resource limit alarm set on node {node}.\n\n"
                 "**********************************************************\n"
                 "*** Publishers will be blocked until this alarm clears ***\n"
                 "**********************************************************"),
                *self._change(resource, node, True)]

    def clear_alarm(self, resource: str, node: str) -> list[Effect]:
        _check(resource)
        if not self.is_alarmed(resource, node):
            return []
        return [("log", logging.WARNING, f"{resource} resource limit alarm cleared on node {node}"),
                *self._change(resource, node, False)]

    def _change(self, resource: str, node: str, added: bool) -> list[Effect]:
        """`maybe_alert`: record the change, then tell the peers (own alarms only) and
        every local reader whether the resource is still alarmed somewhere."""
        if added:
            self.alarmed_nodes.setdefault(node, set()).add(resource)
        else:
            left = self.alarmed_nodes.get(node, set()) - {resource}
            if left:
                self.alarmed_nodes[node] = left
            else:
                self.alarmed_nodes.pop(node, None)
        still = resource in self.resources()
        effects: list[Effect] = []
        if not still:
            effects.append(("log", logging.WARNING,
                            f"{resource} resource limit alarm cleared across the cluster"))
        if node == self.node:
            effects.append(("trace", f"{_TRACE_NAME[resource]}_alarm_{'on' if added else 'off'}",
                            len(self.readers)))
            tag = "set_alarm" if added else "clear_alarm"
            effects += [("send", pid, (tag, ("resource_limit", resource, node)))
                        for pid in sorted(self.peers, key=repr)]
        effects += [("send", pid, ("conserve_resources", resource, still))
                    for pid in sorted(self.readers, key=repr)]
        return effects


def _check(resource: str) -> None:
    if resource not in RESOURCES:
        raise ValueError(f"unknown alarm resource {resource!r}")


class Alarm:
    """The node's hub: `AlarmHub` plus the node that carries out its effects.

    Its methods may be called from any process of the node (readers register
    from their own process, the monitors set and clear from theirs); the hub
    is plain state on the node's single gevent hub, so there is no race.
    """

    def __init__(self, node: Node) -> None:
        self.node = node
        self.hub = AlarmHub(node.name)

    @property
    def active(self) -> set[str]:
        """Resources alarmed on any node known here (what readers are blocked by)."""
        return self.hub.resources()

    @property
    def readers(self) -> set[Any]:
        return self.hub.readers

    def register(self, reader: Any) -> set[str]:
        return self.hub.register_reader(reader)

    def unregister(self, reader: Any) -> None:
        self.hub.unregister_reader(reader)

    def alarms(self) -> list[tuple[str, str]]:
        return self.hub.alarms()

    def set_alarm(self, resource: str, node: str | None = None) -> None:
        self.run(self.hub.set_alarm(resource, node or self.node.name))

    def clear_alarm(self, resource: str, node: str | None = None) -> None:
        self.run(self.hub.clear_alarm(resource, node or self.node.name))

    def register_peer(self, pid: Any) -> None:
        self.run(self.hub.register_peer(pid, pid.node))

    def peer_down(self, pid: Any) -> None:
        self.run(self.hub.peer_down(pid))

    def node_down(self, node: str) -> None:
        self.run(self.hub.node_down(node))

    def run(self, effects: list[Effect]) -> None:
        for effect in effects:
            match effect:
                case ("send", dest, msg):
                    self.node.send(dest, msg)
                case ("log", level, text):
                    log.log(level, text)
                case ("trace", kind, value):
                    if trace.enabled():
                        trace.emit(kind, node=self.node.name, entity_type="node",
                                   entity_id=self.node.name, value=value)
                case _:
                    assert_never(effect)
