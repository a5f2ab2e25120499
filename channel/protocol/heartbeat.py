"""Heartbeat sender and monitor of one connection (`rabbit_heartbeat`).

The sender wakes every H/2 seconds and writes a heartbeat frame if nothing was
sent since its last look (the first look always sends). The monitor wakes
every H seconds and tells the reader `heartbeat_timeout` after two looks in a
row saw no inbound byte; the reader pauses it while it is not reading the
socket (blocked), since no byte can be counted then. Both run under the
connection's helper supervisor and stop with the connection.
"""

from __future__ import annotations

from typing import Any

import actors
from channel.protocol.framing import HEARTBEAT_FRAME
from channel.protocol.wire import Wire

__all__ = ["monitor_main", "sender_main"]


def sender_main(wire: Wire, heartbeat_s: int, reader: Any) -> None:
    interval = heartbeat_s * 1000 // 2
    last: int | None = None
    while True:
        actors.sleep(interval)
        if last is not None and wire.bytes_sent != last:
            last = wire.bytes_sent
            continue
        try:
            wire.send(HEARTBEAT_FRAME)
        except OSError as exc:
            actors.send(reader, ("heartbeat_send_failed", repr(exc)))
            return
        last = wire.bytes_sent


def monitor_main(wire: Wire, heartbeat_s: int, reader: Any) -> None:
    interval = heartbeat_s * 1000
    last = wire.bytes_received
    misses = 0
    paused = False
    while True:
        msg = actors.receive(interval)
        if msg == "pause":
            paused = True
            continue
        if msg == "resume":
            paused, misses, last = False, 0, wire.bytes_received
            continue
        if msg is not actors.TIMEOUT or paused:
            continue
        if wire.bytes_received == last:
            misses += 1
            if misses >= 2:
                actors.send(reader, ("heartbeat_timeout",))
                return
        else:
            misses, last = 0, wire.bytes_received
