"""The writer process of one channel (`rabbit_writer`).

All frames of a channel go through its writer in FIFO order, so the client sees
replies, deliveries, returns and confirms in the order the channel produced
them. Output is batched: frames are flushed once 1414 bytes are pending or the
mailbox is empty; `flush` requests are answered after the bytes are on the
socket. A failed write is reported to the reader, which drops the connection.
The writer is a child of its channel's supervisor: when that stops it (the
channel has ended), whatever is still pending is written before it exits.
"""

from __future__ import annotations

from typing import Any

import actors
from channel.protocol.framing import Content, MethodFrame, Out, encode_command
from channel.protocol.wire import Wire

__all__ = ["FLUSH_THRESHOLD", "flush", "send_command", "writer_main"]

FLUSH_THRESHOLD = 1414


def send_command(writer: Any, out: Out | MethodFrame, content: Content | None = None) -> None:
    actors.send(writer, ("send_command", out, content))


def flush(writer: Any, timeout_ms: int = 5000) -> bool:
    """Wait until everything sent so far is written (send_command_sync / flush)."""
    ref = actors.make_ref()
    actors.send(writer, ("flush", actors.self(), ref))
    reply = actors.receive(timeout_ms, match=lambda m: m == ("flushed", ref))
    return reply is not actors.TIMEOUT


def writer_main(wire: Wire, channel: int, reader: Any) -> None:
    pending: list[bytes] = []
    size = 0
    waiting: list[tuple[Any, Any]] = []
    actors.process_flag("trap_exit", True)

    def write_out() -> None:
        nonlocal pending, size, waiting
        _write(wire, pending, reader)
        for pid, ref in waiting:
            actors.send(pid, ("flushed", ref))
        pending, size, waiting = [], 0, []

    while True:
        msg = actors.receive(0 if (pending or waiting) else None)
        if msg is actors.TIMEOUT:
            write_out()
            continue
        kind = msg[0]
        if kind == "send_command":
            data = encode_command(channel, msg[1], msg[2], wire.frame_max)
            pending.append(data)
            size += len(data)
        elif kind == "flush":
            waiting.append((msg[1], msg[2]))
        elif kind == "stop":
            write_out()
            return
        elif kind == "EXIT":  # only the channel supervisor is linked to us
            write_out()
            actors.exit(msg[2])
        if size >= FLUSH_THRESHOLD:
            write_out()


def _write(wire: Wire, pending: list[bytes], reader: Any) -> None:
    if not pending:
        return
    try:
        wire.send(b"".join(pending))
    except OSError as exc:
        actors.send(reader, ("writer_send_failed", repr(exc)))
        actors.exit(("writer", "send_failed", repr(exc)))
