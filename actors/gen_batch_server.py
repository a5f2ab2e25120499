"""The gen_batch_server behaviour (rabbitmq/gen-batch-server) on warren's processes.

Why a second behaviour: a server whose work has a large fixed cost per round
(Ra's WAL pays one fdatasync per write) wants to see everything that queued
while it was busy, not one message at a time. A batch server collects what is
in its mailbox into one list of operations and hands the whole list to
`handle_batch`:

* ``("cast", Msg)`` — sent with `cast` (or one per element of a `cast_batch`);
* ``("call", From, Msg)`` — sent with `call`; answered by a
  ``("reply", From, Reply)`` action;
* ``("info", Msg)`` — any other message.

A batch is complete when the mailbox is empty or when it holds the current
batch size of operations. The batch size starts at ``min_batch_size``,
doubles (up to ``max_batch_size``) after each batch that reached it, and
halves (down to ``min_batch_size``) after each batch cut short by an empty
mailbox: a busy server trades latency for throughput, an idle one the
reverse. Passing ``min_batch_size=max_batch_size`` fixes the size.

``handle_batch(ops, state)`` returns ``("ok", State)``, ``("ok", Actions,
State)`` (each action ``("reply", From, Reply)`` or ``"garbage_collect"``),
either with a trailing ``("continue", C)`` that runs `handle_continue` before
the next batch, or ``("stop", Reason)``. `terminate` runs on a stop, on a
crash of a callback (the process then exits with the crash reason, as a
gen_server does), on `gen.stop`, and on an EXIT from the parent when the
server traps exits; an exception raised by `terminate` itself is ignored.
Messages still queued when the server ends are dropped, including a batch
that was being collected.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable
from typing import Any, NoReturn

from actors import gen
from actors.pid import NoSuchName, Pid, ProcessExit, Ref, is_clean_reason
from actors.process import Process, current
from actors.runtime_gevent import EMPTY

__all__ = [
    "MAX_MAX_BATCH_SIZE",
    "MIN_MAX_BATCH_SIZE",
    "From",
    "GenBatchServer",
    "call",
    "cast",
    "cast_batch",
    "format_status",
    "start_link",
    "stop",
]

log = logging.getLogger("warren.gen_batch_server")

#: upstream's defaults: the batch size starts here ...
MIN_MAX_BATCH_SIZE = 32
#: ... and never grows past this
MAX_MAX_BATCH_SIZE = 8192

From = tuple[Pid, Ref]

stop = gen.stop


class GenBatchServer:
    """Callback module. `handle_batch` is required; the others are optional."""

    def init(self, args: Any) -> Any:
        return ("ok", args)

    def handle_batch(self, ops: list[Any], state: Any) -> Any:
        raise RuntimeError(f"{type(self).__name__}: handle_batch not implemented")

    def handle_continue(self, cont: Any, state: Any) -> Any:
        raise RuntimeError(f"{type(self).__name__}: unexpected continue {cont!r}")

    def terminate(self, reason: Any, state: Any) -> None:
        return None

    def format_status(self, state: Any) -> Any:
        return state


def cast(server: Any, msg: Any) -> str:
    """Fire and forget one ``("cast", msg)`` operation; always ``"ok"``."""
    return gen.cast(server, msg)


def cast_batch(server: Any, msgs: list[Any]) -> str:
    """Send several casts as one message; they join one batch, in order.

    They count as ``len(msgs)`` operations towards the batch size."""
    if not isinstance(msgs, list):
        raise TypeError("badarg: cast_batch takes a list")
    ops = [("cast", m) for m in msgs]
    try:
        current().node.send(server, ("$gen_cast_batch", ops, len(ops)))
    except NoSuchName:
        pass
    return "ok"


def call(server: Any, request: Any, timeout: int | None = 5000) -> Any:
    """A ``("call", From, request)`` operation; waits for its ``reply`` action."""
    return gen.call(server, request, timeout, label="gen_batch_server")


def start_link(module: Any, args: Any = None, *, name: str | None = None,
               max_batch_size: int = MAX_MAX_BATCH_SIZE,
               min_batch_size: int = MIN_MAX_BATCH_SIZE,
               reversed_batch: bool = False,
               timeout: int | None = None) -> Any:
    """Start a batch server linked to the caller; blocks until its `init` returns.

    ``("ok", pid)``, ``"ignore"`` or ``("error", reason)``. With
    ``reversed_batch`` the operations reach `handle_batch` newest first."""
    mod = gen.resolve_module(module)
    sizes = _Sizes(min_batch_size, max_batch_size, reversed_batch)

    def init_it(proc: Process, parent: Pid, ack: Ref) -> None:
        result = gen.run_init(mod, args, proc, parent, ack)
        match result:
            case ("ok", state):
                cont = None
            case ("ok", state, ("continue", cont)):
                pass
            case ("stop", reason):
                gen.init_ack(parent, ack, ("error", reason))
                raise ProcessExit(reason)
            case ("error", _):
                gen.init_ack(parent, ack, result)
                raise ProcessExit("normal")
            case "ignore":
                gen.init_ack(parent, ack, "ignore")
                raise ProcessExit("normal")
            case _:
                reason = ("bad_return_value", result)
                gen.init_ack(parent, ack, ("error", reason))
                raise ProcessExit(reason)
        gen.init_ack(parent, ack, ("ok", proc.pid))
        server = _Server(proc, mod, parent, sizes, state)
        if cont is not None:
            server.handle_continue(cont)
        server.loop()

    return gen.start(init_it, name=name, link=True, timeout=timeout)


def format_status(name: Any, module: Any, parent: Pid, state: Any) -> list[Any]:
    """What ``sys:get_status`` shows of a batch server: a header, the process
    data, then the callback's `format_status` of its state (the state itself
    when the callback fails)."""
    try:
        extra = module.format_status(state)
    except Exception:
        extra = state
    return [("header", f"Status for batching server {name}"),
            ("data", [("Status", "running"), ("Parent", parent), ("Logged Events", [])]),
            *(extra if isinstance(extra, list) else [extra])]


#: the first elements of the messages the loop itself looks at
_SPECIAL = frozenset({"$gen_cast", "$gen_call", "$gen_cast_batch", "$system_stop", "EXIT"})


class _Sizes:
    """The batch-size settings and the current size, adapted batch by batch."""

    __slots__ = ("batch_size", "max", "min", "reversed")

    def __init__(self, min_size: int, max_size: int, reversed_batch: bool) -> None:
        self.min = min_size
        self.max = max_size
        self.batch_size = min_size
        self.reversed = reversed_batch


class _Server:
    """The running loop of one batch server: its callback, state and pending batch."""

    def __init__(self, proc: Process, mod: Any, parent: Pid, sizes: _Sizes,
                 state: Any) -> None:
        self.proc = proc
        self.mod = mod
        self.parent = parent
        self.sizes = sizes
        self.state = state
        self.batch: list[Any] = []
        self.count = 0
        self.needs_gc = False

    def loop(self) -> None:
        proc = self.proc
        inbox = proc.actor_inbox
        sizes = self.sizes
        while True:
            if self.needs_gc:
                # a process collects its own heap in Erlang; here the young
                # generation is what the last batch allocated
                gc.collect(0)
                self.needs_gc = False
            msg = inbox.get(None)
            proc.check_alive()  # a kill clears the mailbox and may wake us with nothing
            self._append(msg)
            while True:
                if self.count >= sizes.batch_size:
                    self._complete_batch()
                    sizes.batch_size = min(sizes.max, sizes.batch_size * 2)
                    break
                msg = inbox.get(0)
                if msg is EMPTY:
                    self._complete_batch()
                    sizes.batch_size = max(sizes.min, sizes.batch_size // 2)
                    break
                self._append(msg)

    def _append(self, msg: Any) -> None:
        tag = msg[0] if type(msg) is tuple and msg else None
        if type(tag) is not str or tag not in _SPECIAL:
            self.batch.append(("info", msg))
            self.count += 1
        elif tag == "$gen_cast" and len(msg) == 2:
            self.batch.append(("cast", msg[1]))
            self.count += 1
        elif tag == "$gen_call" and len(msg) == 3:
            self.batch.append(("call", msg[1], msg[2]))
            self.count += 1
        elif tag == "$gen_cast_batch" and len(msg) == 3:
            self.batch.extend(msg[1])
            self.count += msg[2]
        elif tag == "$system_stop" and len(msg) == 2:
            self._exit(msg[1])
        elif (tag == "EXIT" and len(msg) == 3 and msg[1] == self.parent
              and self.proc.trap_exit):
            self._exit(msg[2])
        else:
            self.batch.append(("info", msg))
            self.count += 1

    def _complete_batch(self) -> None:
        batch = self.batch
        if not batch:
            return
        self.batch = []
        self.count = 0
        if self.sizes.reversed:
            batch.reverse()
        result = self._callback(self.mod.handle_batch, batch)
        match result:
            case ("ok", state):
                self.state = state
            case ("ok", state, ("continue", cont)):
                self.state = state
                self.handle_continue(cont)
            case ("ok", list() as actions, state):
                self.state = state
                self._actions(actions)
            case ("ok", list() as actions, state, ("continue", cont)):
                self.state = state
                self._actions(actions)
                self.handle_continue(cont)
            case ("stop", reason):
                self._exit(reason)
            case _:
                self._exit(("bad_return_value", result))

    def _actions(self, actions: list[Any]) -> None:
        node = self.proc.node
        for action in actions:
            match action:
                case ("reply", from_, reply):
                    node.reply(from_, reply)
                case "garbage_collect":
                    self.needs_gc = True
                case _:
                    self._exit(("bad_action", action))

    def handle_continue(self, cont: Any) -> None:
        while True:
            result = self._callback(self.mod.handle_continue, cont)
            match result:
                case ("ok", state):
                    self.state = state
                    return
                case ("ok", state, ("continue", cont)):
                    self.state = state
                case ("stop", reason):
                    self._exit(reason)
                case _:
                    self._exit(("bad_return_value", result))

    def _callback(self, fun: Callable[[Any, Any], Any], arg: Any) -> Any:
        """``fun(arg, state)``; a crash in it ends the server as `_exit` does."""
        try:
            return fun(arg, self.state)
        except ProcessExit as exc:
            if self.proc.dead:
                raise
            self._exit(exc.reason)
        except Exception as exc:
            self._exit(gen.crash_reason(exc))

    def _exit(self, reason: Any) -> NoReturn:
        """Run `terminate` (its own failure ignored), drop the mailbox, exit."""
        try:
            self.mod.terminate(reason, self.state)
        except ProcessExit:
            if self.proc.dead:
                raise
        except Exception:
            log.exception("gen_batch_server %r: terminate failed", self.proc.pid)
        self.proc.actor_inbox.clear()
        if not is_clean_reason(reason):
            log.error("gen_batch_server %r (%s) terminating: %r", self.proc.pid,
                      type(self.mod).__name__, reason)
        raise ProcessExit(reason)
