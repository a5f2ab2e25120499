"""The log of a starting node, held back until it is up.

A start that fails on a known cause (a port in use, an unusable data directory)
is told in one line; the supervisor and crash reports that led to it would only
bury that line under a page of repeats. So until the node is ready its log
records wait here: once ready they are written out in order and the log flows as
usual; on a known failure they are dropped; on an unexpected one they are
written before the line. `warren -v node start` holds nothing.
"""

from __future__ import annotations

import logging
from logging.handlers import MemoryHandler

__all__ = ["HeldLog"]

#: records held at most; past it they are written out rather than lost
CAPACITY = 10_000


class HeldLog:
    """Swaps the root logger's handlers for one buffer until `release`."""

    def __init__(self) -> None:
        self._root = logging.getLogger()
        self._handlers: list[logging.Handler] = []
        self._buffer: MemoryHandler | None = None

    def hold(self) -> HeldLog:
        self._handlers = list(self._root.handlers)
        target = self._handlers[0] if self._handlers else None
        # flushLevel above CRITICAL: only `release` (or a full buffer) writes it out
        self._buffer = MemoryHandler(CAPACITY, flushLevel=logging.CRITICAL + 1,
                                     target=target, flushOnClose=False)
        for handler in self._handlers:
            self._root.removeHandler(handler)
        self._root.addHandler(self._buffer)
        return self

    def release(self, write: bool) -> None:
        """Put the handlers back; the held records are written first when `write`."""
        if self._buffer is None:
            return
        buffer, self._buffer = self._buffer, None
        self._root.removeHandler(buffer)
        held = list(buffer.buffer)
        buffer.buffer.clear()
        buffer.close()
        for handler in self._handlers:
            self._root.addHandler(handler)
        if write:
            for record in held:
                for handler in self._handlers:
                    if record.levelno >= handler.level:
                        handler.handle(record)
