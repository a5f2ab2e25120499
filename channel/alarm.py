"""The node's resource-alarm hub (`rabbit_alarm`), as far as readers see it.

Readers register at connection.open and get the resources currently alarmed;
afterwards every change is sent to them as `("conserve_resources", resource,
active)`. The memory and disk monitors (and the test hooks) call `set_alarm` /
`clear_alarm`. Single-node for now: "active" means alarmed on this node.
"""

from __future__ import annotations

from typing import Any

from actors import Node, trace

__all__ = ["RESOURCES", "Alarm"]

RESOURCES = ("memory", "disk")


class Alarm:
    def __init__(self, node: Node) -> None:
        self.node = node
        self.active: set[str] = set()
        self.readers: set[Any] = set()

    def register(self, reader: Any) -> set[str]:
        self.readers.add(reader)
        return set(self.active)

    def unregister(self, reader: Any) -> None:
        self.readers.discard(reader)

    def set_alarm(self, resource: str) -> None:
        self._change(resource, True)

    def clear_alarm(self, resource: str) -> None:
        self._change(resource, False)

    def _change(self, resource: str, active: bool) -> None:
        if resource not in RESOURCES:
            raise ValueError(f"unknown alarm resource {resource!r}")
        if (resource in self.active) == active:
            return
        if active:
            self.active.add(resource)
        else:
            self.active.discard(resource)
        if trace.enabled():
            trace.emit(f"{'mem' if resource == 'memory' else resource}_alarm_"
                       f"{'on' if active else 'off'}", node=self.node.name,
                       entity_type="node", entity_id=self.node.name,
                       value=len(self.readers))
        for reader in list(self.readers):
            self.node.send(reader, ("conserve_resources", resource, active))
