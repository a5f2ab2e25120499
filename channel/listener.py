"""The AMQP listener: accept TCP connections and start a reader process for each.

gevent's StreamServer accepts on the node's hub; each accepted socket gets a
reader process on the node (RabbitMQ: ranch acceptor -> connection_sup ->
reader). The listener keeps the live readers so operators and tests can look
at a connection's counters, force an alarm or close everything on stop.
"""

from __future__ import annotations

import logging
from typing import Any

from gevent.server import StreamServer

from channel.config import BrokerContext
from channel.reader import Reader, reader_main

__all__ = ["Listener"]

log = logging.getLogger("warren.listener")


class Listener:
    def __init__(self, ctx: BrokerContext, host: str = "127.0.0.1", port: int = 5672) -> None:
        self.ctx = ctx
        self.readers: dict[Any, Reader] = {}
        self._server = StreamServer((host, port), self._accept)

    def start(self) -> Listener:
        self._server.start()
        return self

    @property
    def port(self) -> int:
        return int(self._server.server_port)

    def _accept(self, sock: Any, address: Any) -> None:
        # StreamServer closes the socket when this handler returns, so the
        # reader gets its own duplicate of the descriptor.
        own = sock.dup()
        self.ctx.node.spawn(reader_main, (self.ctx, own, self.readers))

    def stop(self) -> None:
        """Stop accepting and end every connection."""
        self._server.stop()
        for reader in list(self.readers.values()):
            self.ctx.node.send(reader.me, ("force_close", "broker forced connection closure "
                                                           "with reason 'shutdown'"))
        node = self.ctx.node
        for pid in list(self.readers):
            proc = node._local(pid)
            if proc is not None:
                node._kill(proc, "shutdown")
        self.readers.clear()
