"""Running `rabbit_fifo` on real Ra servers: the machine as Ra sees it.

`fifo.machine.RabbitFifo` is pure and speaks RabbitMQ's vocabulary; a Ra
server executes its effects literally. `QueueMachine` is the thin layer in
between, the part of ``rabbit_quorum_queue`` that RabbitMQ keeps next to the
machine:

* ``mod_call`` effects name RabbitMQ modules; they are pointed at
  `fifo.ra_hooks`, and the dead-letter worker's lifecycle calls
  (``rabbit_fifo_dlx``) are made directly inside the Ra server, as upstream
  does, so a follower that stops leading really stops its worker (a
  ``mod_call`` would only ever run on a leader) and a start failure crashes
  the server;
* ``log_ext`` callbacks get a read plan that knows the node it was made on and
  returns the user commands at the requested indexes, which is the interface
  the machine's delivery code reads;
* the dead-letter delivery names the sending Ra server, which only the
  executing process knows;
* every apply, state entry, snapshot install and ``local`` send is recorded
  as the history's ``replica_events`` (`fifo.replica_trace`) so a run can be
  checked replica by replica. A ``local`` send is carried out through a
  ``log`` effect with no indexes and the same ``local`` target: the local rule
  picks the same member, and that member records what it sent.

`start_queue` declares a queue's Ra cluster the way ``rabbit_quorum_queue``
does: one member per node, the machine version fixed from the start.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import actors
from actors import trace
from fifo import dlx_worker, ra_hooks, replica_trace
from fifo.effects import SELF
from fifo.machine import MACHINE_VERSION, RabbitFifo
from fifo.records import RabbitFifoState
from fifo.replica_trace import replica_view
from ra import api
from ra import machine as ra_machine
from ra.effect_types import Effect
from ra.effects import default_node_of
from ra.trace_context import TraceContext
from ra.types import USR

__all__ = [
    "LocalReadPlan",
    "QueueMachine",
    "RaAux",
    "machine_config",
    "replica_view",
    "start_queue",
]


def _system_time_ms() -> int:
    return int(actors.get_node().clock.system_time_ms())


def _user_command(payload: Any) -> Any:
    if isinstance(payload, tuple) and len(payload) == 4 and payload[0] == USR:
        return payload[2]
    return None


class LocalReadPlan:
    """A Ra read plan as the machine reads it: ``node`` and ``execute()``.

    ``node`` is the node of the member that made the plan; the machine hands
    the plan to a consumer on that node so the session reads the bodies from
    its local log copy instead of the member copying them into the message.
    """

    def __init__(self, plan: Any, node: str) -> None:
        self._plan = plan
        self.node = node

    def execute(self) -> dict[int, Any]:
        out = {}
        for idx, payload in self._plan.read().items():
            cmd = _user_command(payload)
            if cmd is not None:
                out[idx] = cmd
        return out


class RaAux:
    """The ``ra_aux`` accessors the machine's aux handler uses, over a server's state."""

    def __init__(self, server_state: Any) -> None:
        self._s = server_state

    def machine_state(self) -> RabbitFifoState:
        return self._s.machine_state

    def last_applied(self) -> int:
        return int(self._s.last_applied)

    def log_fetch(self, idx: int) -> Any:
        entry = self._s.log.fetch(idx)
        return None if entry is None else _user_command(entry[2])


def _record_sends(queue: Any, effects: list[Effect]) -> None:
    if trace.enabled():
        replica_trace.sent(queue, effects)


#: the effects `QueueMachine._adapt` may rewrite, by tag; all others pass unchanged
_ADAPTED_TAGS = frozenset({"mod_call", "log_ext", "log", "send_msg"})


def _resolve_self_one(eff: Any) -> Any:
    """Name the executing server where the machine could only write ``self()``."""
    if not (isinstance(eff, tuple) and len(eff) > 2 and isinstance(eff[2], tuple)
            and eff[2][:1] == ("dlx_event",)):
        return eff  # the pattern below, told apart without matching it
    match eff:
        case ("send_msg", to, ("dlx_event", s, evt), *opts) if s == SELF:
            return ("send_msg", to, ("dlx_event", actors.self(), evt), *opts)
    return eff


def _resolve_self(effects: list[Effect]) -> list[Effect]:
    return [_resolve_self_one(eff) for eff in effects]


class QueueMachine:
    """`RabbitFifo` with its effects made executable by a warren Ra server."""

    def __init__(self, config: Mapping[str, Any],
                 machine_version: int = MACHINE_VERSION) -> None:
        #: the ``rabbit_fifo`` init map (``{module, rabbit_fifo, Config}`` upstream)
        self.config = dict(config)
        self.inner = RabbitFifo(machine_version, clock=_system_time_ms)

    # --- machine callbacks -------------------------------------------------------------------

    def version(self) -> int:
        return self.inner.version()

    def which_module(self, version: int) -> QueueMachine:
        """The module of `version`; code knows no version newer than its own (as a
        4.2 node's ``rabbit_fifo:which_module(8)`` has no clause), so a member whose
        snapshot is newer than its code fails to start."""
        if version == self.inner.machine_version:
            return self
        if version > self.inner.machine_version:
            raise ValueError(f"rabbit_fifo machine version {version} is newer than this "
                             f"code ({self.inner.machine_version})")
        return QueueMachine(self.config, version)

    def init(self, ra_config: Mapping[str, Any]) -> RabbitFifoState:
        return self.inner.init({**self.config, **ra_config})

    def overview(self, s: RabbitFifoState) -> dict[str, Any]:
        return self.inner.overview(s)

    def live_indexes(self, s: RabbitFifoState) -> list[int]:
        """``rabbit_fifo:live_indexes/1``, a callback only machine 8 has: the raft
        indexes of the messages it holds, whose entries Ra keeps below a snapshot
        (their bodies are read back from there). Earlier versions keep none."""
        if not self.inner.rules.consumer_timeout_in_machine:
            return []
        return self.inner.live_indexes(s)

    def tracing(self) -> bool:
        """Ra hands over its `TraceContext` while the history is being recorded."""
        return trace.enabled()

    def apply(self, meta: Mapping[str, Any], cmd: Any, s: RabbitFifoState,
              trace_context: TraceContext | None = None) -> tuple[Any, ...]:
        before = replica_trace.before_apply(s, cmd) if trace.enabled() else None
        state, reply, effects = ra_machine.normalise_apply_result(self.inner.apply(meta, cmd, s))
        if before is not None:
            replica_trace.applied(meta, cmd, state, before, trace_context)
        return (state, reply, self._adapt(state.cfg.name, effects))

    def state_enter(self, ra_state: str, s: RabbitFifoState,
                    trace_context: TraceContext | None = None) -> list[Any]:
        if trace.enabled():
            replica_trace.entered(ra_state, s, trace_context)
        return self._adapt(s.cfg.name, self.inner.state_enter(ra_state, s))

    def snapshot_installed(self, meta: Mapping[str, Any], s: RabbitFifoState,
                           _old_meta: Any, _old_state: Any) -> list[Any]:
        if trace.enabled():
            replica_trace.snapshot_installed(meta, s)
        return self._adapt(s.cfg.name, self.inner.snapshot_installed(
            meta, s, _old_meta, _old_state, actors.node()))

    def tick(self, ts: int, s: RabbitFifoState) -> list[Any]:
        return self._adapt(s.cfg.name, self.inner.tick(ts, s))

    def init_aux(self, name: Any) -> Any:
        return self.inner.init_aux(name)

    def handle_aux(self, ra_state: str, kind: Any, cmd: Any, aux: Any,
                   int_state: Any) -> tuple[Any, ...]:
        res = self.inner.handle_aux(ra_state, kind, cmd, aux, RaAux(int_state))
        s: RabbitFifoState = int_state.machine_state
        if trace.enabled() and cmd == "tick":
            replica_trace.ticked(s, int_state)
        effects: list[Effect] = []
        for eff in ra_machine.flatten(res[-1]):
            match eff:
                case ("mod_call", "rabbit_fifo_dlx", fun, args):
                    _dlx_lifecycle(fun, args, int_state.cfg.id)
                case _:
                    effects.append(eff)
        return (*res[:-2], int_state, self._adapt(s.cfg.name, effects))

    # --- effect adaptation -------------------------------------------------------------------

    def _adapt(self, queue: Any, effects: Any) -> list[Effect]:
        out: list[Any] = []
        for eff in ra_machine.flatten(effects):
            tag = eff[0] if isinstance(eff, tuple) and eff else None
            if type(tag) is not str or tag not in _ADAPTED_TAGS:
                out.append(eff)  # most effects: nothing to rewrite
                continue
            eff = _resolve_self_one(eff)
            match eff:
                case ("mod_call", str() as mod, fun, args) if mod in ra_hooks.MODULES:
                    eff = ("mod_call", ra_hooks.MODULES[mod], fun, args)
                case ("log_ext", idxs, fun, loc):
                    eff = ("log_ext", idxs, self._read_plan_fun(queue, fun), loc)
                case ("log", idxs, fun, *rest):
                    eff = ("log", idxs, self._log_fun(queue, fun), *rest)
                case ("send_msg", to, _msg, opts) if _is_local(opts):
                    node = default_node_of(to, actors.node())
                    eff = ("log", [], self._log_fun(queue, lambda _c, e=eff: [e]),
                           ("local", node))
            out.append(eff)
        return out

    def _read_plan_fun(self, queue: Any, fun: Callable[[Any], Any]) -> Callable[[Any], Any]:
        def run(plan: Any) -> list[Any]:
            effects = _adapt_results(fun(LocalReadPlan(plan, actors.node())))
            _record_sends(queue, effects)
            return effects

        return run

    def _log_fun(self, queue: Any, fun: Callable[[Any], Any]) -> Callable[[Any], Any]:
        def run(cmds: Any) -> list[Any]:
            effects = _adapt_results(fun(cmds))
            _record_sends(queue, effects)
            return effects

        return run


def _adapt_results(effects: Any) -> list[Effect]:
    """Effects returned by a log callback: executed right away by the same member."""
    out = []
    for eff in _resolve_self(ra_machine.flatten(effects)):
        match eff:
            case ("mod_call", str() as mod, fun, args) if mod in ra_hooks.MODULES:
                eff = ("mod_call", ra_hooks.MODULES[mod], fun, args)
        out.append(eff)
    return out


def _is_local(opts: Any) -> bool:
    return opts == "local" or (isinstance(opts, list | tuple) and "local" in opts)


def _dlx_lifecycle(fun: str, args: list[Any], server_id: Any) -> None:
    """``rabbit_fifo_dlx:ensure_worker_started/terminated``, called in the server."""
    if fun == "ensure_worker_started":
        qres, pid = args
        dlx_worker.ensure_worker_started(qres, pid, server_id)
    elif fun == "ensure_worker_terminated":
        dlx_worker.ensure_worker_terminated(args[0])


def machine_config(name: str, queue_resource: Any, **config: Any) -> dict[str, Any]:
    """The machine's init map: cluster name, queue resource and `rabbit_fifo` config keys."""
    return {"name": name, "queue_resource": queue_resource, **config}


def start_queue(system: str, name: str, queue_resource: Any, nodes: list[str],
                config: Mapping[str, Any] | None = None, *,
                machine_version: int = MACHINE_VERSION, timeout: int = 5000,
                server_config: Mapping[str, Any] | None = None) -> Any:
    """Declare a quorum queue: one Ra member named `name` on each of `nodes`.

    Returns ``("ok", server_ids)`` with the ids in `nodes` order, or Ra's error.
    The member on the caller's node (if any) stands for election first, as
    ``ra:start_cluster`` does. Members start at `machine_version`, so no
    version upgrade runs when the first leader commits its noop.
    """
    machine = QueueMachine(machine_config(name, queue_resource, **dict(config or {})),
                           machine_version)
    ids = [(name, node) for node in nodes]
    srv_cfg = {"initial_machine_version": machine_version, **dict(server_config or {})}
    result = api.start_cluster(system, name, machine, ids, timeout, server_config=srv_cfg)
    if result[0] != "ok":
        return result
    return ("ok", ids)

