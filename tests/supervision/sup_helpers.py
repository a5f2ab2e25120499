"""Mailbox helpers for the supervisor tests (selective receive with a deadline)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import actors


def expect(match: Callable[[Any], bool], timeout: int = 2000) -> Any:
    """The first message `match` accepts; fails the test after `timeout` ms."""
    msg = actors.receive(timeout, match=match)
    assert msg is not actors.TIMEOUT, "expected message did not arrive"
    return msg


def nothing(match: Callable[[Any], bool], timeout: int = 50) -> None:
    """Assert no message `match` accepts arrives within `timeout` ms."""
    msg = actors.receive(timeout, match=match)
    assert msg is actors.TIMEOUT, f"unexpected message {msg!r}"


def tagged(tag: str) -> Callable[[Any], bool]:
    return lambda m: type(m) is tuple and len(m) >= 1 and m[0] == tag


def events(tag: str, count: int, timeout: int = 2000) -> list[Any]:
    """`count` messages tagged `tag`, in arrival order, as ``id`` or ``(id, reason)``."""
    out = []
    for _ in range(count):
        msg = expect(tagged(tag), timeout)
        out.append(msg[1])
    return out


def down_of(pid: actors.Pid) -> Callable[[Any], bool]:
    return lambda m: type(m) is tuple and len(m) == 5 and m[0] == "DOWN" and m[3] == pid


def exit_of(pid: actors.Pid) -> Callable[[Any], bool]:
    return lambda m: type(m) is tuple and len(m) == 3 and m[0] == "EXIT" and m[1] == pid


def wait_down(pid: actors.Pid, timeout: int = 2000) -> Any:
    """Monitor `pid` and return its exit reason."""
    actors.monitor(pid)
    return expect(down_of(pid), timeout)[4]


def sup_reports(records: list[Any]) -> list[tuple[str, Any]]:
    """``(errorContext, reason)`` of each supervisor error report among log `records`."""
    return [(r.error_context, r.reason) for r in records
            if r.name == "warren.supervisor" and hasattr(r, "error_context")]
