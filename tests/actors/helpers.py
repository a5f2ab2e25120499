"""Small process bodies shared by the runtime tests."""

from __future__ import annotations

from typing import Any

import actors


def echo_loop() -> None:
    """Reply to ``(from, msg)`` with ``("echo", msg)`` until told ``"stop"``."""
    while True:
        msg = actors.receive()
        if msg == "stop":
            return
        sender, body = msg
        actors.send(sender, ("echo", body))


def wait_forever() -> None:
    actors.receive()
    actors.receive()


def trapping_relay(parent: actors.Pid) -> None:
    """Trap exits and forward every message (EXITs included) to `parent`."""
    actors.process_flag("trap_exit", True)
    actors.send(parent, ("ready", actors.self()))
    while True:
        actors.send(parent, ("relay", actors.self(), actors.receive()))


def collect(n: int, timeout: int = 2000) -> list[Any]:
    out = []
    for _ in range(n):
        msg = actors.receive(timeout)
        assert msg is not actors.TIMEOUT, f"timed out after {out!r}"
        out.append(msg)
    return out


def nothing_more(timeout: int = 100) -> bool:
    return actors.receive(timeout) is actors.TIMEOUT
