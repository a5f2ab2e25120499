"""One Erlang-style process: a pykka actor on the gevent runtime.

A `Process` owns its mailbox, its links, the monitors it holds and the
monitors held on it. All cross-process effects (signals, termination) are
carried out by its `Node`, synchronously within the hub, so that the only
ordering a process can observe is the per-sender order Erlang guarantees.

The loop is warren's, not pykka's: pykka's loop would turn a BaseException in
one actor into `ActorRegistry.stop_all()`, and it has no exit reasons. Here
every way of ending (return, raise, `exit`, an exit signal) becomes one exit
reason handed to `Node._terminate`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import gevent
from gevent.event import AsyncResult
from greenlet import getcurrent

from actors.pid import Pid, ProcessExit, Ref, exception_reason, is_clean_reason
from actors.runtime_gevent import GreenActor

if TYPE_CHECKING:
    from actors.node import Node

__all__ = ["NotAProcess", "Process", "current", "current_or_none"]

log = logging.getLogger("warren.process")


class NotAProcess(RuntimeError):
    """A process-only API was called from a greenlet that is no process."""


class Process(GreenActor):
    """The state of one process; the node mutates it, user code never does."""

    def __init__(
        self,
        node: Node,
        pid: Pid,
        body: Callable[..., Any] | None,
        args: tuple[Any, ...] = (),
    ) -> None:
        super().__init__()
        self.node = node
        self.pid = pid
        self._body = body
        self._args = args
        self.links: set[Pid] = set()
        # monitors held on this process: ref -> (watcher pid, object in DOWN)
        self.watchers: dict[Ref, tuple[Pid, Any]] = {}
        # monitors this process holds: ref -> what it watches (pid or (name, node))
        self.monitors: dict[Ref, Any] = {}
        # out-of-band result slots: call replies and DOWNs, spawn replies
        self.slots: dict[Ref, AsyncResult] = {}
        self.timers: set[Ref] = set()
        self.trap_exit = False
        self.name: str | None = None
        self.dead = False
        self.exit_reason: Any = None
        self.attached = body is None
        self.dictionary: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"Process({self.pid!r})"

    @property
    def alive(self) -> bool:
        return not self.dead

    def _start_actor_loop(self) -> None:
        g = gevent.Greenlet(self._actor_loop)
        g._warren_proc = self
        self.greenlet = g
        g.start()

    def _actor_loop(self) -> None:
        reason: Any = "normal"
        try:
            body = self._body
            assert body is not None
            body(*self._args)
        except ProcessExit as exc:
            reason = exc.reason
        except gevent.GreenletExit:
            reason = "killed"
        except BaseException as exc:
            reason = exception_reason(exc)
            log.error("process %r crashed:\n%s", self.pid, reason[3])
        if not self.dead:
            self.node._terminate(self, reason)

    def check_alive(self) -> None:
        """Raise the pending exit if a signal has already ended this process."""
        if self.dead:
            raise ProcessExit(self.exit_reason)

    def wait_slot(self, ref: Ref, timeout_ms: int | None) -> Any:
        """Park until the out-of-band slot `ref` is set; `None` on timeout."""
        slot = self.slots[ref]
        try:
            return slot.get(timeout=None if timeout_ms is None else timeout_ms / 1000)
        except gevent.Timeout:
            return None
        finally:
            self.slots.pop(ref, None)


def current() -> Process:
    """The process running in the calling greenlet."""
    proc = getattr(getcurrent(), "_warren_proc", None)
    if proc is None:
        raise NotAProcess(
            "this greenlet is not a warren process (spawn one or use node.attached())"
        )
    return proc


def current_or_none() -> Process | None:
    return getattr(getcurrent(), "_warren_proc", None)


def log_exit(pid: Pid, reason: Any) -> None:
    """Crash logging as Erlang's logger does it: clean reasons are silent."""
    if not is_clean_reason(reason) and reason not in ("killed", "noproc", "noconnection"):
        log.info("process %r exited: %r", pid, reason)
