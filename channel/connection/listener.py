"""The AMQP listener: accept TCP connections, one supervised connection tree each.

gevent's StreamServer accepts on the node's hub. Every accepted socket becomes
a `connection_sup` (reader, helper supervisor, channels: see
`channel.connection.connection_sup`) under the listener's own `connections_sup`, as
ranch's acceptors start `rabbit_connection_sup` under its `conns_sup`. The
listener keeps the live readers so operators and tests can look at a
connection's counters; stopping it stops every connection tree, and each
reader closes its connection with `320 CONNECTION_FORCED` on the way.

Accepted sockets get TCP_NODELAY, as RabbitMQ's default `tcp_listen_options`
(`{nodelay, true}`) give them: the writer flushes whole batches of frames, so
Nagle's algorithm would only hold a small frame (a lone `basic.ack`, a delivery
after an idle spell) back until the client acknowledges the previous segment.
"""

from __future__ import annotations

import logging
import socket
from typing import Any

import gevent
from gevent.event import AsyncResult
from gevent.server import StreamServer

import actors
from channel.connection import connection_sup
from channel.connection.config import BrokerContext
from channel.connection.reader import Reader, reader_main
from supervision import supervisor

__all__ = ["Listener"]

log = logging.getLogger("warren.listener")

STOP_TIMEOUT_S = 30.0


class Listener:
    def __init__(self, ctx: BrokerContext, host: str = "127.0.0.1", port: int = 5672) -> None:
        self.ctx = ctx
        self.readers: dict[Any, Reader] = ctx.readers  # the node's, counted by the limits
        self.connections_sup: Any = None
        self._owner: Any = None
        self._stopped: AsyncResult = AsyncResult()
        self._server = StreamServer((host, port), self._accept)

    def start(self) -> Listener:
        """Bind the port, start `connections_sup` (owned by a process of the node), then
        accept. A port that cannot be bound raises `OSError` before anything started."""
        self._server.init_socket()
        started: AsyncResult = AsyncResult()
        self._owner = self.ctx.node.spawn(self._owner_main, (started,))
        self.connections_sup = started.get(timeout=STOP_TIMEOUT_S)
        self._server.start()
        return self

    def _owner_main(self, started: AsyncResult) -> None:
        """Holds the link to `connections_sup`; told to stop, stops it and waits."""
        actors.process_flag("trap_exit", True)
        result = connection_sup.start_connections_sup(reader_main, self.ctx, self.readers)
        if result[0] != "ok":
            started.set_exception(RuntimeError(f"connections_sup: {result!r}"))
            return
        sup = result[1]
        started.set(sup)
        ref = actors.monitor(sup)
        try:
            while True:
                msg = actors.receive()
                if msg == "stop":
                    actors.exit(sup, "shutdown")
                elif isinstance(msg, tuple) and msg[:2] == ("DOWN", ref):
                    return
        finally:
            self._stopped.set(True)

    @property
    def port(self) -> int:
        return int(self._server.server_port)

    def _accept(self, sock: Any, address: Any) -> None:
        # StreamServer closes the socket when this handler returns, so the
        # connection gets its own duplicate of the descriptor.
        own = sock.dup()
        try:
            own.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:  # the client is already gone: the reader will see it closed
            pass
        self.ctx.node.spawn(_acceptor, (self.connections_sup, own))

    def connection_sups(self) -> list[Any]:
        """Pids of the live `connection_sup`s (for introspection)."""
        node = self.ctx.node
        return [r.sup for r in self.readers.values()
                if r.sup is not None and node._local(r.sup) is not None]

    def stop(self) -> None:
        """Stop accepting and end every connection (each client gets a 320 close)."""
        self._server.stop()
        if self._owner is None:
            return
        self.ctx.node.send(self._owner, "stop")
        with gevent.Timeout(STOP_TIMEOUT_S, False):
            self._stopped.get()
        self._owner = None


def _acceptor(conns_sup: Any, sock: Any) -> None:
    """A short-lived acceptor process: start the connection's tree, hand over the socket."""
    result = supervisor.start_child(conns_sup, [sock])
    if result[0] != "ok":
        log.error("cannot start a connection: %r", result)
        sock.close()
