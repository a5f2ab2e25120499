"""Carrying out the core's effects inside a Ra server process (``ra_server_proc:handle_effect``).

`ra.effects.executes` decides *whether* this member runs an effect (leader
only, every member, or the ``local`` rule); this module decides *how*: a
non-blocking send for RPCs and machine messages, replies to callers,
``ra_event`` notifications batched per client pid, helper processes for
vote requests and snapshot streams, monitors and timers on the process,
snapshot hints handed to the log. ``next_event`` effects are returned, in
order, for the process to handle before its mailbox.
"""

from __future__ import annotations

import importlib
from collections import deque
from typing import TYPE_CHECKING, Any

import gevent

import actors
from actors.pid import NoSuchName
from ra import event_formatter, release_cursor, server, timeouts
from ra import machine as ra_machine
from ra.disk_log import run_bg_work
from ra.effect_types import Effect, unknown_effect
from ra.effects import always_executes, executes
from ra.proc_helpers import request_vote, send_snapshot
from ra.statem import CAST, INFO
from ra.types import LEADER, TERMINATING_LEADER, USR

if TYPE_CHECKING:
    from ra.proc import RaServerProc


def safe_send(to: Any, msg: Any) -> bool:
    """Ra's ``send/3``: ``noconnect`` + ``nosuspend``, so it never blocks or fails.

    A message for a node this one has no session with is dropped, never queued
    for a connection being set up: a queued AppendEntries would otherwise reach
    the *next* incarnation of a restarted node, long after the leader let go of
    those entries, and the peer would catch up by entries the leader no longer
    holds instead of by snapshot. Peers catch up later (tick re-sends); the
    server connects to its peers' nodes when it starts.
    """
    here = actors.get_node()
    node = _node_of(to)
    if node is not None and node != here.name and not here.is_connected(node):
        return False  # noconnect
    try:
        here.send(to, msg)
    except NoSuchName:
        pass
    return True


def send_applied_notifications(proc: RaServerProc, nots: dict[Any, Any]) -> None:
    """One ``applied`` event per client pid; what cannot be sent is kept.

    As Ra's ``pending_notifys``: correlations for a pid whose node is not
    connected wait (in order) and go out ahead of that pid's next ones, at
    the next notify or the next leader tick.
    """
    pending = proc.pending_notifys
    if pending:
        merged = {pid: list(corrs) for pid, corrs in pending.items()}
        for pid, replies in nots.items():
            merged.setdefault(pid, []).extend(replies)
        nots = merged
        pending.clear()
    for pid, replies in nots.items():
        evt = event_formatter.wrap(proc.ra_event_formatter, proc.id, "applied", list(replies))
        if not safe_send(pid, evt):
            pending[pid] = list(replies)
    if nots:
        proc.notified = True  # the loop lets the woken clients run next


def _node_of(to: Any) -> str | None:
    """The node of a pid or ``(name, node)``; None for a local registered name."""
    if isinstance(to, tuple) and len(to) == 2:
        return str(to[1])
    node = getattr(to, "node", None)
    return None if node is None else str(node)


def _opts(opts: Any) -> list[Any]:
    return [opts] if isinstance(opts, str) else list(opts)


def _event_type(etype: Any) -> Any:
    return {"cast": CAST, "info": INFO}.get(etype, etype)


def run_effects(
    proc: RaServerProc, effects: list[Effect], evtype: Any
) -> list[tuple[Any, Any]]:
    """Execute what this member executes; return the next events in order."""
    s = proc.s
    nexts: list[tuple[Any, Any]] = []
    voter_nodes: set[str] | None = None  # gathered once, if an effect needs it
    # a terminating leader is still the leader (Ra runs its events through `leader`)
    role = LEADER if proc.role == TERMINATING_LEADER else proc.role
    work = deque(effects)
    while work:
        eff = work.popleft()
        if not always_executes(eff):
            if voter_nodes is None:
                voter_nodes = {sid[1] for sid in s.voter_ids()}
            if not executes(eff, role, proc.node_name, s.membership, voter_nodes,
                            own_id=proc.id, member_ids=s.cluster.keys()):
                continue
        more = _run_one(proc, eff, evtype, nexts)
        if more:
            work.extendleft(reversed(more))
    return nexts


def _run_one(proc: RaServerProc, eff: Effect, evtype: Any,
             nexts: list[tuple[Any, Any]]) -> list[Effect]:
    s = proc.s
    match eff:
        case ("next_event", evt):
            nexts.append((evtype, evt))
        case ("next_event", etype, evt):
            nexts.append((_event_type(etype), evt))
        case ("send_rpc", to, rpc):
            proc.counters["rpcs_sent"] += 1
            safe_send(to, ("$gen_cast", rpc))
        case ("cast", to, rpc):
            safe_send(to, ("$gen_cast", rpc))
        case ("send_vote_requests", reqs):
            for to, rpc in reqs:
                actors.spawn(request_vote, proc.pid, to, rpc, timeouts.ATEN_POLL_INTERVAL)
        case ("reply", reply):
            if isinstance(evtype, tuple):
                proc.reply(evtype[1], reply)
        case ("reply", from_, reply) | ("reply", from_, reply, _):
            proc.reply(from_, reply)
        case ("send_msg", to, msg):
            safe_send(to, msg)
        case ("send_msg", to, msg, opts):
            opts = _opts(opts)
            if "ra_event" in opts:
                msg = event_formatter.wrap(proc.ra_event_formatter, s.leader_id, "machine", msg)
            if "cast" in opts:
                msg = ("$gen_cast", msg)
            safe_send(to, msg)
        case ("notify", nots):
            send_applied_notifications(proc, nots)
        case ("send_ra_event", pid, (etype, body)):
            safe_send(pid, event_formatter.wrap(proc.ra_event_formatter, proc.id, etype, body))
        case "start_election_timeout":
            proc.maybe_set_election_timeout(timeouts.LONG)
        case ("record_leader_msg", _):
            if proc.role == "follower":
                proc.events.cancel_state_timeout()
        case ("release_cursor", *_) | ("checkpoint", *_):
            return release_cursor.handle_effect(eff, s)
        case ("bg_work", _job, _err):
            _bg_work(proc, eff)
        case ("send_snapshot", to, (_snap, _leader, term)):
            _start_snapshot_sender(proc, to, term)
        case ("start_snapshot_retry_timer", peer, ms):
            proc.events.set_timeout(("snapshot_retry", peer), ms,
                                    ("core", ("snapshot_retry_timeout", peer)))
        case ("cancel_snapshot_retry_timer", peer):
            proc.events.cancel(("snapshot_retry", peer))
        case ("monitor", "process", pid):
            proc.add_monitor("machine", pid)
        case ("monitor", "process", component, pid):
            proc.add_monitor(component, pid)
        case ("monitor", "node", node):
            proc.monitor_node("machine", node)
        case ("monitor", "node", component, node):
            proc.monitor_node(component, node)
        case ("demonitor", "process", *rest):
            proc.remove_monitor(rest[-1])
        case ("demonitor", "node", *rest):
            proc.demonitor_node(rest[-1])
        case ("timer", name, ms) | ("timer", name, ms, _):
            _timer(proc, eff, name, ms)
        case ("mod_call", mod, fun, args):
            _resolve(mod, fun)(*args)
        case ("append", cmd):
            nexts.append((CAST, ("command", "normal", (USR, cmd, "noreply"))))
        case ("append", cmd, mode) | ("try_append", cmd, mode):
            nexts.append((CAST, ("command", "normal", (USR, cmd, mode))))
        case ("log", idxs, fun, *_):
            return ra_machine.flatten(fun(_read_commands(proc, idxs)))
        case ("log_ext", idxs, fun, _local):
            return ra_machine.flatten(fun(ReadPlan(proc, list(idxs))))
        case ("aux", cmd):
            _, effects = proc.aux("cast", cmd)
            return effects
        case "garbage_collection":
            pass  # reference counting already frees what the machine let go of
        case _:
            unknown_effect(eff, "ra_server_proc")
    return []


def _read_commands(proc: RaServerProc, idxs: list[int]) -> list[Any]:
    """User commands at `idxs`; entries gone from the log are skipped."""
    out = []
    for idx in idxs:
        entry = proc.s.log.fetch(idx)
        if entry is not None and isinstance(entry[2], tuple) and entry[2][0] == USR:
            out.append(entry[2][2])
    return out


class ReadPlan:
    """``ra_log_read_plan``: what a ``log_ext`` fun reads later, at its own pace."""

    def __init__(self, proc: RaServerProc, idxs: list[int]) -> None:
        self._entries = {i: proc.s.log.fetch(i) for i in idxs}

    def read(self) -> dict[int, Any]:
        return {i: e[2] for i, e in self._entries.items() if e is not None}


def _resolve(mod: Any, fun: str) -> Any:
    if isinstance(mod, str):
        mod = importlib.import_module(mod)
    return getattr(mod, fun)


def _timer(proc: RaServerProc, eff: Any, name: Any, ms: Any) -> None:
    key = ("machine_timer", name)
    if ms == "infinity":
        proc.events.cancel(key)
        return
    delay = int(ms)
    if len(eff) == 4 and isinstance(eff[3], dict) and eff[3].get("abs"):
        delay = int(ms) - proc.now()
    proc.events.set_timeout(key, max(0, delay), key)


def _bg_work(proc: RaServerProc, effect: Any) -> None:
    """Snapshot and checkpoint writes (Ra's ``ra_worker``).

    A `ra.disk_log.DiskLog` writes files: a helper process runs the job on
    gevent's thread pool, so the server goes on handling commands, and sends
    the outcome (``snapshot_written`` or ``snapshot_error``) back as a log
    event. The in-memory log holds snapshots as values, so its job is done at
    once and reported through the mailbox, as the worker would.
    """
    log, server_pid = proc.s.log, proc.pid
    if getattr(log, "run_bg_work", None) is None:
        actors.send(server_pid, run_bg_work(log, effect))
        return

    def worker() -> None:
        actors.send(server_pid, gevent.get_hub().threadpool.apply(run_bg_work, (log, effect)))

    actors.spawn(worker)


def _start_snapshot_sender(proc: RaServerProc, peer: Any, term: int) -> None:
    s = proc.s
    node = peer[1]
    if node != proc.node_name and node not in actors.nodes():
        server.update_peer(peer, s, status="disconnected")
        return
    snap = s.log.current_snapshot()
    if snap is None or peer not in s.cluster:
        return
    status = s.cluster[peer].status
    attempt = status[1] if isinstance(status, tuple) and status[0] == "snapshot_backoff" else 0
    meta, mac_state = snap
    pid, ref = actors.spawn_monitor(
        send_snapshot, proc.pid, proc.id, peer, meta, mac_state, term,
        proc.snapshot_chunk_size, proc.install_snap_rpc_timeout, s.log.live_indexes())
    proc.monitors[ref] = ("snapshot_sender", pid)
    server.update_peer(peer, s, status=("sending_snapshot", pid, attempt))
