"""Stopping children: one at a time (the ``shutdown`` field) or all dynamic ones at once.

These run inside the supervisor process and block it, as in OTP: nothing else
the supervisor would do makes sense while a child is half stopped. The wait is
on a monitor's DOWN, not on the link's EXIT, so a child that unlinked itself
cannot hang the supervisor; afterwards the link is removed and a pending EXIT
consumed, because that EXIT carries the reason the child really died with.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import actors
from actors.pid import Pid, Ref
from supervision.childspec import Child

__all__ = ["is_clean_stop", "shutdown", "terminate_dynamic_children", "unlink_flush"]


def unlink_flush(pid: Pid, default: Any) -> Any:
    """Unlink `pid` and take its pending EXIT; that reason beats the DOWN's."""
    actors.unlink(pid)
    msg = actors.receive(0, match=_exit_from(pid))
    if msg is actors.TIMEOUT:
        return default
    return msg[2]


def _exit_from(pid: Pid) -> Callable[[Any], bool]:
    return lambda m: type(m) is tuple and len(m) == 3 and m[0] == "EXIT" and m[1] == pid


def _down_of(ref: Ref) -> Callable[[Any], bool]:
    return lambda m: type(m) is tuple and len(m) == 5 and m[0] == "DOWN" and m[1] == ref


def is_clean_stop(child: Child, reason: Any, brutal: bool) -> bool:
    """Whether a stop by the supervisor ended as asked (else: `shutdown_error`).

    ``killed`` is clean only for a `brutal_kill` child: for a numeric shutdown
    it means the timeout expired, which is worth a report.
    """
    if reason == ("killed" if brutal else "shutdown"):
        return True
    if child.is_permanent:
        return False
    return reason in ("normal", "shutdown") or (
        isinstance(reason, tuple) and len(reason) == 2 and reason[0] == "shutdown")


def shutdown(child: Child) -> tuple[bool, Any]:
    """Stop `child.pid` per its `shutdown` field; ``(clean, reason)``."""
    pid = child.pid
    assert isinstance(pid, Pid)
    ref = actors.monitor(pid)
    brutal = child.shutdown == "brutal_kill"
    actors.exit(pid, "kill" if brutal else "shutdown")
    if brutal or child.shutdown == "infinity":
        down = actors.receive(None, match=_down_of(ref))
    else:
        assert isinstance(child.shutdown, int)  # a timeout in ms, the only other choice
        down = actors.receive(child.shutdown, match=_down_of(ref))
        if down is actors.TIMEOUT:
            actors.exit(pid, "kill")
            down = actors.receive(None, match=_down_of(ref))
    reason = unlink_flush(pid, down[4])
    return is_clean_stop(child, reason, brutal), reason


def terminate_dynamic_children(template: Child, pids: list[Pid]) -> list[tuple[Pid, Any, bool]]:
    """Signal every pid at once and wait for all DOWNs under one timer.

    When the `shutdown` time passes, every child still alive is killed. The
    result lists ``(pid, reason, clean)`` in the order the children ended,
    which is undefined, as in OTP.
    """
    brutal = template.shutdown == "brutal_kill"
    signal = "kill" if brutal else "shutdown"
    waiting: dict[Ref, Pid] = {}
    for pid in pids:
        ref = actors.monitor(pid)
        actors.exit(pid, signal)
        waiting[ref] = pid
    tref = None
    if type(template.shutdown) is int:
        tref = actors.start_timer(template.shutdown, actors.self(), "kill")
    outcomes: list[tuple[Pid, Any, bool]] = []

    def wanted(m: Any) -> bool:
        if type(m) is not tuple:
            return False
        if len(m) == 5 and m[0] == "DOWN":
            return m[1] in waiting
        return tref is not None and len(m) == 3 and m[0] == "timeout" and m[1] == tref

    while waiting:
        msg = actors.receive(None, match=wanted)
        if msg[0] == "timeout":
            for pid in waiting.values():
                actors.exit(pid, "kill")
            tref = None
            continue
        pid = waiting.pop(msg[1])
        reason = unlink_flush(pid, msg[4])
        outcomes.append((pid, reason, is_clean_stop(template, reason, brutal)))
    if tref is not None:
        actors.cancel_timer(tref)
        fired = tref
        actors.receive(0, match=lambda m: type(m) is tuple and len(m) == 3
                       and m[0] == "timeout" and m[1] == fired)
    return outcomes
