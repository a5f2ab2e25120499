"""Net tick bookkeeping shared by every transport (Erlang's `net_ticktime`).

Every `interval` (= net_ticktime / net_tickintensity) a transport calls
`check()`: peers to which nothing was sent during the interval get a tick, and
a peer from which nothing at all (payload or tick) arrived during
`net_tickintensity` consecutive intervals is declared down. A silent peer is
therefore detected between `net_ticktime` and `net_ticktime + interval` after
its last frame, inside Erlang's documented window
[`ticktime - interval`, `ticktime + interval`]. Pure: no clock, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["DEFAULT_NET_TICKINTENSITY", "DEFAULT_NET_TICKTIME", "NetTicker", "TickConfig"]

DEFAULT_NET_TICKTIME = 60.0
DEFAULT_NET_TICKINTENSITY = 4


@dataclass(frozen=True, slots=True)
class TickConfig:
    """`net_ticktime` (seconds) and `net_tickintensity`, with Erlang's defaults."""

    net_ticktime: float = DEFAULT_NET_TICKTIME
    net_tickintensity: int = DEFAULT_NET_TICKINTENSITY

    def __post_init__(self) -> None:
        if self.net_ticktime <= 0:
            raise ValueError(f"net_ticktime must be > 0, got {self.net_ticktime}")
        if self.net_tickintensity < 4 or self.net_tickintensity > 1000:
            raise ValueError(
                f"net_tickintensity must be in 4..1000 (as Erlang), got {self.net_tickintensity}"
            )

    @property
    def interval(self) -> float:
        return self.net_ticktime / self.net_tickintensity


@dataclass(slots=True)
class _PeerTicks:
    sent: bool = False
    received: bool = False
    missed: int = 0


@dataclass(slots=True)
class NetTicker:
    """Per-peer counters; the transport feeds it and calls `check` each interval."""

    config: TickConfig = field(default_factory=TickConfig)
    peers: dict[str, _PeerTicks] = field(default_factory=dict)

    def add(self, peer: str) -> None:
        self.peers[peer] = _PeerTicks(received=True)

    def remove(self, peer: str) -> None:
        self.peers.pop(peer, None)

    def sent(self, peer: str) -> None:
        p = self.peers.get(peer)
        if p is not None:
            p.sent = True

    def received(self, peer: str) -> None:
        p = self.peers.get(peer)
        if p is not None:
            p.received = True

    def check(self) -> tuple[list[str], list[str]]:
        """One interval passed: ``(peers to tick, peers to declare down)``."""
        to_tick: list[str] = []
        down: list[str] = []
        intensity = self.config.net_tickintensity
        for peer, p in self.peers.items():
            if p.received:
                p.missed = 0
            else:
                p.missed += 1
                if p.missed >= intensity:
                    down.append(peer)
                    continue
            if not p.sent:
                to_tick.append(peer)
            p.sent = False
            p.received = False
        for peer in down:
            del self.peers[peer]
        return to_tick, down
