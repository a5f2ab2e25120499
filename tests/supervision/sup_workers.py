"""Children and callback modules used by the supervisor tests.

Every worker tells an observer process what happens to it — ``("started",
id, pid)`` when its init runs and ``("terminate", id, reason)`` when its
`terminate` callback runs — so tests can read start and stop order, and
whether `terminate` ran at all, from the observer's mailbox.
"""

from __future__ import annotations

from typing import Any

import actors
from actors import gen_server
from actors.gen_server import GenServer
from actors.pid import Pid


class Worker(GenServer):
    """A gen_server child. ``opts``: ``trap`` (trap exits), ``hold_terminate``
    (terminate waits for a ``"release"`` message), ``exit_as`` (terminate ends
    the process with this reason), ``crash_init`` (init fails with it).
    """

    def init(self, args: Any) -> Any:
        observer, id_, opts = args
        if opts.get("crash_init"):
            return ("stop", opts["crash_init"])
        if opts.get("trap"):
            actors.process_flag("trap_exit", True)
        actors.send(observer, ("started", id_, actors.self()))
        return ("ok", (observer, id_, opts))

    def handle_call(self, request: Any, from_: Any, state: Any) -> Any:
        if request == "ping":
            return ("reply", "pong", state)
        return ("reply", ("unexpected", request), state)

    def handle_cast(self, msg: Any, state: Any) -> Any:
        match msg:
            case ("stop", reason):
                return ("stop", reason, state)
            case "unlink_parent":
                for pid in list(actors.current().links):
                    actors.unlink(pid)
                return ("noreply", state)
        return ("noreply", state)

    def handle_info(self, msg: Any, state: Any) -> Any:
        return ("noreply", state)

    def terminate(self, reason: Any, state: Any) -> None:
        observer, id_, opts = state
        actors.send(observer, ("terminate", id_, reason))
        if opts.get("hold_terminate"):
            actors.receive(None, match=lambda m: m == "release")
        if "exit_as" in opts:
            actors.exit(opts["exit_as"])  # end with this reason instead of `reason`


def start_worker(observer: Pid, id_: Any, opts: dict[str, Any] | None = None) -> Any:
    """The child start function: starts and links a `Worker`."""
    return gen_server.start_link(Worker, (observer, id_, opts or {}))


def worker_spec(observer: Pid, id_: Any, opts: dict[str, Any] | None = None,
                **spec: Any) -> dict[str, Any]:
    """A child spec for a `Worker`; `spec` adds or overrides spec keys."""
    return {"id": id_, "start": (start_worker, (observer, id_, opts or {})), **spec}


class StaticSup:
    """A callback module whose `init` returns ``("ok", args)`` unchanged."""

    def init(self, args: Any) -> Any:
        return ("ok", args)


class ReturnsSup:
    """A callback module whose `init` returns its argument verbatim."""

    def init(self, args: Any) -> Any:
        return args


class ScriptedStart:
    """A start function whose results the test scripts, one per call.

    Each call pops the next entry of `script` (then uses `default`):
    ``"worker"`` starts a real `Worker` (``"worker_info"`` also adds an info
    term to the result), anything else is returned as the start
    result. Calls whose number is in `gate` first tell `observer`
    ``("attempt", id, n)`` and wait, inside the supervisor, for ``("go", n)``,
    so a test can act between two restart attempts. Extra start arguments (from
    a simple_one_for_one `start_child`) become the worker's id.
    """

    def __init__(self, observer: Pid, id_: Any, script: list[Any], *,
                 gate: frozenset[int] = frozenset(), default: Any = "worker") -> None:
        self.observer = observer
        self.id = id_
        self.script = list(script)
        self.gate = gate
        self.default = default
        self.calls = 0

    def __call__(self, *extra: Any) -> Any:
        self.calls += 1
        n = self.calls
        id_ = extra[0] if extra else self.id
        if n in self.gate:
            actors.send(self.observer, ("attempt", id_, n))
            actors.receive(None, match=lambda m: m == ("go", n))
        step = self.script.pop(0) if self.script else self.default
        if step == "worker":
            return start_worker(self.observer, id_)
        if step == "worker_info":
            return (*start_worker(self.observer, id_), ("info", n))
        return step
