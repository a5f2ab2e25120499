"""In-process transport: several nodes in one OS process, with real semantics.

It keeps every guarantee of `actors.dist` (one ordered stream per node pair,
sessions, nodeup before the first frame, nodedown after the last, stale frames
dropped, net ticks) so the conformance tests can run two or three nodes in one
process, and it consults `FaultRules` for every frame so partitions, drops,
delays and paused nodes behave as they would on a network.

Each transport has one inbound queue served by one dispatcher greenlet:
frames are handed to the node strictly in arrival order, never one greenlet
per frame.
"""

from __future__ import annotations

import itertools
import logging
from collections import deque
from typing import Any

import gevent
from gevent.event import Event

from actors.dist import DistHandler
from transports.batch import Batches
from transports.faults import DROP, FaultRules
from transports.tick import NetTicker, TickConfig

__all__ = ["MemoryNetwork", "MemoryTransport"]

log = logging.getLogger("warren.transport.memory")

_UP, _FRAME, _TICK, _CLOSE, _SETUP_FAILED = range(5)


class MemoryNetwork:
    """The shared medium: which transports exist, the tick config, the faults."""

    def __init__(self, tick: TickConfig | None = None, faults: FaultRules | None = None) -> None:
        self.tick = tick or TickConfig()
        self.faults = faults or FaultRules()
        self.transports: dict[str, MemoryTransport] = {}
        self._sids = itertools.count(1)

    def transport(self) -> MemoryTransport:
        return MemoryTransport(self)

    def next_sid(self) -> int:
        return next(self._sids)


class MemoryTransport:
    def __init__(self, network: MemoryNetwork) -> None:
        self.net = network
        self.node: DistHandler | None = None
        self.name = ""
        self.sessions: dict[str, int] = {}  # peer -> sid used for outgoing frames
        self._up: dict[str, int] = {}  # peer -> sid whose nodeup the node has seen
        self._inbox: deque[tuple[float, int, str, int, Any]] = deque()
        self._wake = Event()
        self._batches = Batches(self._flush)
        self._held: list[tuple[str, tuple[int, str, int, Any]]] = []
        self.ticker = NetTicker(network.tick)
        self.closed = False
        self._greenlets: list[gevent.Greenlet] = []

    # ---------------------------------------------------------- lifecycle

    def attach(self, node: DistHandler) -> None:
        self.node = node
        self.name = node.name
        old = self.net.transports.get(self.name)
        if old is not None and old is not self:
            old.close()
        self.net.transports[self.name] = self
        self._greenlets = [gevent.spawn(self._dispatch_loop), gevent.spawn(self._tick_loop)]

    def close(self) -> None:
        if self.closed:
            return
        self._flush()
        for peer, sid in list(self.sessions.items()):
            self._transmit(peer, _CLOSE, sid, "connection_closed")
        self.sessions.clear()
        self.closed = True
        if self.net.transports.get(self.name) is self:
            del self.net.transports[self.name]
        self._wake.set()
        for g in self._greenlets:
            g.kill(block=False)

    def connected_nodes(self) -> list[str]:
        return sorted(self._up)

    # ------------------------------------------------------------ sending

    def connect(self, peer: str) -> None:
        if peer not in self.sessions and not self.closed:
            self._setup(peer)

    def send(self, peer: str, signal: tuple[Any, ...]) -> None:
        if self.closed:
            return
        if peer not in self.sessions and not self._setup(peer):
            return
        self._batches.add(peer, signal)

    def _flush(self) -> None:
        for peer, signals in self._batches.take().items():
            sid = self.sessions.get(peer)
            if sid is not None:
                self._transmit(peer, _FRAME, sid, signals)

    def _setup(self, peer: str) -> bool:
        other = self.net.transports.get(peer)
        faults = self.net.faults
        if (other is None or other.closed or other is self
                or not faults.connected(self.name, peer)
                or faults.is_paused(peer) or faults.is_paused(self.name)):
            self._enqueue(0.0, _SETUP_FAILED, peer, 0, "connection_setup_failed")
            return False
        sid = self.net.next_sid()
        assert other.node is not None and self.node is not None
        self.sessions[peer] = sid
        other.sessions[self.name] = sid
        self.ticker.add(peer)
        other.ticker.add(self.name)
        self._enqueue(0.0, _UP, peer, sid, other.node.creation)
        other._enqueue(0.0, _UP, self.name, sid, self.node.creation)
        return True

    def _transmit(self, peer: str, kind: int, sid: int, payload: Any) -> None:
        faults = self.net.faults
        if faults.is_paused(self.name):
            self._held.append((peer, (kind, self.name, sid, payload)))
            return
        self.ticker.sent(peer)
        if faults.verdict(self.name, peer) == DROP and not faults.is_paused(peer):
            return
        other = self.net.transports.get(peer)
        if other is None or other.closed:
            return
        delay = faults.delay_for(self.name, peer)
        at = gevent.get_hub().loop.now() + delay if delay else 0.0
        other._enqueue(at, kind, self.name, sid, payload)

    def disconnect(self, peer: str) -> bool:
        sid = self.sessions.get(peer)
        if sid is None:
            return False
        self._local_down(peer, "disconnect")
        return True

    def _local_down(self, peer: str, reason: str) -> None:
        """This side ends the session: tell the peer, then the node (after queued frames)."""
        pending = self._batches.pop(peer)
        sid = self.sessions.pop(peer, None)
        self.ticker.remove(peer)
        if sid is None:
            return
        if pending:
            # what was sent before the disconnect leaves before the close, as on ZeroMQ
            self._transmit(peer, _FRAME, sid, pending)
        # frames of this session still in flight (delayed) never arrive
        now = gevent.get_hub().loop.now()
        self._inbox = deque(
            item for item in self._inbox
            if not (item[2] == peer and item[3] == sid and item[0] > now)
        )
        self._transmit(peer, _CLOSE, sid, "connection_closed")
        self._enqueue(0.0, _CLOSE, peer, sid, reason)

    # ---------------------------------------------------------- receiving

    def _enqueue(self, at: float, kind: int, src: str, sid: int, payload: Any) -> None:
        self._inbox.append((at, kind, src, sid, payload))
        self._wake.set()

    def _dispatch_loop(self) -> None:
        loop = gevent.get_hub().loop
        faults = self.net.faults
        while not self.closed:
            inbox = self._inbox
            if not inbox:
                self._wake.clear()
                self._wake.wait()
                continue
            if faults.is_paused(self.name):
                gevent.sleep(0.005)
                continue
            at, kind, src, sid, payload = inbox[0]
            if at:
                now = loop.now()
                if at > now:
                    gevent.sleep(at - now)
                    continue
            inbox.popleft()
            try:
                self._handle(kind, src, sid, payload)
            except Exception:
                log.exception("node %s: failed to handle frame from %s", self.name, src)

    def _handle(self, kind: int, src: str, sid: int, payload: Any) -> None:
        node = self.node
        assert node is not None
        if kind == _FRAME:
            if self._up.get(src) == sid:
                self.ticker.received(src)
                node.dist_receive(src, payload)
        elif kind == _TICK:
            if self._up.get(src) == sid:
                self.ticker.received(src)
        elif kind == _UP:
            if src in self._up:
                del self._up[src]
                node.dist_nodedown(src, "connection_closed")
            if self.sessions.get(src) == sid:
                self._up[src] = sid
                node.dist_nodeup(src, payload)
        elif kind == _CLOSE:
            if self.sessions.get(src) == sid:
                del self.sessions[src]
                self.ticker.remove(src)
            if self._up.get(src) == sid:
                del self._up[src]
                node.dist_nodedown(src, payload)
        elif kind == _SETUP_FAILED and src not in self.sessions:
            node.dist_nodedown(src, payload)

    # ------------------------------------------------------------- ticks

    def _tick_loop(self) -> None:
        faults = self.net.faults
        while not self.closed:
            gevent.sleep(self.net.tick.interval)
            if faults.is_paused(self.name):
                continue
            if self._held:
                held, self._held = self._held, []
                for peer, (kind, _src, sid, payload) in held:
                    self._transmit(peer, kind, sid, payload)
            to_tick, down = self.ticker.check()
            for peer in to_tick:
                tick_sid = self.sessions.get(peer)
                if tick_sid is not None:
                    self._transmit(peer, _TICK, tick_sid, None)
            for peer in down:
                self.ticker.add(peer)  # so _local_down's remove is harmless
                self._local_down(peer, "net_tick_timeout")
