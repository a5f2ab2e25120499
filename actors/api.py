"""Erlang's process BIFs as functions of the calling process.

Each function acts on behalf of the process running in the calling greenlet
(`actors.process.current`), on that process's node. Times are milliseconds, as
in Erlang (`receive ... after T`, `send_after`, `call` timeouts).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gevent
from pykka._envelope import Envelope

from actors.pid import Pid, ProcessExit, Ref
from actors.process import current
from actors.runtime_gevent import EMPTY

__all__ = [
    "TIMEOUT",
    "cancel_timer",
    "demonitor",
    "disconnect_node",
    "exit",
    "get_node",
    "is_process_alive",
    "link",
    "make_ref",
    "monitor",
    "monitor_node",
    "monitor_nodes",
    "node",
    "nodes",
    "process_flag",
    "read_timer",
    "receive",
    "register",
    "registered",
    "self",
    "send",
    "send_after",
    "sleep",
    "spawn",
    "spawn_link",
    "spawn_monitor",
    "start_timer",
    "unlink",
    "unregister",
    "whereis",
]

TIMEOUT: Any = EMPTY
"""What `receive` returns when its timeout passes with no (matching) message."""

_MISSING: Any = object()


def self() -> Pid:
    return current().pid


def node() -> str:
    return current().node.name


def get_node() -> Any:
    """The `Node` object of the calling process."""
    return current().node


def make_ref() -> Ref:
    return current().node.make_ref()


def send(dest: Any, msg: Any) -> None:
    current().node.send(dest, msg)


def receive(timeout: int | None = None, match: Callable[[Any], bool] | None = None) -> Any:
    """Take the next message (or the first one `match` accepts).

    Returns `TIMEOUT` if `timeout` ms pass first; ``timeout=0`` polls.
    """
    proc = current()
    proc.check_alive()
    seconds = None if timeout is None else timeout / 1000
    inbox = proc.actor_inbox
    msg = inbox.get(seconds) if match is None else inbox.take_first(match, seconds)
    proc.check_alive()
    if type(msg) is Envelope:
        return msg.message
    return msg


def sleep(ms: int) -> None:
    """Suspend the calling process; exit signals still end it at once."""
    proc = current()
    proc.check_alive()
    gevent.sleep(ms / 1000)
    proc.check_alive()


def _spawn(fn: Callable[..., Any], args: tuple[Any, ...], on: str | None, link: bool,
           monitor: bool) -> tuple[Pid, Ref | None]:
    proc = current()
    node_ = proc.node
    if on is not None and on != node_.name:
        return node_.spawn_remote(proc, on, fn, args, link=link, monitor=monitor)
    pid = node_.spawn(fn, args, link=proc if link else None, monitor=proc if monitor else None)
    return pid, (node_.last_spawn_ref if monitor else None)


def spawn(fn: Callable[..., Any], *args: Any, node: str | None = None) -> Pid:
    """Start `fn(*args)` as a new process, here or on `node`."""
    return _spawn(fn, args, node, False, False)[0]


def spawn_link(fn: Callable[..., Any], *args: Any, node: str | None = None) -> Pid:
    """Spawn and link atomically: the child cannot die before the link exists."""
    return _spawn(fn, args, node, True, False)[0]


def spawn_monitor(fn: Callable[..., Any], *args: Any, node: str | None = None) -> tuple[Pid, Ref]:
    """Spawn and monitor atomically; returns ``(pid, ref)``."""
    pid, ref = _spawn(fn, args, node, False, True)
    assert ref is not None
    return pid, ref


def link(pid: Pid) -> None:
    proc = current()
    proc.node.link(proc, pid)
    proc.check_alive()


def unlink(pid: Pid) -> None:
    proc = current()
    proc.node.unlink(proc, pid)


def exit(pid_or_reason: Any, reason: Any = _MISSING) -> None:
    """`exit(Reason)` ends the caller; `exit(Pid, Reason)` sends an exit signal."""
    proc = current()
    if reason is _MISSING:
        raise ProcessExit(pid_or_reason)
    proc.node.exit_signal(proc.pid, pid_or_reason, reason)
    proc.check_alive()


def monitor(target: Any) -> Ref:
    """Monitor a pid, a local name or a ``(name, node)`` pair."""
    proc = current()
    return proc.node.monitor(proc, target)


def demonitor(ref: Ref, flush: bool = False, info: bool = False) -> bool:
    proc = current()
    return proc.node.demonitor(proc, ref, flush=flush, info=info)


def process_flag(flag: str, value: Any) -> Any:
    """Set a process flag; returns the previous value (only ``trap_exit``)."""
    proc = current()
    if flag != "trap_exit":
        raise ValueError(f"badarg: unsupported process flag {flag!r}")
    previous, proc.trap_exit = proc.trap_exit, bool(value)
    return previous


def register(name: str, pid: Pid | None = None) -> None:
    proc = current()
    proc.node.register(name, proc.pid if pid is None else pid)


def unregister(name: str) -> None:
    current().node.unregister(name)


def whereis(name: str) -> Pid | None:
    return current().node.whereis(name)


def registered() -> list[str]:
    return current().node.registered()


def is_process_alive(pid: Pid) -> bool:
    return current().node.is_process_alive(pid)


def send_after(ms: int, dest: Any, msg: Any) -> Ref:
    return current().node.send_after(ms, dest, msg)


def start_timer(ms: int, dest: Any, msg: Any) -> Ref:
    """Like `send_after`, but delivers ``("timeout", tref, msg)``."""
    return current().node.send_after(ms, dest, msg, wrap=True)


def cancel_timer(tref: Ref) -> int | bool:
    return current().node.cancel_timer(tref)


def read_timer(tref: Ref) -> int | bool:
    return current().node.read_timer(tref)


def monitor_node(node_name: str, flag: bool) -> None:
    proc = current()
    proc.node.monitor_node(proc, node_name, flag)


def monitor_nodes(flag: bool, info: bool = False) -> None:
    """`net_kernel:monitor_nodes`: nodeup / nodedown for every session."""
    proc = current()
    proc.node.monitor_nodes(proc, flag, info)


def nodes() -> list[str]:
    return current().node.nodes()


def disconnect_node(node_name: str) -> bool:
    return current().node.disconnect_node(node_name)
