"""The hub → I/O thread wake-up never gets lost.

`IoLoop.submit` (hub thread) queues a command and writes one wake byte only
when none is in flight; the I/O thread drains the wake bytes and then runs
the queued commands. The interleaving that matters is a `submit` landing
while the I/O thread is draining: whatever happens, once the I/O thread has
finished its turn, the next `submit` must find the I/O thread wakeable.
These tests force that interleaving by running the hub's `submit` from
inside the drain, in one thread, so they are deterministic.
"""

from __future__ import annotations

from typing import Any

import zmq

from transports.zmq_io import IoLoop
from transports.zmq_node import free_port

HARMLESS = ("abort", "nobody@127.0.0.1:1")  # a command with no effect on an idle loop


class _SubmitDuringDrain:
    """Stands in for the I/O end of the wake pipe: the first `recv` lets
    the "hub" submit a command, as a thread switch there would."""

    def __init__(self, real: zmq.Socket, io: IoLoop, cmd: tuple[Any, ...]) -> None:
        self.real = real
        self.io = io
        self.cmd: tuple[Any, ...] | None = cmd

    def recv(self, flags: int = 0) -> bytes:
        data = self.real.recv(flags)
        if self.cmd is not None:
            cmd, self.cmd = self.cmd, None
            self.io.submit(cmd)
        return data


def _wake_byte_waiting(real: zmq.Socket) -> bool:
    return bool(real.poll(0, zmq.POLLIN))


def _make_loop() -> IoLoop:
    return IoLoop("w@127.0.0.1:1", 1, b"cookie", f"tcp://127.0.0.1:{free_port()}", 1.0,
                  lambda: None)


def test_a_submit_during_the_drain_does_not_leave_the_next_one_without_a_wake_up() -> None:
    io = _make_loop()
    real = io._pair_io
    try:
        io.submit(HARMLESS)
        io._pair_io = _SubmitDuringDrain(real, io, HARMLESS)  # type: ignore[assignment]
        io._drain_pair()
        io._run_commands()
        io._pair_io = real
        assert not io._cmds, "both commands ran in this turn"

        io.submit(HARMLESS)
        assert _wake_byte_waiting(real), "a queued command with no wake byte in flight"
    finally:
        io._pair_io = real
        io._shutdown()


def test_every_submit_after_a_full_turn_wakes_the_io_thread() -> None:
    io = _make_loop()
    real = io._pair_io
    try:
        for _ in range(3):
            io.submit(HARMLESS)
            io.submit(HARMLESS)  # the second one rides on the first one's byte
            assert _wake_byte_waiting(real)
            io._drain_pair()
            assert not _wake_byte_waiting(real)
            io._run_commands()
            assert not io._cmds
    finally:
        io._shutdown()
