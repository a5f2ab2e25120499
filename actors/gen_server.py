"""The gen_server behaviour: callbacks return Erlang's tuples, state is explicit.

A server is a subclass of `GenServer` whose methods are the callback module;
the state travels through return values exactly as in Erlang, so a trace of
calls and returns reads like the Erlang original. The loop implements OTP's
``gen_server`` loop: idle timeouts, ``continue``, ``hibernate`` (accepted, no effect),
`terminate` on stop tuples, crashes, bad returns and a trapped parent EXIT,
and the reply of ``("stop", R, Reply, S)`` sent after `terminate`.
"""

from __future__ import annotations

import logging
from typing import Any

from actors import gen
from actors.pid import Pid, ProcessExit, Ref, is_clean_reason
from actors.process import Process, current
from actors.runtime_gevent import EMPTY

__all__ = [
    "GenServer",
    "call",
    "cast",
    "reply",
    "send_request",
    "start",
    "start_link",
    "stop",
    "wait_response",
]

log = logging.getLogger("warren.gen_server")

call = gen.call
cast = gen.cast
send_request = gen.send_request
wait_response = gen.wait_response
stop = gen.stop


def reply(from_: tuple[Pid, Ref], value: Any) -> None:
    """Answer a call later (the callback returned ``noreply``); silent if the caller is gone."""
    current().node.reply(from_, value)


class GenServer:
    """Callback module. Override what the server needs; defaults follow OTP."""

    def init(self, args: Any) -> Any:
        return ("ok", args)

    def handle_call(self, request: Any, from_: tuple[Pid, Ref], state: Any) -> Any:
        raise RuntimeError(f"{type(self).__name__}: unexpected call {request!r}")

    def handle_cast(self, msg: Any, state: Any) -> Any:
        raise RuntimeError(f"{type(self).__name__}: unexpected cast {msg!r}")

    def handle_info(self, msg: Any, state: Any) -> Any:
        log.warning("%s: undefined handle_info for %r", type(self).__name__, msg)
        return ("noreply", state)

    def handle_continue(self, cont: Any, state: Any) -> Any:
        raise RuntimeError(f"{type(self).__name__}: unexpected continue {cont!r}")

    def terminate(self, reason: Any, state: Any) -> None:
        return None


class _Stop(Exception):
    """Internal: leave the loop with `reason` after terminate has run."""

    def __init__(self, reason: Any) -> None:
        super().__init__(reason)
        self.reason = reason


def start_link(module: Any, args: Any = None, *, name: str | None = None,
               timeout: int | None = None) -> Any:
    """Start a server linked to the caller; blocks until its `init` returns."""
    return _start(module, args, name, timeout, link=True)


def start(module: Any, args: Any = None, *, name: str | None = None,
          timeout: int | None = None) -> Any:
    """Like `start_link`, without the link."""
    return _start(module, args, name, timeout, link=False)


def _start(module: Any, args: Any, name: str | None, timeout: int | None, link: bool) -> Any:
    mod = gen.resolve_module(module)

    def init_it(proc: Process, parent: Pid, ack: Ref) -> None:
        result = gen.run_init(mod, args, proc, parent, ack)
        match result:
            case ("ok", state):
                extra = None
            case ("ok", state, extra):
                pass
            case ("stop", reason):
                gen.init_ack(parent, ack, ("error", reason))
                raise ProcessExit(reason)
            case "ignore":
                gen.init_ack(parent, ack, "ignore")
                raise ProcessExit("normal")
            case _:
                reason = ("bad_return_value", result)
                gen.init_ack(parent, ack, ("error", reason))
                raise ProcessExit(reason)
        gen.init_ack(parent, ack, ("ok", proc.pid))
        _loop(proc, mod, state, parent if link else proc.pid, extra)

    return gen.start(init_it, name=name, link=link, timeout=timeout)


def _loop(proc: Process, mod: GenServer, state: Any, parent: Pid, extra: Any) -> None:
    inbox = proc.actor_inbox
    while True:
        timeout = None
        if extra is not None:
            if type(extra) is int:
                timeout = extra / 1000
            elif type(extra) is tuple and extra[0] == "continue":
                state, extra = _dispatch(proc, mod, state, parent, "continue", extra[1])
                continue
        msg = inbox.get(timeout)
        proc.check_alive()  # a kill clears the mailbox and may wake us with nothing
        if msg is EMPTY:
            state, extra = _dispatch(proc, mod, state, parent, "info", "timeout")
            continue
        if type(msg) is tuple and msg:
            tag = msg[0]
            if tag == "$gen_call" and len(msg) == 3:
                state, extra = _dispatch(proc, mod, state, parent, "call", msg)
                continue
            if tag == "$gen_cast" and len(msg) == 2:
                state, extra = _dispatch(proc, mod, state, parent, "cast", msg[1])
                continue
            if tag == "EXIT" and len(msg) == 3 and msg[1] == parent and proc.trap_exit:
                _terminate(proc, mod, msg[2], state)
                raise ProcessExit(msg[2])
            if tag == "$system_stop" and len(msg) == 2:
                _terminate(proc, mod, msg[1], state)
                raise ProcessExit(msg[1])
        state, extra = _dispatch(proc, mod, state, parent, "info", msg)


def _dispatch(proc: Process, mod: GenServer, state: Any, parent: Pid, kind: str,
              msg: Any) -> tuple[Any, Any]:
    from_ = None
    try:
        if kind == "call":
            from_ = msg[1]
            result = mod.handle_call(msg[2], from_, state)
        elif kind == "cast":
            result = mod.handle_cast(msg, state)
        elif kind == "info":
            result = mod.handle_info(msg, state)
        else:
            result = mod.handle_continue(msg, state)
    except ProcessExit as exc:
        if proc.dead:
            raise
        _terminate(proc, mod, exc.reason, state)
        raise ProcessExit(exc.reason)
    except Exception as exc:
        reason = gen.crash_reason(exc)
        _terminate(proc, mod, reason, state)
        raise ProcessExit(reason)
    node = proc.node
    match result:
        case ("reply", value, new_state) if from_ is not None:
            node.reply(from_, value)
            return new_state, None
        case ("reply", value, new_state, extra) if from_ is not None:
            node.reply(from_, value)
            return new_state, _check_extra(proc, mod, new_state, extra)
        case ("noreply", new_state):
            return new_state, None
        case ("noreply", new_state, extra):
            return new_state, _check_extra(proc, mod, new_state, extra)
        case ("stop", reason, value, new_state) if from_ is not None:
            try:
                _terminate(proc, mod, reason, new_state)
            finally:
                node.reply(from_, value)
            raise ProcessExit(reason)
        case ("stop", reason, new_state):
            _terminate(proc, mod, reason, new_state)
            raise ProcessExit(reason)
        case _:
            reason = ("bad_return_value", result)
            _terminate(proc, mod, reason, state)
            raise ProcessExit(reason)


def _check_extra(proc: Process, mod: GenServer, state: Any, extra: Any) -> Any:
    if extra == "hibernate":
        return None
    if type(extra) is int and extra >= 0:
        return extra
    if extra == "infinity":
        return None
    if type(extra) is tuple and len(extra) == 2 and extra[0] == "continue":
        return extra
    reason = ("bad_return_value", extra)
    _terminate(proc, mod, reason, state)
    raise ProcessExit(reason)


def _terminate(proc: Process, mod: GenServer, reason: Any, state: Any) -> None:
    """Run the `terminate` callback; if it raises, that becomes the exit reason."""
    try:
        mod.terminate(reason, state)
    except ProcessExit as exc:
        raise ProcessExit(exc.reason)
    except Exception as exc:
        raise ProcessExit(gen.crash_reason(exc))
    if not is_clean_reason(reason):
        log.error("gen_server %r (%s) terminating: %r", proc.pid, type(mod).__name__, reason)
