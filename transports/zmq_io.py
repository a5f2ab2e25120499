"""The socket layer of the ZeroMQ transport: sockets, handshakes, sessions.

It runs in one of two places (`transports.zmq` says which to use when):
`IoLoop` on a native thread that owns every socket (the hub only touches the
inproc PAIR that wakes it), or `HubIoLoop` on the gevent hub itself. The
socket logic below is shared; only the driver differs.

Topology: each node binds one ROUTER. To reach a peer it opens one DEALER to
the peer's ROUTER and runs the handshake (`transports.handshake`) over it;
that single TCP connection then carries both directions of the session (the
initiator writes on its DEALER, the acceptor on its ROUTER with the
connection's routing id), so each direction is one ordered stream. When both
nodes dial each other at once, the connection opened by the node with the
smaller name wins, as in Erlang.

Authentication is per TCP connection: a routing id is trusted only once its
``auth`` step verified, and every frame also carries the session id. Frames
from any other routing id or session are discarded here, in this thread,
before the hub could ever unpickle them. ZeroMQ's automatic reconnect cannot
smuggle old frames into a new session either: a reconnected DEALER gets a new
routing id at the peer, which is unauthenticated.

Events for the hub go to a deque in arrival order, followed by one wake-up of
the hub per poll round (on the thread: a libev async watcher, the only
thread-safe way into the hub); commands from the hub come the other way
through a deque plus a one-byte wake on an inproc PAIR (on the hub: run at
once).
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gevent
import zmq
from gevent.monkey import get_original
from zmq.utils.monitor import recv_monitor_message

from transports import handshake as hs

__all__ = ["HubIoLoop", "IoLoop"]

log = logging.getLogger("warren.transport.zmq")

_start_new_thread = get_original("_thread", "start_new_thread")
_allocate_lock = get_original("_thread", "allocate_lock")

# Events for the hub (first element).
EV_UP = "up"  # (EV_UP, peer, sid, creation)
EV_FRAME = "frame"  # (EV_FRAME, peer, sid, payload)
EV_DOWN = "down"  # (EV_DOWN, peer, sid, reason)
EV_SETUP_FAILED = "setup_failed"  # (EV_SETUP_FAILED, peer, reason)

_RECV_BATCH = 512  # messages read from one socket per poll round

# pyzmq's Socket.send and getsockopt do enum flag arithmetic on every call (about
# 1.2 us a frame part, more than the send itself); the socket layer calls the
# backend methods with plain int flags instead.
_raw_send = zmq.backend.Socket.send
_raw_recv = zmq.backend.Socket.recv
_raw_get = zmq.backend.Socket.get
_MORE = int(zmq.NOBLOCK | zmq.SNDMORE)
_LAST = int(zmq.NOBLOCK)
_EVENTS = int(zmq.EVENTS)
_POLLIN = int(zmq.POLLIN)


#: Environment variable naming the scheduling policy of libzmq's own threads
#: (``batch`` or ``other``), for A/B measurements; unset: `IO_THREAD_POLICY`.
IO_SCHED_ENV = "WARREN_ZMQ_IO_SCHED"
_POLICIES = {"batch": getattr(os, "SCHED_BATCH", None), "other": getattr(os, "SCHED_OTHER", None)}
#: libzmq's I/O thread runs as a batch thread where the OS has the policy (Linux).
#: A send from the hub wakes that thread, and a normal thread woken on the hub's
#: core preempts the hub at once, so the hub's next step (often its inline WAL
#: sync) waits for the I/O thread's turn. A batch thread is never run by a wake-up
#: preemption: it takes an idle core, or the hub's core when the hub blocks (the
#: sync, the poll), and otherwise has its fair share of CPU like any thread.
#: The measurements are in docs/transports.md.
IO_THREAD_POLICY = _POLICIES["batch"]


def io_thread_policy() -> int | None:
    """The policy for libzmq's threads: ``WARREN_ZMQ_IO_SCHED`` if set, else the default;
    None leaves them as the OS starts them."""
    name = os.environ.get(IO_SCHED_ENV)
    if not name:
        return IO_THREAD_POLICY
    if name not in _POLICIES:
        raise ValueError(f"{IO_SCHED_ENV}={name!r}: expected one of {sorted(_POLICIES)}")
    return _POLICIES[name]


@functools.cache
def policy_allowed(policy: int) -> bool:
    """Whether a thread of this process may take `policy`, tried on a throwaway thread.

    libzmq aborts the process when its thread cannot take the policy it was given,
    and a sandbox may refuse what Linux itself allows anyone."""
    done = _allocate_lock()
    done.acquire()
    allowed: list[bool] = []

    def probe() -> None:
        try:
            os.sched_setscheduler(0, policy, os.sched_param(0))  # 0: this thread
            allowed.append(True)
        except OSError:
            allowed.append(False)
        finally:
            done.release()

    _start_new_thread(probe, ())
    done.acquire()
    return allowed[0]


def new_context() -> zmq.Context:
    """A ZeroMQ context whose threads (started with its first socket) get
    `io_thread_policy`, where this process may give it."""
    ctx = zmq.Context()
    policy = io_thread_policy()
    if policy is not None:
        if policy_allowed(policy):
            ctx.set(zmq.THREAD_SCHED_POLICY, policy)
        else:
            log.info("ZeroMQ's threads keep the default scheduling policy: "
                     "policy %d is refused here", policy)
    return ctx


def _send_parts(sock: zmq.Socket, parts: list[bytes]) -> None:
    """``send_multipart(parts, NOBLOCK, copy=False)`` without the per-part enum work."""
    last = len(parts) - 1
    for i, part in enumerate(parts):
        _raw_send(sock, part, _LAST if i == last else _MORE, False)


def _recv_parts(sock: zmq.Socket) -> list[bytes]:
    """``recv_multipart(NOBLOCK)`` likewise; raises `zmq.Again` when nothing waits.

    Parts are received as frames and copied out: a frame's ``more`` is read
    from the message itself, where asking the socket for ``RCVMORE`` goes
    through pyzmq's option enum on every part.
    """
    frame = _raw_recv(sock, _LAST, False)
    parts = [frame.bytes]
    while frame.more:
        frame = _raw_recv(sock, _LAST, False)
        parts.append(frame.bytes)
    return parts


def _has_input(sock: zmq.Socket) -> bool:
    events = _raw_get(sock, _EVENTS)
    assert isinstance(events, int)  # ZMQ_EVENTS is an int option
    return bool(events & _POLLIN)
_PROBE_DELAYS = (0.005, 0.02, 0.05, 0.1, 0.25)
_CLOSE_LINGER_MS = 500


@dataclass(slots=True)
class _Link:
    """One connection to a peer, being set up or carrying a session."""

    peer: str
    sid: int
    outgoing: bool  # True: our DEALER dialled; False: accepted on our ROUTER
    deadline: float
    my_nonce: str = ""
    their_nonce: str = ""
    creation: int = 0
    up: bool = False
    sock: zmq.Socket | None = None  # DEALER (outgoing)
    mon: zmq.Socket | None = None  # its monitor socket
    rid: bytes = b""  # routing id (incoming)
    extra: dict[str, Any] = field(default_factory=dict)


def peer_endpoint(peer: str) -> str:
    """``name@host:port`` → ``tcp://host:port`` (the address is in the name)."""
    _, _, addr = peer.partition("@")
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"node name {peer!r} is not name@host:port")
    return f"tcp://{host}:{port}"


class IoLoop:
    """All socket work of one node, on one native thread."""

    def __init__(
        self,
        name: str,
        creation: int,
        cookie: bytes,
        bind: str,
        setuptime: float,
        wake_hub: Callable[[], None],
    ) -> None:
        self.name = name
        self.creation = creation
        self._cookie = cookie
        self._setuptime = setuptime
        self._wake_hub = wake_hub
        self.events: deque[tuple[Any, ...]] = deque()
        self.rx: dict[int, int] = {}  # sid -> frames received (read by the hub's ticker)
        self.stats = {"refused": 0, "discarded": 0, "stale": 0}
        self._cmds: deque[tuple[Any, ...]] = deque()
        self._wake_pending = False
        self._stopping = False
        self._ctx = new_context()
        router = self._ctx.socket(zmq.ROUTER)
        router.setsockopt(zmq.ROUTER_MANDATORY, 1)
        router.setsockopt(zmq.SNDHWM, 0)  # never drop, never block (Erlang's send is async)
        router.setsockopt(zmq.RCVHWM, 0)
        router.setsockopt(zmq.LINGER, _CLOSE_LINGER_MS)
        router.bind(bind)  # in the caller's thread, so a busy port fails loudly
        self._router = router
        self._router_mon = router.get_monitor_socket(zmq.EVENT_DISCONNECTED)
        self._pair_addr = f"inproc://warren-io-{id(self)}"
        self._pair_io = self._ctx.socket(zmq.PAIR)
        self._pair_io.bind(self._pair_addr)
        self._pair_hub = self._ctx.socket(zmq.PAIR)
        self._pair_hub.setsockopt(zmq.SNDHWM, 0)
        self._pair_hub.connect(self._pair_addr)
        self._links: dict[str, _Link] = {}  # peer -> up link or our pending dial
        self._pending_in: dict[str, _Link] = {}  # peer -> accepted, not yet authenticated
        self._by_rid: dict[bytes, _Link | None] = {}  # None: refused connection
        self._by_sock: dict[zmq.Socket, _Link] = {}
        self._poller = zmq.Poller()
        self._probes: list[float] = []
        self._dirty = False
        self.done = False

    # ------------------------------------------------------------ hub side

    def start(self) -> None:
        _start_new_thread(self._run, ())

    def refresh(self) -> None:
        """Nothing to do: the I/O thread keeps reading while the hub is busy."""

    def submit(self, cmd: tuple[Any, ...]) -> None:
        """Called in the hub thread: queue a command and wake the I/O thread."""
        if self._stopping or self._pair_hub.closed:
            return  # the transport is closed: nothing leaves any more
        self._cmds.append(cmd)
        if not self._wake_pending:
            self._wake_pending = True
            self._pair_hub.send(b"", zmq.NOBLOCK)

    # ------------------------------------------------------------ the loop

    def _run(self) -> None:
        poller = self._poller
        poller.register(self._router, zmq.POLLIN)
        poller.register(self._router_mon, zmq.POLLIN)
        poller.register(self._pair_io, zmq.POLLIN)
        try:
            while not self._stopping:
                try:
                    self._round(poller)
                except zmq.ContextTerminated:
                    raise
                except Exception:
                    # One bad event (a peer vanishing mid-handshake, say) must
                    # not end the node's only I/O thread.
                    log.exception("node %s: I/O round failed", self.name)
        except Exception:
            log.exception("node %s: I/O thread failed", self.name)
        finally:
            self._shutdown()

    def _round(self, poller: zmq.Poller) -> None:
        """One poll round: commands from the hub, sockets, timers, hub wake-up."""
        timeout = self._poll_timeout()
        ready = dict(poller.poll(timeout))
        if self._pair_io in ready:
            self._drain_pair()
            self._run_commands()
        if self._stopping:
            return
        self._read_ready(ready)
        self._timers()
        if self._dirty:
            self._dirty = False
            self._wake_hub()

    def _register(self, sock: zmq.Socket) -> None:
        self._poller.register(sock, zmq.POLLIN)

    def _unregister(self, sock: zmq.Socket) -> None:
        self._poller.unregister(sock)

    def _read_ready(self, ready: dict[Any, int]) -> None:
        """Read every socket `poll` found readable."""
        if self._router in ready:
            self._read_router()
        if self._router_mon in ready:
            self._read_router_monitor()
        for sock in list(ready):
            link = self._by_sock.get(sock)
            if link is None:
                continue
            if sock is link.sock:
                self._read_dealer(link)
            elif sock is link.mon:
                self._read_dealer_monitor(link)

    def _next_deadline(self) -> float | None:
        """The earliest probe or handshake deadline (``time.monotonic``), if any."""
        deadlines = [t for t in self._probes]
        deadlines += [lk.deadline for lk in self._pending_in.values()]
        deadlines += [lk.deadline for lk in self._links.values() if not lk.up]
        return min(deadlines) if deadlines else None

    def _poll_timeout(self) -> int | None:
        deadline = self._next_deadline()
        if deadline is None:
            return None
        return max(0, int((deadline - time.monotonic()) * 1000) + 1)

    def _emit(self, event: tuple[Any, ...]) -> None:
        self.events.append(event)
        self._dirty = True

    def _drain_pair(self) -> None:
        # Order matters. The flag is cleared only after the pipe is empty and
        # before the commands run: clearing it first would let this drain eat
        # the byte of a `submit` that set the flag after the clear, leaving
        # the flag True with no byte in flight, and every later `submit`
        # would skip its wake-up (the I/O thread then sleeps on queued sends).
        try:
            while True:
                self._pair_io.recv(zmq.NOBLOCK)
        except zmq.Again:
            pass
        self._wake_pending = False

    def _run_commands(self) -> None:
        cmds = self._cmds
        while cmds:
            cmd = cmds.popleft()
            op = cmd[0]
            if op == "send":
                self._send(cmd[1], cmd[2], cmd[3])
            elif op == "connect":
                self._dial(cmd[1])
            elif op == "down":
                self._local_down(cmd[1], cmd[2], cmd[3])
            elif op == "abort":
                link = self._links.get(cmd[1])
                if link is not None and not link.up:
                    self._drop(link)
            elif op == "close":
                self._close_all()
                self._stopping = True
                return

    # ------------------------------------------------------------ sending

    def _send(self, peer: str, sid: int, parts: list[bytes]) -> None:
        link = self._links.get(peer)
        if link is None or not link.up or link.sid != sid:
            return  # the session ended meanwhile: the frame is lost, as in Erlang
        self._write(link, parts)

    def _write(self, link: _Link, parts: list[bytes]) -> bool:
        try:
            if link.outgoing:
                assert link.sock is not None
                _send_parts(link.sock, parts)
            else:
                _send_parts(self._router, [link.rid, *parts])
            return True
        except zmq.ZMQError as exc:
            # ROUTER_MANDATORY: the connection is gone (EHOSTUNREACH).
            if link.up and self._links.get(link.peer) is link:
                self._emit((EV_DOWN, link.peer, link.sid, "connection_closed"))
            log.debug("node %s: write to %s failed: %s", self.name, link.peer, exc)
            self._drop(link)
            return False

    def _local_down(self, peer: str, sid: int, notify: bool) -> None:
        link = self._links.get(peer)
        if link is None or link.sid != sid:
            return
        if notify and link.up:
            self._write(link, [hs.sid_header(hs.CLOSE, sid)])
        self._drop(link)

    def _close_all(self) -> None:
        for link in list(self._links.values()):
            if link.up:
                self._write(link, [hs.sid_header(hs.CLOSE, link.sid)])
            self._drop(link)

    # ------------------------------------------------------------ dialling

    def _dial(self, peer: str) -> None:
        if peer in self._links or peer in self._pending_in:
            return
        try:
            endpoint = peer_endpoint(peer)
        except ValueError as exc:
            log.warning("node %s: %s", self.name, exc)
            self._emit((EV_SETUP_FAILED, peer, "connection_setup_failed"))
            return
        sock = self._ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.SNDHWM, 0)
        sock.setsockopt(zmq.RCVHWM, 0)
        sock.setsockopt(zmq.LINGER, _CLOSE_LINGER_MS)
        mon = sock.get_monitor_socket(zmq.EVENT_DISCONNECTED)
        sock.connect(endpoint)
        link = _Link(peer, hs.new_sid(), True, time.monotonic() + self._setuptime,
                     my_nonce=hs.new_nonce(), sock=sock, mon=mon)
        self._links[peer] = link
        self._by_sock[sock] = link
        self._by_sock[mon] = link
        self._register(sock)
        self._register(mon)
        hello = hs.encode("hello", v=hs.PROTOCOL_VERSION, to=peer, creation=self.creation,
                          nonce=link.my_nonce, sid=link.sid, **{"from": self.name})
        sock.send_multipart([hs.HANDSHAKE, hello])

    def _read_dealer(self, link: _Link) -> None:
        sock = link.sock
        for _ in range(_RECV_BATCH):
            if sock is None or self._by_sock.get(sock) is not link:
                return
            try:
                parts = _recv_parts(sock)
            except zmq.Again:
                return
            if not parts:
                continue
            header = parts[0]
            if header == hs.HANDSHAKE:
                self._dealer_handshake(link, parts)
            else:
                self._session_frame(link, header, parts)

    def _dealer_handshake(self, link: _Link, parts: list[bytes]) -> None:
        try:
            if len(parts) != 2 or link.up:
                raise hs.HandshakeError("unexpected handshake message")
            msg = hs.decode(parts[1])
            if msg["op"] == "nok":
                if msg["reason"] == "simultaneous":
                    # The peer's own dial to us wins; its hello arrives on our ROUTER.
                    self._drop(link)
                    return
                raise hs.HandshakeError(f"peer refused: {msg['reason']}")
            if msg["op"] != "challenge" or msg["from"] != link.peer or msg["sid"] != link.sid:
                raise hs.HandshakeError("challenge does not match the hello")
            tr = hs.Transcript(self.name, link.peer, self.creation, msg["creation"],
                               link.my_nonce, msg["nonce"], link.sid)
            if not hs.Transcript.check(tr.acceptor_mac(self._cookie), msg["mac"]):
                raise hs.HandshakeError("bad challenge MAC (different cookie?)")
        except hs.HandshakeError as exc:
            self.stats["refused"] += 1
            log.warning("node %s: refused connection to %s: %s", self.name, link.peer, exc)
            self._drop(link)
            self._emit((EV_SETUP_FAILED, link.peer, "connection_setup_failed"))
            return
        assert link.sock is not None
        link.sock.send_multipart(
            [hs.HANDSHAKE, hs.encode("auth", sid=link.sid, mac=tr.initiator_mac(self._cookie))])
        link.creation = msg["creation"]
        link.up = True
        self._emit((EV_UP, link.peer, link.sid, link.creation))

    def _read_dealer_monitor(self, link: _Link) -> None:
        assert link.mon is not None
        try:
            while True:
                event = recv_monitor_message(link.mon, zmq.NOBLOCK)
                if event["event"] == zmq.EVENT_DISCONNECTED and link.up:
                    # TCP closed or reset: report now rather than after the ticks.
                    if self._links.get(link.peer) is link:
                        self._emit((EV_DOWN, link.peer, link.sid, "connection_closed"))
                    self._drop(link)
                    return
        except zmq.Again:
            pass

    # ------------------------------------------------------------ accepting

    def _read_router(self) -> None:
        router = self._router
        for _ in range(_RECV_BATCH):
            try:
                parts = _recv_parts(router)
            except zmq.Again:
                return
            if len(parts) < 2:
                continue
            rid, header = parts[0], parts[1]
            if header == hs.HANDSHAKE:
                self._router_handshake(rid, parts[2:])
                continue
            link = self._by_rid.get(rid)
            if link is None or not link.up:
                self._discard(rid, "frame from an unauthenticated connection")
                continue
            self._session_frame(link, header, parts[1:])

    def _discard(self, rid: bytes, why: str) -> None:
        self.stats["discarded"] += 1
        if self.stats["discarded"] <= 10 or self.stats["discarded"] % 1000 == 0:
            log.warning("node %s: discarded %s (%d so far)", self.name, why,
                        self.stats["discarded"])

    def _refuse(self, rid: bytes, sid: int, why: str, peer: str = "?") -> None:
        self.stats["refused"] += 1
        log.warning("node %s: refused connection from %s: %s", self.name, peer, why)
        if len(self._by_rid) > 10_000:
            self._by_rid = {k: v for k, v in self._by_rid.items() if v is not None}
        self._by_rid[rid] = None
        try:
            self._router.send_multipart([rid, hs.HANDSHAKE, hs.encode("nok", sid=sid,
                                                                      reason="refused")])
        except zmq.ZMQError:
            pass

    def _router_handshake(self, rid: bytes, rest: list[bytes]) -> None:
        try:
            if len(rest) != 1:
                raise hs.HandshakeError("bad handshake frame")
            msg = hs.decode(rest[0])
        except hs.HandshakeError as exc:
            self._refuse(rid, 0, str(exc))
            return
        if rid in self._by_rid and (msg["op"] != "auth" or self._by_rid[rid] is None):
            self._refuse(rid, msg.get("sid", 0), "handshake out of order")
            return
        if msg["op"] == "hello":
            self._on_hello(rid, msg)
        elif msg["op"] == "auth":
            self._on_auth(rid, msg)
        else:
            self._refuse(rid, msg.get("sid", 0), f"unexpected {msg['op']!r}")

    def _on_hello(self, rid: bytes, msg: dict[str, Any]) -> None:
        peer = msg["from"]
        if msg["v"] != hs.PROTOCOL_VERSION or msg["to"] != self.name or peer == self.name:
            self._refuse(rid, msg["sid"], f"hello for {msg['to']!r}, version {msg['v']}", peer)
            return
        mine = self._links.get(peer)
        if mine is not None and not mine.up:
            if self.name < peer:
                nok = hs.encode("nok", sid=msg["sid"], reason="simultaneous")
                try:
                    self._router.send_multipart([rid, hs.HANDSHAKE, nok])
                except zmq.ZMQError:
                    pass  # the dialler is already gone (EHOSTUNREACH)
                return
            self._drop(mine)  # their dial wins; the hub keeps waiting for the session
        old = self._pending_in.pop(peer, None)
        if old is not None:
            self._by_rid.pop(old.rid, None)
        link = _Link(peer, msg["sid"], False, time.monotonic() + self._setuptime,
                     my_nonce=hs.new_nonce(), their_nonce=msg["nonce"],
                     creation=msg["creation"], rid=rid)
        self._pending_in[peer] = link
        self._by_rid[rid] = link
        tr = self._transcript_in(link)
        challenge = hs.encode("challenge", creation=self.creation, nonce=link.my_nonce,
                              sid=link.sid, mac=tr.acceptor_mac(self._cookie),
                              **{"from": self.name})
        try:
            self._router.send_multipart([rid, hs.HANDSHAKE, challenge])
        except zmq.ZMQError:
            self._pending_in.pop(peer, None)
            self._by_rid.pop(rid, None)

    def _transcript_in(self, link: _Link) -> hs.Transcript:
        return hs.Transcript(link.peer, self.name, link.creation, self.creation,
                             link.their_nonce, link.my_nonce, link.sid)

    def _on_auth(self, rid: bytes, msg: dict[str, Any]) -> None:
        link = self._by_rid.get(rid)
        if link is None or link.up or self._pending_in.get(link.peer) is not link:
            self._refuse(rid, msg["sid"], "auth without hello")
            return
        expected = self._transcript_in(link).initiator_mac(self._cookie)
        if msg["sid"] != link.sid or not hs.Transcript.check(expected, msg["mac"]):
            del self._pending_in[link.peer]
            self._refuse(rid, msg["sid"], "bad auth MAC (different cookie?)", link.peer)
            return
        del self._pending_in[link.peer]
        old = self._links.get(link.peer)
        if old is not None and old.up and old.outgoing:
            # A new session from the same peer (restarted, or it saw the old
            # one die first): what the old connection already holds goes first.
            self._read_dealer(old)
            old = self._links.get(link.peer)
        if old is not None:
            if old.up:
                self._emit((EV_DOWN, old.peer, old.sid, "connection_closed"))
            self._drop(old)
        link.up = True
        self._links[link.peer] = link
        self._emit((EV_UP, link.peer, link.sid, link.creation))

    def _read_router_monitor(self) -> None:
        try:
            while True:
                event = recv_monitor_message(self._router_mon, zmq.NOBLOCK)
                if event["event"] == zmq.EVENT_DISCONNECTED:
                    # The event does not say which routing id died; probe the
                    # accepted sessions over the next moments (ROUTER_MANDATORY
                    # turns a write to a dead one into EHOSTUNREACH).
                    now = time.monotonic()
                    self._probes.extend(now + d for d in _PROBE_DELAYS)
        except zmq.Again:
            pass

    # ------------------------------------------------------------ sessions

    def _session_frame(self, link: _Link, header: bytes, parts: list[bytes]) -> None:
        try:
            kind, sid = hs.split_header(header)
        except hs.HandshakeError:
            self._discard(link.rid, f"malformed frame from {link.peer}")
            return
        if not link.up or sid != link.sid or self._links.get(link.peer) is not link:
            self.stats["stale"] += 1
            return
        if kind == hs.DATA:
            if len(parts) != 2:
                self._discard(link.rid, f"malformed data frame from {link.peer}")
                return
            self.rx[sid] = self.rx.get(sid, 0) + 1
            self._emit((EV_FRAME, link.peer, sid, parts[1]))
        elif kind == hs.TICK:
            self.rx[sid] = self.rx.get(sid, 0) + 1
        elif kind == hs.CLOSE:
            self._emit((EV_DOWN, link.peer, sid, "connection_closed"))
            self._drop(link)

    def _drop(self, link: _Link) -> None:
        """Forget a link and close its sockets (queued output still leaves: linger)."""
        if self._links.get(link.peer) is link:
            del self._links[link.peer]
        if self._pending_in.get(link.peer) is link:
            del self._pending_in[link.peer]
        if link.outgoing:
            for sock in (link.mon, link.sock):
                if sock is not None and sock in self._by_sock:
                    del self._by_sock[sock]
                    self._unregister(sock)
            if link.sock is not None:
                try:
                    link.sock.disable_monitor()
                except zmq.ZMQError:
                    pass
                link.sock.close()
            if link.mon is not None:
                link.mon.close(0)
            link.sock = link.mon = None
        else:
            if self._by_rid.get(link.rid) is link:
                # The routing id stays known as refused: any later frame on
                # that connection (e.g. after SIGCONT) is discarded.
                self._by_rid[link.rid] = None
        link.up = False

    def _timers(self) -> None:
        now = time.monotonic()
        for peer, link in list(self._pending_in.items()):
            if link.deadline <= now:
                del self._pending_in[peer]
                self._by_rid.pop(link.rid, None)
        for link in list(self._links.values()):
            if not link.up and link.deadline <= now:
                self._drop(link)
                self._emit((EV_SETUP_FAILED, link.peer, "connection_setup_failed"))
        if self._probes and min(self._probes) <= now:
            self._probes = [t for t in self._probes if t > now]
            for link in list(self._links.values()):
                if link.up and not link.outgoing:
                    self._write(link, [hs.sid_header(hs.TICK, link.sid)])

    def _shutdown(self) -> None:
        self.done = True
        for sock in (self._router_mon, self._pair_io):
            sock.close(0)
        try:
            self._router.disable_monitor()
        except zmq.ZMQError:
            pass
        self._router.close()
        self._pair_hub.close(0)
        self._ctx.term()  # waits for the lingering CLOSE frames to leave


class HubIoLoop(IoLoop):
    """The same socket work, done on the gevent hub itself: no second Python thread.

    Why: with the I/O on a thread, every frame crosses between two Python
    threads, and each crossing is a GIL hand-over. When a node's hub and its
    I/O thread both have work (every Raft round does), the hub gives the GIL
    away at each system call (a socket write, an fsync, the wake-up of the
    I/O thread itself) and waits until the I/O thread gives it back; on a
    machine with fewer cores than busy processes those waits dominate a
    round trip. Here every ZeroMQ call is non-blocking and made on the hub.

    ZeroMQ signals readiness through one file descriptor per socket
    (``zmq.FD``), edge-style: it fires when the socket's events may have
    changed, and only a look at the events re-arms it. So a libev watcher per
    descriptor reads its socket when the descriptor fires (a batch; if input
    is still waiting, a full round follows), a write is followed by a look at
    its socket's events (a write can consume the signal of frames that arrived
    meanwhile; if input is waiting, a round follows in this hub iteration),
    and a full round polls every socket with timeout 0 and reads until
    nothing is ready.
    """

    _ROUNDS_PER_CALL = 4  # poll rounds per callback before other greenlets get a turn

    def start(self) -> None:
        loop = gevent.get_hub().loop
        self._loop = loop
        self._watchers: dict[zmq.Socket, Any] = {}
        self._timer: Any = None
        self._timer_at: float | None = None
        self._scheduled = False
        self._in_round = False
        self.rounds = 0  # poll rounds run (an idle node must not spin)
        self._register(self._router)
        self._register(self._router_mon)
        self._schedule()
        _Laps.join(self)

    def look(self) -> None:
        """Read the sockets holding input (`_Laps`), without waiting for their
        descriptors to be polled."""
        if self._stopping or self.done:
            return
        if (not self._router.closed and _has_input(self._router)) or any(
                link.sock is not None and not link.sock.closed and _has_input(link.sock)
                for link in self._links.values() if link.outgoing):
            self._hub_round()

    def submit(self, cmd: tuple[Any, ...]) -> None:
        """Run one command at once (called on the hub, like everything here)."""
        if self._stopping or self.done:
            return
        self._cmds.append(cmd)
        self._run_commands()
        if self._stopping:
            self._hub_shutdown()
            return
        if cmd[0] != "send":
            self._schedule()  # dials and drops: look at every socket once more
        if self._dirty:
            self._dirty = False
            self._wake_hub()

    def _write(self, link: _Link, parts: list[bytes]) -> bool:
        ok = IoLoop._write(self, link, parts)
        # a write can consume the readiness signal of frames that arrived
        # meanwhile: if the socket holds input, read it in this iteration
        sock = link.sock if link.outgoing else self._router
        if sock is not None and not sock.closed and _has_input(sock):
            self._schedule()
        return ok

    def refresh(self) -> None:
        """Read whatever has arrived now (the tick check counts it as life)."""
        if not (self._stopping or self.done):
            self._hub_round()

    def _register(self, sock: zmq.Socket) -> None:
        self._poller.register(sock, zmq.POLLIN)
        watcher = self._loop.io(sock.getsockopt(zmq.FD), 1)
        watcher.start(self._socket_ready, sock)
        self._watchers[sock] = watcher

    def _unregister(self, sock: zmq.Socket) -> None:
        self._poller.unregister(sock)
        watcher = self._watchers.pop(sock, None)
        if watcher is not None:
            watcher.stop()
            watcher.close()

    def _schedule(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            self._loop.run_callback(self._scheduled_round)

    def _scheduled_round(self) -> None:
        self._scheduled = False
        self._hub_round()

    def _socket_ready(self, sock: zmq.Socket) -> None:
        """One socket's descriptor fired: read that socket, without polling the others."""
        self._hub_round(sock)

    def _hub_round(self, only: zmq.Socket | None = None) -> None:
        """Read `only`, or every socket a zero-timeout poll finds readable; then timers."""
        if self._in_round or self._stopping or self.done:
            return
        if only is not None and only not in self._watchers:
            return  # dropped since its descriptor fired
        self._in_round = True
        self.rounds += 1
        try:
            if only is not None:
                self._read_ready({only: zmq.POLLIN})
                if only in self._watchers and _has_input(only):
                    self._schedule()  # more than one batch waits: the rest after the others
            else:
                for _ in range(self._ROUNDS_PER_CALL):
                    ready = dict(self._poller.poll(0))
                    if not ready:
                        break
                    self._read_ready(ready)
                else:
                    self._schedule()  # still busy: again after the others had a turn
            if self._probes or self._pending_in or self._timer is not None or self._dialling():
                self._timers()
                self._arm_timer()
        except Exception:
            log.exception("node %s: I/O round failed", self.name)
        finally:
            self._in_round = False
        if self._dirty:
            self._dirty = False
            self._wake_hub()

    def _dialling(self) -> bool:
        """Whether a dial of ours waits for its handshake (its deadline needs the timer).

        A loop rather than ``any(...)``: this runs after every socket read, and
        building the generator costs more than the two links it looks at."""
        for link in self._links.values():  # noqa: SIM110
            if not link.up:
                return True
        return False

    def _arm_timer(self) -> None:
        """One libev timer for the earliest deadline; re-armed only when that changes."""
        at = self._next_deadline()
        if at == self._timer_at and (at is None or self._timer is not None):
            return
        if self._timer is not None:
            self._timer.stop()
            self._timer.close()
            self._timer = None
        self._timer_at = at
        if at is not None:
            self._timer = self._loop.timer(max(0.0, at - time.monotonic()) + 0.001)
            self._timer.start(self._timer_round)

    def _timer_round(self) -> None:
        if self._timer is not None:
            self._timer.close()
            self._timer = None
        self._timer_at = None
        self._hub_round()

    def _hub_shutdown(self) -> None:
        """Stop watching, then close the sockets and the context off the hub:
        terminating the context waits for the CLOSE frames' linger."""
        for sock in list(self._watchers):
            self._unregister(sock)
        _Laps.leave(self)
        if self._timer is not None:
            self._timer.stop()
            self._timer.close()
            self._timer = None
        self.done = True
        _start_new_thread(self._shutdown, ())


def _has_callbacks(loop: Any) -> bool:
    """Whether gevent has callbacks queued on `loop` (its ``_callbacks``: the same
    attribute in its Cython and CFFI loops)."""
    return bool(loop._callbacks)


class _Laps:
    """A look at the sockets of every hub-mode node on one hub once per round of the
    hub's queued callbacks.

    gevent runs queued callbacks, and those they queue, until none is left, and
    lets libev poll the descriptors only between groups of 50 once its switch
    interval (5 ms) has passed. On a busy node (a publisher's reader, its channel
    and a queue waking each other for as long as the client sends) that is a poll
    every 50 process runs, tens of milliseconds apart or more, while the frames of
    the other nodes (a remote consumer's acks, its ``notify_sent``) wait in the
    sockets. The BEAM's schedulers check I/O between processes; here a callback
    that reads the sockets holding input goes among the queued ones, and comes
    round again while others are queued. An idle hub polls its descriptors itself.
    One per hub, whatever the number of its nodes, so that two nodes' looks never
    keep each other going."""

    _by_loop: dict[int, _Laps] = {}

    def __init__(self, loop: Any) -> None:
        self.loop = loop
        self.nodes: list[HubIoLoop] = []
        self.due = False
        self.laps = 0  # looks run (an idle hub must not go round)
        # started after gevent's own, so it runs first (libev invokes the prepare
        # watchers last started first): it sees the callbacks queued before gevent
        # runs them
        self.prepare = loop.prepare(ref=False)
        self.prepare.start(self.arm)

    @classmethod
    def join(cls, io: HubIoLoop) -> None:
        loop = io._loop
        laps = cls._by_loop.get(id(loop))
        if laps is None:
            laps = cls._by_loop[id(loop)] = cls(loop)
        laps.nodes.append(io)

    @classmethod
    def leave(cls, io: HubIoLoop) -> None:
        laps = cls._by_loop.get(id(io._loop))
        if laps is None or io not in laps.nodes:
            return
        laps.nodes.remove(io)
        if not laps.nodes:
            laps.prepare.stop()
            laps.prepare.close()
            del cls._by_loop[id(io._loop)]

    def arm(self) -> None:
        """Before libev polls: callbacks are queued, so the hub is busy."""
        if not self.due and _has_callbacks(self.loop):
            self.due = True
            self.loop.run_callback(self.lap)

    def lap(self) -> None:
        self.due = False
        self.laps += 1
        for io in list(self.nodes):
            io.look()
        if self.nodes and _has_callbacks(self.loop):
            self.due = True
            self.loop.run_callback(self.lap)
