"""The socket of one connection, shared by its reader, writers and heartbeat sender.

Every command (all frames of it) is written under one lock so commands from
different channels never interleave on the wire (gevent's sendall can yield
between partial writes). Byte counters feed the heartbeat sender and monitor,
which only ask "did anything move since my last look".
"""

from __future__ import annotations

from typing import Any

from gevent.lock import Semaphore

__all__ = ["Wire"]


class Wire:
    def __init__(self, sock: Any, frame_max: int) -> None:
        self.sock = sock
        self.frame_max = frame_max
        self.lock = Semaphore()
        self.bytes_sent = 0
        self.bytes_received = 0
        self.closed = False

    def send(self, data: bytes) -> None:
        """Write atomically; raises OSError when the peer is gone."""
        if self.closed:
            raise OSError("socket closed")
        with self.lock:
            self.sock.sendall(data)
            self.bytes_sent += len(data)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            try:
                self.sock.close()
            except OSError:
                pass

    def peer_address(self) -> str:
        try:
            return str(self.sock.getpeername()[0])
        except OSError:
            return ""
