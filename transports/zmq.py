"""ZeroMQ transport: nodes in separate OS processes, full mesh over TCP.

It gives the guarantees of `actors.dist` with real sockets: one ordered
stream per direction of each node pair, sessions (a random session id plus
both creations, fixed by a cookie-authenticated handshake), nodeup before the
first frame of a session and nodedown after the last, stale frames dropped,
Erlang's net tick, and `FaultRules` applied to every outgoing frame, ticks
included. Wire format and handshake: `transports.handshake`; socket work and
sessions at the connection level: `transports.zmq_io`.

Split of work. The hub side (this module) batches: `send` only appends to a
per-peer list, and one callback per hub iteration pickles each list once
(protocol 5) and hands one frame per peer to the socket layer. Inbound frames
come back through a deque; one dispatcher greenlet unpickles them and calls
the node in arrival order. Unpickling happens only here, and only for frames
the socket layer accepted from an authenticated, live session.

Where the socket work runs (``io``), measured with ``python bench/zmq_probe.py
--n 200000`` (two OS processes, 2-core machine, small tuples, receiver-side
rate): bare pyzmq PUSH/PULL with one pickle per message 682k msgs/s;
`zmq.green` 105k; `zmq.green` with 1 000 messages pickled per frame 7.7M
(socket only); this transport end to end (process → remote mailbox →
`receive`) 1.44M. So batching, not the choice below, removes the socket cost.

* ``"hub"`` (`transports.zmq_io.HubIoLoop`): every ZeroMQ call is made on the
  hub, non-blocking, woken by libev watchers on the sockets' descriptors.
  No frame crosses between Python threads, so no GIL hand-over sits on a
  Raft round trip. Dedicated node processes (``warren node start``,
  `transports.zmq_node`) use it: their hub is never blocked by foreign code.
  Measured on the e2e bench (three nodes, one 2-core machine): window-1
  confirm p50 2.98 ms against 3.33 ms with the thread, 6.3k against 5.9k
  msg/s at window 256.
* ``"thread"`` (`transports.zmq_io.IoLoop`): the sockets live on one native
  thread. Handshakes and socket reads go on while the hub is blocked, which
  a node embedded in another program needs (a test body blocking in
  `select`, a benchmark driver): it is the default of `ZmqTransport`.

``WARREN_ZMQ_IO`` overrides both defaults (for A/B measurements). Net ticks
come from the hub either way (as `net_kernel`'s tick); the tick check reads per-session
receive counters kept by the socket layer (read first, in hub mode), so
frames that arrived while the hub was busy still count as signs of life.

Buffers are unbounded (high-water marks 0): `send` never blocks the hub and
never drops while a session is up; the cost is memory under overload.
"""

from __future__ import annotations

import logging
import os
import pickle
from collections import deque
from typing import Any

import gevent
from gevent.event import Event

from actors.dist import DistHandler
from transports import handshake as hs
from transports.batch import Batches
from transports.cookie import load_cookie
from transports.faults import DROP, HOLD, FaultRules
from transports.tick import NetTicker, TickConfig
from transports.zmq_io import (
    EV_DOWN,
    EV_FRAME,
    EV_SETUP_FAILED,
    EV_UP,
    HubIoLoop,
    IoLoop,
    peer_endpoint,
)

__all__ = ["DEFAULT_NET_SETUPTIME", "IO_MODES", "ZmqTransport", "node_process_io", "peer_endpoint"]

log = logging.getLogger("warren.transport.zmq")

DEFAULT_NET_SETUPTIME = 7.0
_EV_LOCAL_DOWN = "local_down"  # (…, peer, sid, reason): this side ended the session
_IMMEDIATE = "immediate"  # a setup refused before any socket work (partition, pause)
_DISPATCH_SLICE = 256  # frames handled before letting other greenlets run
_HELD_IN_POLL = 0.01  # seconds between looks at a paused peer's waiting inbound events
IO_MODES = ("hub", "thread")
IO_ENV = "WARREN_ZMQ_IO"


def node_process_io() -> str:
    """The I/O mode of a dedicated node process: ``WARREN_ZMQ_IO`` if set, else ``hub``.

    A node process runs nothing but the hub, so socket work can live there;
    a node embedded in another program (a test, a benchmark driver, the
    harness) keeps the thread, whose default `ZmqTransport` uses.
    """
    return os.environ.get(IO_ENV) or "hub"


class ZmqTransport:
    """Links one node to the others over ZeroMQ (see the module docstring).

    ``cookie`` defaults to ``WARREN_COOKIE`` or ``~/.warren.cookie``;
    ``tick`` to Erlang's 60 s / 4; ``net_setuptime`` bounds connection setup.
    The node's name (``name@host:port``) gives the address to bind.
    """

    def __init__(
        self,
        *,
        cookie: str | bytes | None = None,
        tick: TickConfig | None = None,
        faults: FaultRules | None = None,
        net_setuptime: float = DEFAULT_NET_SETUPTIME,
        io: str | None = None,
    ) -> None:
        self.cookie = load_cookie(cookie)
        self.io_mode = io or os.environ.get(IO_ENV) or "thread"
        if self.io_mode not in IO_MODES:
            raise ValueError(f"ZmqTransport io must be one of {IO_MODES}, not {self.io_mode!r}")
        self.tick = tick or TickConfig()
        self.faults = faults or FaultRules()
        self.net_setuptime = net_setuptime
        self.ticker = NetTicker(self.tick)
        self.node: DistHandler | None = None
        self.name = ""
        self.closed = False
        self._io: IoLoop | None = None
        self._sessions: dict[str, int] = {}  # peer -> sid used for outgoing frames
        self._up: dict[str, int] = {}  # peer -> sid whose nodeup the node has seen
        self._connecting: dict[str, gevent.Greenlet] = {}  # peer -> setup timer
        self._batches = Batches(self._flush)
        # peer -> frames waiting for the fault rules: [release_at | None, sid, header, data]
        self._held: dict[str, deque[list[Any]]] = {}
        self._pump: gevent.Greenlet | None = None
        # peer -> inbound events waiting while this node is paused towards that peer
        self._held_in: dict[str, deque[tuple[Any, ...]]] = {}
        self._rx_seen: dict[int, int] = {}
        self._wake = Event()
        self._watcher: Any = None
        self._greenlets: list[gevent.Greenlet] = []

    # ---------------------------------------------------------- lifecycle

    def attach(self, node: DistHandler) -> None:
        self.node = node
        self.name = node.name
        hub = gevent.get_hub()
        self._watcher = hub.loop.async_()
        self._watcher.start(self._wake.set)
        if self.io_mode == "hub":
            self._io = HubIoLoop(node.name, node.creation, self.cookie,
                                 peer_endpoint(node.name), self.net_setuptime, self._wake.set)
        else:
            self._io = IoLoop(node.name, node.creation, self.cookie, peer_endpoint(node.name),
                              self.net_setuptime, self._wake_from_io)
        self._io.start()
        self._greenlets = [gevent.spawn(self._dispatch_loop), gevent.spawn(self._tick_loop)]

    def _wake_from_io(self) -> None:
        """Runs in the I/O thread: the only cross-thread call into the hub."""
        if not self.closed:
            self._watcher.send()

    def close(self) -> None:
        """End every session (peers see ``connection_closed`` at once) and stop."""
        if self.closed or self._io is None:
            self.closed = True
            return
        self._flush()
        self._io.submit(("close",))
        self.closed = True
        self._sessions.clear()
        for timer in self._connecting.values():
            timer.kill(block=False)
        self._connecting.clear()
        for g in self._greenlets:
            g.kill(block=False)
        if self._pump is not None:
            self._pump.kill(block=False)
        self._watcher.stop()

    def connected_nodes(self) -> list[str]:
        return sorted(self._up)

    @property
    def stats(self) -> dict[str, int]:
        """Refused handshakes, discarded unauthenticated frames, stale frames."""
        return dict(self._io.stats) if self._io is not None else {}

    # ------------------------------------------------------------ sending

    def connect(self, peer: str) -> None:
        if peer not in self._sessions and not self.closed:
            self._setup(peer)

    def send(self, peer: str, signal: tuple[Any, ...]) -> None:
        if self.closed:
            return
        if peer not in self._sessions and not self._setup(peer):
            return
        self._batches.add(peer, signal)

    def _setup(self, peer: str) -> bool:
        """Start connecting unless already under way; False if it failed at once."""
        if peer in self._connecting:
            return True
        faults = self.faults
        if (peer == self.name or not faults.connected(self.name, peer)
                or faults.holds(self.name, peer)):
            self._post((EV_SETUP_FAILED, peer, _IMMEDIATE))
            return False
        assert self._io is not None
        self._connecting[peer] = gevent.spawn_later(self.net_setuptime, self._setup_timeout, peer)
        self._io.submit(("connect", peer))
        return True

    def _setup_timeout(self, peer: str) -> None:
        if self._connecting.get(peer) is gevent.getcurrent():
            self._post((EV_SETUP_FAILED, peer, "connection_setup_failed"))

    def _flush(self) -> None:
        for peer, signals in self._batches.take().items():
            sid = self._sessions.get(peer)
            if sid is None:
                if peer in self._connecting:
                    self._batches.pending[peer] = signals  # sent once the session is up
                continue
            self._gate(peer, sid, hs.sid_header(hs.DATA, sid), self._pickle(peer, signals))

    def _pickle(self, peer: str, signals: list[tuple[Any, ...]]) -> bytes:
        try:
            return pickle.dumps(signals, protocol=5)
        except Exception:
            # One unpicklable message must not take the rest of the batch with it.
            good = []
            for sig in signals:
                try:
                    pickle.dumps(sig, protocol=5)
                except Exception as exc:
                    log.error("node %s: dropped a signal to %s that cannot be pickled: %r",
                              self.name, peer, exc)
                else:
                    good.append(sig)
            return pickle.dumps(good, protocol=5)

    def _gate(self, peer: str, sid: int, header: bytes, data: bytes | None) -> None:
        """Apply the fault rules to one outgoing frame, keeping per-peer order."""
        item: list[Any] = [None, sid, header, data]
        held = self._held.get(peer)
        if held:
            held.append(item)
        elif not self._advance(peer, item):
            self._held[peer] = deque([item])
            if self._pump is None or self._pump.dead:
                self._pump = gevent.spawn(self._pump_loop)

    def _advance(self, peer: str, item: list[Any]) -> bool:
        """Try to move one frame on; False while it must stay at the head of its queue.

        ``item[0]`` is None until the rules have ruled on the frame (a paused
        node or peer keeps it undecided); a delayed frame gets its release
        time and waits for it, and every later frame waits behind it.
        """
        faults = self.faults
        if item[0] is None and not faults.any_rule():
            # the common case, no fault injected anywhere: straight out
            self.ticker.sent(peer)
        else:
            if faults.is_paused(self.name):
                return False
            loop = gevent.get_hub().loop
            if item[0] is None:
                verdict = faults.verdict(self.name, peer)
                if verdict == HOLD:
                    return False
                self.ticker.sent(peer)
                if verdict == DROP:
                    return True
                delay = faults.delay_for(self.name, peer)
                if delay > 0:
                    item[0] = loop.now() + delay
                    return False
            elif item[0] > loop.now():
                return False
        _, sid, header, data = item
        assert self._io is not None
        self._io.submit(("send", peer, sid, [header] if data is None else [header, data]))
        return True

    def _pump_loop(self) -> None:
        """Release held and delayed frames in order, as the rules allow."""
        loop = gevent.get_hub().loop
        while self._held and not self.closed:
            wait = 0.01
            for peer in list(self._held):
                queue = self._held[peer]
                while queue and self._advance(peer, queue[0]):
                    queue.popleft()
                if not queue:
                    del self._held[peer]
                elif queue[0][0] is not None:
                    wait = min(wait, queue[0][0] - loop.now())
            gevent.sleep(max(wait, 0.001))

    # -------------------------------------------------------- sessions

    def disconnect(self, peer: str) -> bool:
        if peer not in self._sessions:
            return False
        self._local_down(peer, "disconnect")
        return True

    def _local_down(self, peer: str, reason: str) -> None:
        """This side ends the session: tell the peer (if the rules let it), then the node.

        Signals already sent in this session but not yet flushed leave first,
        so the peer's nodedown comes after them, as after any other frame.
        """
        sid = self._sessions.pop(peer, None)
        self.ticker.remove(peer)
        pending = self._batches.pop(peer)
        if sid is None:
            return
        if pending:
            self._gate(peer, sid, hs.sid_header(hs.DATA, sid), self._pickle(peer, pending))
        faults = self.faults
        notify = not faults.paused_for(self.name, peer) and faults.verdict(self.name, peer) != DROP
        assert self._io is not None
        self._io.submit(("down", peer, sid, notify))
        self._post((_EV_LOCAL_DOWN, peer, sid, reason))

    def _post(self, event: tuple[Any, ...]) -> None:
        """Queue an event of our own behind the inbound frames already received."""
        if self._io is not None:
            self._io.events.append(event)  # deque.append is atomic across threads
            self._wake.set()

    # ---------------------------------------------------------- receiving

    def _dispatch_loop(self) -> None:
        """Handle events in arrival order; a peer's events wait while we are paused for it.

        A pause limited to some peers (`FaultRules.pause(..., towards=...)`)
        must not stop the others, so each held peer's events go to a queue of
        their own, released in order (before anything newer) on resume.
        """
        assert self._io is not None
        inbox = self._io.events  # inbound frames and our own events, in one order
        wake = self._wake
        faults = self.faults
        held = self._held_in
        while not self.closed:
            if held:
                self._release_held_in()
            if not inbox:
                wake.clear()
                wake.wait(_HELD_IN_POLL if held else None)
                continue
            if faults.is_paused(self.name):
                gevent.sleep(0.005)
                continue
            for _ in range(_DISPATCH_SLICE):
                if not inbox:
                    break
                event = inbox.popleft()
                peer = event[1]
                if peer in held or faults.paused_for(self.name, peer):
                    held.setdefault(peer, deque()).append(event)
                else:
                    self._handle_logged(event)
            if inbox:
                gevent.sleep(0)  # a long burst: let the processes it fed run first

    def _release_held_in(self) -> None:
        for peer in list(self._held_in):
            if self.faults.paused_for(self.name, peer):
                continue
            queue = self._held_in.pop(peer)
            while queue:
                self._handle_logged(queue.popleft())

    def _handle_logged(self, event: tuple[Any, ...]) -> None:
        try:
            self._handle(event)
        except Exception:
            log.exception("node %s: failed to handle %s from %s", self.name, event[0], event[1])

    def _handle(self, event: tuple[Any, ...]) -> None:
        node = self.node
        assert node is not None
        kind, peer = event[0], event[1]
        if kind == EV_FRAME:
            if self._up.get(peer) == event[2]:
                node.dist_receive(peer, pickle.loads(event[3]))
        elif kind == EV_UP:
            _, _, sid, creation = event
            if peer in self._up:
                old = self._up.pop(peer)
                if self._sessions.get(peer) == old:
                    del self._sessions[peer]
                node.dist_nodedown(peer, "connection_closed")
            timer = self._connecting.pop(peer, None)
            if timer is not None:
                timer.kill(block=False)
            self._sessions[peer] = sid
            self._up[peer] = sid
            self.ticker.add(peer)
            node.dist_nodeup(peer, creation)
            if self._batches.pending.get(peer):
                self._batches.schedule()
        elif kind in (EV_DOWN, _EV_LOCAL_DOWN):
            _, _, sid, reason = event
            if self._sessions.get(peer) == sid:
                del self._sessions[peer]
                self.ticker.remove(peer)
                self._batches.pop(peer)
            if self._up.get(peer) == sid:
                del self._up[peer]
                node.dist_nodedown(peer, reason)
        elif kind == EV_SETUP_FAILED:
            if peer in self._sessions:
                return
            timer = self._connecting.pop(peer, None)
            if timer is not None:
                timer.kill(block=False)
                assert self._io is not None
                self._io.submit(("abort", peer))
            elif event[2] != _IMMEDIATE:
                return  # already reported by the other of the two setup timers
            self._batches.pop(peer)
            node.dist_nodedown(peer, "connection_setup_failed")

    # ------------------------------------------------------------- ticks

    def _tick_loop(self) -> None:
        faults = self.faults
        interval = self.tick.interval
        while not self.closed:
            gevent.sleep(interval)
            if faults.is_paused(self.name):
                continue
            assert self._io is not None
            self._io.refresh()
            rx = self._io.rx
            for peer, sid in self._sessions.items():
                count = rx.get(sid, 0)
                if count != self._rx_seen.get(sid, 0):
                    self._rx_seen[sid] = count
                    self.ticker.received(peer)
            to_tick, down = self.ticker.check()
            for peer in to_tick:
                tick_sid = self._sessions.get(peer)
                if tick_sid is not None:
                    self._gate(peer, tick_sid, hs.sid_header(hs.TICK, tick_sid), None)
            for peer in down:
                self.ticker.add(peer)  # so _local_down's remove is harmless
                self._local_down(peer, "net_tick_timeout")
