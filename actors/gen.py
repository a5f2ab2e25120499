"""What every OTP behaviour shares: start with ack, call / reply, cast, stop.

As in `gen.erl` and `proc_lib`, a call monitors its target and waits for
exactly one of the reply, a DOWN or the timeout; the reply and the DOWN travel
out of band (a slot keyed by the monitor's ref), so a late reply after a
timeout finds no slot and vanishes. `gen_server` and the later `gen_statem`
and batch-server behaviours are built on these functions.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from actors.pid import CallExit, NoSuchName, Pid, ProcessExit, Ref, exception_reason
from actors.process import Process, current

__all__ = [
    "call",
    "cast",
    "init_ack",
    "resolve_module",
    "send_request",
    "start",
    "stop",
    "wait_response",
]


def resolve_module(module: Any) -> Any:
    """A behaviour implementation from a class, an instance or ``"pkg.mod:Name"``."""
    if isinstance(module, str):
        mod_name, _, attr = module.partition(":")
        obj: Any = importlib.import_module(mod_name)
        for part in attr.split(".") if attr else []:
            obj = getattr(obj, part)
        module = obj
    if isinstance(module, type):
        return module()
    return module


def _resolve(proc: Process, server: Any) -> Any:
    """The call target, or None when a local name is not registered."""
    t = type(server)
    if t is Pid:
        return server
    if t is str:
        return proc.node.whereis(server)
    if t is tuple and len(server) == 2:
        if server[1] == proc.node.name:
            return proc.node.whereis(server[0])
        return server
    raise TypeError(f"not a server: {server!r}")


def _target_node(target: Any) -> str:
    return target.node if type(target) is Pid else target[1]


def call(server: Any, request: Any, timeout: int | None = 5000, label: str = "gen_server") -> Any:
    """Synchronous request; raises `CallExit` on noproc, timeout, nodedown or server exit."""
    proc = current()
    proc.check_alive()
    info = (label, "call", [server, request, timeout])
    target = _resolve(proc, server)
    if target is None:
        raise CallExit(("noproc", info))
    if target == proc.pid:
        raise CallExit(("calling_self", info))
    node = proc.node
    mref = node.monitor(proc, target, slot=True)
    if mref in proc.slots and proc.slots[mref].ready():
        result = proc.wait_slot(mref, 0)
    else:
        node.send(target, ("$gen_call", (proc.pid, mref), request))
        result = proc.wait_slot(mref, timeout)
    node.demonitor(proc, mref)
    proc.check_alive()
    if result is None:
        raise CallExit(("timeout", info))
    kind, value = result
    if kind == "reply":
        return value
    if value == "noconnection":
        raise CallExit((("nodedown", _target_node(target)), info))
    raise CallExit((value, info))


def cast(server: Any, msg: Any) -> str:
    """Fire and forget; always ``"ok"``, even for a dead pid or a missing name."""
    proc = current()
    try:
        proc.node.send(server, ("$gen_cast", msg))
    except NoSuchName:
        pass
    return "ok"


def send_request(server: Any, request: Any) -> Ref:
    """Start a call without waiting (OTP's `send_request`); see `wait_response`."""
    proc = current()
    target = _resolve(proc, server)
    node = proc.node
    if target is None:
        ref = node.make_ref()
        from gevent.event import AsyncResult

        slot = AsyncResult()
        slot.set(("DOWN", "noproc"))
        proc.slots[ref] = slot
        return ref
    mref = node.monitor(proc, target, slot=True)
    node.send(target, ("$gen_call", (proc.pid, mref), request))
    return mref


def wait_response(req_id: Ref, timeout: int | None = None) -> Any:
    """``("reply", R)``, ``("error", (reason, server))`` or ``"timeout"``.

    On ``"timeout"`` the request stays pending and can be waited for again.
    """
    proc = current()
    slot = proc.slots.get(req_id)
    if slot is None:
        return ("error", ("noproc", None))
    result = slot.get(timeout=None if timeout is None else timeout / 1000, block=True) \
        if timeout != 0 else (slot.get(block=False) if slot.ready() else None)
    proc.check_alive()
    if result is None:
        return "timeout"
    proc.slots.pop(req_id, None)
    proc.node.demonitor(proc, req_id)
    kind, value = result
    if kind == "reply":
        return ("reply", value)
    return ("error", (value, None))


def stop(server: Any, reason: Any = "normal", timeout: int | None = None) -> str:
    """Stop a server synchronously (`proc_lib:stop`): runs its `terminate`."""
    proc = current()
    target = _resolve(proc, server)
    if target is None:
        raise CallExit("noproc")
    node = proc.node
    mref = node.monitor(proc, target, slot=True)
    if not proc.slots[mref].ready():
        node.send(target, ("$system_stop", reason))
    result = proc.wait_slot(mref, timeout)
    proc.check_alive()
    if result is None:
        node.demonitor(proc, mref)
        raise CallExit("timeout")
    _kind, down_reason = result
    if down_reason == reason:
        return "ok"
    raise CallExit(down_reason)


# ---------------------------------------------------------------------- start


def start(
    init_fun: Callable[[Process, Pid, Ref], None],
    *,
    name: str | None = None,
    link: bool = True,
    timeout: int | None = None,
) -> Any:
    """`proc_lib:start[_link]`: spawn, register, run init, wait for its ack.

    `init_fun(proc, parent, ack_ref)` runs in the new process and must call
    `init_ack(parent, ack_ref, result)` before entering its loop. The name is
    registered before init runs and is already released when a failed init is
    reported, so an immediate retry cannot see ``already_started``.
    """
    caller = current()
    node = caller.node
    if name is not None:
        existing = node.whereis(name)
        if existing is not None:
            return ("error", ("already_started", existing))
    holder: dict[str, Any] = {}

    def body() -> None:
        me = current()
        init_fun(me, holder["parent"], holder["ack"])

    pid = node.spawn(body, (), link=caller if link else None)
    holder["parent"] = caller.pid
    ack = node.monitor(caller, pid, slot=True)
    holder["ack"] = ack
    if name is not None:
        node.register(name, pid)
    result = caller.wait_slot(ack, timeout)
    node.demonitor(caller, ack)
    if result is None:
        node.exit_signal(caller.pid, pid, "kill")
        if link:
            node.unlink(caller, pid)
            caller.actor_inbox.remove_first(_exit_from(pid))
        caller.check_alive()
        return ("error", "timeout")
    caller.check_alive()
    kind, value = result
    if kind == "DOWN":
        value = ("error", value)
    failed = not (isinstance(value, tuple) and value[0] == "ok")
    if failed and link and caller.trap_exit:
        # the child is gone; like proc_lib, do not leave its EXIT behind
        caller.actor_inbox.remove_first(_exit_from(pid))
    return value


def _exit_from(pid: Pid) -> Callable[[Any], bool]:
    return lambda m: type(m) is tuple and len(m) == 3 and m[0] == "EXIT" and m[1] == pid


def init_ack(parent: Pid, ack: Ref, result: Any) -> None:
    """Tell the starter how init went (`proc_lib:init_ack`)."""
    current().node.reply((parent, ack), result)


def crash_reason(exc: BaseException) -> Any:
    """The exit reason for an exception escaping a behaviour callback."""
    if isinstance(exc, ProcessExit):
        return exc.reason
    return exception_reason(exc)


def run_init(mod: Any, args: Any, proc: Process, parent: Pid, ack: Ref) -> Any:
    """A behaviour's `init(args)`, run in the new process; what it returned.

    When `init` raises, the starter is told ``("error", reason)`` first and the
    process then exits with that reason (`proc_lib:init_fail`); a process already
    killed while in `init` just exits."""
    try:
        return mod.init(args)
    except ProcessExit as exc:
        if proc.dead:
            raise
        init_ack(parent, ack, ("error", exc.reason))
        raise
    except Exception as exc:
        reason = crash_reason(exc)
        init_ack(parent, ack, ("error", reason))
        raise ProcessExit(reason) from None
