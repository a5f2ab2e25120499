"""The metadata store's machine driven by hand: commands applied at rising indexes."""

from __future__ import annotations

from typing import Any

from broker.metadata import MetadataMachine, MetadataState


class Store:
    def __init__(self) -> None:
        self.machine = MetadataMachine()
        self.state: MetadataState = self.machine.init({})
        self.index = 0

    def apply(self, cmd: Any) -> Any:
        """Apply `cmd` at the next index; the machine's reply."""
        self.index += 1
        self.state, (_index, reply), _effects = self.machine.apply(
            {"index": self.index}, cmd, self.state)
        return reply
