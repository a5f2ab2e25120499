"""The Ra server process (``ra_server_proc``): the shell around the pure core.

`ra.server` decides; this process feeds it events and carries out the
effects it returns. Its jobs are the ones only a process can do: receive
calls and casts from clients and peers, keep the gen_statem discipline
(``next_event`` before the mailbox, postponed calls replayed on a state
change, one state timeout for elections and conditions, named timeouts for
the tick, machine timers and snapshot retries), monitor the leader, talk to
the node's WAL, persist term/vote/last_applied, and answer calls that need
no consensus (queries, ping, members). Client-facing protocol:

* ``("leader_call", req)`` calls are served by the leader; others answer
  ``("redirect", leader)`` or hold the call until a leader is known;
* ``("local_call", req)`` calls are served by any member;
* ``("command", prio, (type, data, reply_mode))`` casts are pipelined commands.
"""

from __future__ import annotations

import logging
import random
from collections import deque
from typing import Any

import gevent

import actors
from actors import gen
from actors.pid import CallExit, Pid, ProcessExit, Ref
from actors.process import Process
from ra import (
    deletion,
    event_formatter,
    local_queries,
    recovery_checkpoint,
    replication,
    server,
    timeouts,
)
from ra import machine as ra_machine
from ra.directory import DirEntry, SystemHandle, lookup
from ra.effect_types import Effect
from ra.proc_effects import run_effects, send_applied_notifications
from ra.snapshot import (
    DEFAULT_INSTALL_SNAP_RPC_TIMEOUT,
    DEFAULT_RECEIVE_SNAPSHOT_TIMEOUT,
    DEFAULT_SNAPSHOT_CHUNK_SIZE,
)
from ra.state import ServerState, peer_overview
from ra.state import init as init_state
from ra.statem import CAST, INFO, TIMEOUT, Events
from ra.types import (
    AWAIT_CONDITION,
    CANDIDATE,
    FOLLOWER,
    LEADER,
    NOREPLY,
    PRE_VOTE,
    RECEIVE_SNAPSHOT,
    RECOVER,
    RECOVERED,
    TERMINATING_FOLLOWER,
    USR,
    AppendEntriesRpc,
    InstallSnapshotRpc,
    InvalidReplyMode,
    ServerId,
    make_command,
    validate_reply_mode,
)
from supervision import supervisor

_log = logging.getLogger("warren.ra.proc")

#: ``tick_timeout`` default (ms).
DEFAULT_TICK_TIMEOUT = 1000
#: ``low_priority_commands_flush_size``.
DEFAULT_LOW_PRIORITY_FLUSH_SIZE = 16
#: a quiet server resends unconfirmed writes to a restarted WAL after this long (ms)
WAL_RESEND_AFTER_MS = 5000


def start_link(config: dict[str, Any]) -> Any:
    """Start a server linked to the caller (its ``ra_server_sup``); ``("ok", pid)``."""

    def init_it(proc: Process, parent: Pid, ack: Ref) -> None:
        handle = lookup(proc.node, config["system"])
        if handle is None:
            gen.init_ack(parent, ack, ("error", "system_not_started"))
            raise ProcessExit("normal")
        srv = RaServerProc(config, handle, proc.pid, parent)
        try:
            srv.init()
        except Exception as exc:
            reason = gen.crash_reason(exc)
            gen.init_ack(parent, ack, ("error", reason))
            raise ProcessExit(reason)
        gen.init_ack(parent, ack, ("ok", proc.pid))
        srv.loop()

    return gen.start(init_it, name=config["id"][0], link=True)


class RaServerProc:
    """State and event handling of one running Ra server."""

    def __init__(self, config: dict[str, Any], system: SystemHandle, pid: Pid,
                 parent: Pid) -> None:
        self.config = config
        self.system = system
        self.pid = pid
        self.parent = parent
        #: this process's node: the server never moves, so `now` need not look it up
        self._node = actors.get_node()
        self.id: ServerId = tuple(config["id"])
        self.uid: str = config["uid"]
        self.node_name = self.id[1]
        self.rng: random.Random = config.get("rng") or random.Random()
        sys_cfg = system.config
        self.broadcast_time = int(config.get("broadcast_time", timeouts.BROADCAST_TIME))
        self.tick_timeout = int(config.get("tick_timeout", DEFAULT_TICK_TIMEOUT))
        #: builds the messages clients get instead of ``("ra_event", from, evt)``
        self.ra_event_formatter = event_formatter.resolve(config.get("ra_event_formatter"))
        self.install_snap_rpc_timeout = int(
            config.get("install_snap_rpc_timeout", DEFAULT_INSTALL_SNAP_RPC_TIMEOUT))
        self.receive_snapshot_timeout = int(
            sys_cfg.get("receive_snapshot_timeout", DEFAULT_RECEIVE_SNAPSHOT_TIMEOUT))
        self.snapshot_chunk_size = int(
            sys_cfg.get("snapshot_chunk_size", DEFAULT_SNAPSHOT_CHUNK_SIZE))
        self.low_flush_size = int(
            sys_cfg.get("low_priority_commands_flush_size", DEFAULT_LOW_PRIORITY_FLUSH_SIZE))
        #: the longest run of waiting user commands appended as one batch: one
        #: append_entries_rpc's worth (`max_append_entries_rpc_batch_size`)
        self.command_batch_size = int(config.get(
            "max_append_entries_rpc_batch_size",
            sys_cfg.get("default_max_append_entries_rpc_batch_size", 128)))
        #: a subset of Ra's per-server counters (`ra_counters`), same names
        self.counters: dict[str, int] = dict.fromkeys(
            ("commands", "command_flushes", "rpcs_sent", "aer_received_follower"), 0)
        #: client pid -> ``applied`` replies that could not be sent yet (leader)
        self.pending_notifys: dict[Any, list[Any]] = {}
        #: ``applied`` events went out during this event (see `loop`)
        self.notified = False
        self.events = Events()
        self.role = RECOVER
        self.s: ServerState
        #: monitor ref -> (component, target)
        self.monitors: dict[Ref, tuple[str, Any]] = {}
        #: node -> components monitoring it (machine / aux)
        self.node_monitors: dict[str, set[str]] = {}
        self.leader_mon: tuple[ServerId, Ref] | None = None
        self.low_queue: deque[tuple[Any, Any, Any]] = deque()
        self.flush_scheduled = False
        #: leader calls held until a leader is known: [(from, request)]
        self.stash: list[tuple[Any, Any]] = []
        #: local queries waiting for an ``("applied", (idx, term))`` condition
        self.pending_queries: list[local_queries.PendingQuery] = []
        self.aux_state: Any = None
        #: (machine module, its handle_aux or None, legacy 6-argument form), see `aux`
        self._aux_handler: tuple[Any, Any, bool] | None = None
        self._persisted_tv: tuple[int, Any] = (0, None)
        self._persisted_la = 0
        self._persisted_snap: tuple[Any, int, Any] = (None, 0, None)
        #: the meta row (`ra.log_meta.LogMeta` or the in-memory one), set by `init`
        self.meta: Any = None
        #: the WAL process last written to, and when (see WAL restarts in docs/ra.md)
        self._wal_pid: Pid | None = None
        self._wal_write_ms = 0

    # ------------------------------------------------------------ lifecycle

    def init(self) -> None:
        """``post_init`` + ``recover`` + ``recovered`` (``ra_server_proc:recover/1``)."""
        cfg, disk = self.config, self.system.disk
        log = disk.open_log(self.uid, **dict(cfg.get("log_init_args", {})))
        self.meta = meta = disk.meta_of(self.uid, log)
        sys_cfg = self.system.config
        self.s = init_state({
            "id": self.id,
            "uid": self.uid,
            "initial_members": cfg["initial_members"],
            "machine": cfg["machine"],
            "log": log,
            "rng": self.rng,
            "membership": cfg.get("membership", "voter"),
            "initial_machine_version": cfg.get("initial_machine_version", 0),
            "max_pipeline_count": cfg.get(
                "max_pipeline_count", sys_cfg.get("default_max_pipeline_count", 4096)),
            "max_append_entries_rpc_batch_size": cfg.get(
                "max_append_entries_rpc_batch_size",
                sys_cfg.get("default_max_append_entries_rpc_batch_size", 128)),
            "await_condition_timeout": cfg.get("await_condition_timeout", 30_000),
            "system_config": sys_cfg,
            "current_term": meta.fetch("current_term", 0),
            "voted_for": meta.fetch("voted_for"),
            "last_applied": meta.fetch("last_applied", 0),
        })
        self._persisted_tv = (self.s.current_term, self.s.voted_for)
        self._persisted_la = int(meta.fetch("last_applied", 0))
        self._persisted_snap = log.snapshot_mark()
        self.system.directory[self.id[0]] = DirEntry(
            uid=self.uid, cluster_name=cfg.get("cluster_name"), pid=self.pid, parent=self.parent)
        init_aux = getattr(self.s.cfg.effective_machine_module, "init_aux", None)
        self.aux_state = init_aux(self.id[0]) if init_aux is not None else None
        actors.process_flag("trap_exit", True)
        actors.monitor_nodes(True)
        self.connect_peer_nodes()
        self.s.now_ms = self.now()
        self._enter(RECOVER, RECOVER, CAST)
        if recovery_checkpoint.recover(self.s):
            # aux state is never saved: start it afresh for the machine now in effect
            init_aux = getattr(self.s.cfg.effective_machine_module, "init_aux", None)
            self.aux_state = init_aux(self.id[0]) if init_aux is not None else None
        end_of_life = server.recover(self.s)
        self.role = RECOVERED
        self._enter(RECOVERED, RECOVER, CAST)
        if end_of_life:
            # stopped between applying the cluster's delete entry and deleting
            # its data: finish the deletion (its first turn in `loop`)
            self._enter(TERMINATING_FOLLOWER, RECOVERED, CAST)
        else:
            self.role = FOLLOWER
            self._enter(FOLLOWER, RECOVERED, CAST)
        self.events.set_timeout("tick", self.tick_timeout, "tick")
        self.after_event()

    def connect_peer_nodes(self) -> None:
        """Sends to peers never connect (``noconnect``), so a starting server
        connects to its peers' nodes itself, from a helper so start is not held up."""
        own = self.node_name
        connected = set(actors.nodes())
        missing = sorted({sid[1] for sid in self.s.cluster if sid[1] != own} - connected)
        if missing:
            node = actors.get_node()
            actors.spawn(lambda: [node.ping(peer) for peer in missing])

    def loop(self) -> None:
        """Events one at a time; after one that sent ``applied`` events, the hub next.

        In Erlang the channel that gets an ``applied`` event runs on another
        scheduler at once and confirms to its client while the server goes on.
        Here every process of the node shares one hub, and the server would
        first drain its whole mailbox (the other replies, ``pipeline_rpcs``, the
        frames it queued), so the confirm waited behind all of it. Yielding once
        after such an event lets the woken channels run first. Window-1 confirm
        p50 in `bench/e2e.py`'s workload, fourteen alternated pairs: lower in nine,
        higher in four, 0.05 ms lower on average (the first nine: 2.15 against
        2.25 ms; the last five, an hour later: 2.34 against 2.30 ms); window 256
        within the noise.
        """
        while True:
            self.maybe_finish_deletion()
            evtype, msg = self.events.take()
            if msg == "pipeline_rpcs" and evtype == INFO and self.idle_pipeline():
                continue  # nothing to hand the core, nothing changed for after_event
            self.handle_event(evtype, msg)
            self.after_event()
            if self.notified:
                self.notified = False
                gevent.sleep(0)

    def idle_pipeline(self) -> bool:
        """Whether a ``pipeline_rpcs`` event would do nothing: a leader whose peers are
        all up to date (about eight of them a message at window 1, after every reply
        and WAL write, as Ra re-enters it). The core would return no effect and no
        change, so the shell skips the event and its after-event work."""
        return self.role == LEADER and not replication.pipeline_due(self.s)

    def maybe_finish_deletion(self) -> None:
        """A terminating follower stops as soon as its log is written, which
        may already be true when it enters the state (no further event comes)."""
        if self.role == TERMINATING_FOLLOWER and deletion.is_fully_persisted(self.s):
            self.stop_deleted()

    def stop_deleted(self) -> None:
        """``terminate({shutdown, delete})``: leave no trace of this member.

        The uid's data, meta and name go, the directory entry and the cluster's
        leaderboard row too; the member's ``ra_server_sup`` is removed from the
        system by a helper once this process is gone, as Ra does, because a
        supervisor does not delete a child that stopped by itself.
        """
        handle = self.system
        entry = handle.directory.get(self.id[0])
        if entry is not None and entry.pid == self.pid:
            del handle.directory[self.id[0]]
        handle.disk.forget(self.uid)
        handle.leaderboard.pop(self.config.get("cluster_name"), None)
        actors.spawn(_remove_server_sup, self.pid, handle.names["server_sup_sup"], self.parent)
        raise ProcessExit(("shutdown", "delete"))

    def stop(self, reason: Any) -> None:
        """``terminate``: an orderly stop saves a recovery checkpoint (if configured)
        and the lazily stored meta row."""
        if self.meta is not None:
            self.write_recovery_checkpoint()
            self.meta.sync()
        entry = self.system.directory.get(self.id[0])
        if entry is not None and entry.pid == self.pid:
            entry.pid = None
        raise ProcessExit(reason)

    def write_recovery_checkpoint(self) -> None:
        """``ra_server:maybe_write_recovery_checkpoint``: synchronously, off the hub;
        a failure is logged and the next start replays the log instead."""
        interval = recovery_checkpoint.interval(self.config, self.system.config)
        found = recovery_checkpoint.to_write(self.s, interval)
        if found is None:
            return
        log = self.s.log
        try:
            gevent.get_hub().threadpool.apply(log.write_recovery_checkpoint, found)
        except Exception as exc:
            _log.warning("%s: cannot write a recovery checkpoint at %d: %r",
                         self.s.cfg.log_id, found[0]["index"], exc)
            return
        self.system.disk.save_recovery_checkpoint(self.uid, log)

    def now(self) -> int:
        return int(self._node.clock.system_time_ms())

    # ------------------------------------------------------------- dispatch

    def handle_event(self, evtype: Any, msg: Any) -> None:
        if isinstance(evtype, tuple):
            self.handle_call(evtype[1], msg)
        elif evtype == TIMEOUT:
            self.handle_timeout(msg)
        elif evtype == CAST:
            self.handle_cast(msg)
        else:
            self.handle_info(msg)

    def handle_call(self, from_: Any, req: Any) -> None:
        match req:
            case ("leader_call", inner):
                if self.role == LEADER:
                    self.leader_call(from_, inner)
                elif self.role in (CANDIDATE, PRE_VOTE):
                    self.events.postpone(("call", from_), req)
                elif self._monitored_leader() is not None:
                    self.reply(from_, ("redirect", self.s.leader_id))
                else:
                    self.stash.append((from_, req))
            case ("local_call", inner):
                self.local_call(from_, inner)
            case "ping":
                self.reply(from_, ("pong", self.role))
            case "trigger_election":
                self.reply(from_, "ok")
                if self.role in (FOLLOWER, AWAIT_CONDITION):
                    self.events.push_next([(CAST, "election_timeout")])
            case _:
                self.core(req, ("call", from_))

    def leader_call(self, from_: Any, req: Any) -> None:
        s = self.s
        match req:
            case ("command", _prio, (cmd_type, data, mode)):
                try:
                    validate_reply_mode(mode)
                except InvalidReplyMode as exc:
                    self.reply(from_, ("error", exc.error))
                    return
                cmd = make_command(cmd_type, data, mode, self.now(), from_)
                self.core(("command", cmd), ("call", from_))
            case ("consistent_query", query_fun):
                self.core(("consistent_query", from_, _query_fun(query_fun, s)), ("call", from_))
            case ("consistent_aux", aux_cmd):
                self.core(("consistent_aux", from_, aux_cmd), ("call", from_))
            case ("local_query", query_fun):
                self.reply(from_, self.query_reply(query_fun, self.id))
            case ("local_query", query_fun, options):
                self.local_query(from_, query_fun, options, self.id)
            case "members":
                self.reply(from_, ("ok", list(s.cluster), self.id))
            case ("transfer_leadership", target):
                self.core(("transfer_leadership", tuple(target)), ("call", from_))
            case _:
                self.reply(from_, ("error", ("unsupported_call", req)))

    def local_call(self, from_: Any, req: Any) -> None:
        s = self.s
        leader = s.leader_id if s.leader_id is not None else "not_known"
        match req:
            case ("local_query", query_fun):
                self.reply(from_, self.query_reply(query_fun, leader))
            case ("local_query", query_fun, options):
                self.local_query(from_, query_fun, options, leader)
            case "members":
                self.reply(from_, ("ok", list(s.cluster), leader))
            case "overview":
                self.reply(from_, self.overview())
            case "machine_version":
                # what this member's code supports (Ra asks `ra_machine:version/1` on its node)
                self.reply(from_, ("ok", s.cfg.machine_version))
            case ("counters", keys):
                # ``ra_counters:counters(Id, Keys)``: a snapshot sender asks for last_applied
                values = {"last_applied": s.last_applied, "commit_index": s.commit_index}
                self.reply(from_, {k: values[k] for k in keys if k in values})
            case ("read_entries", idxs):
                # a snapshot sender reads the live entries it sends in ``pre`` chunks
                self.reply(from_, ("ok", s.log.sparse_read(idxs)))
            case ("aux_command", cmd):
                wrap = isinstance(cmd, tuple) and len(cmd) == 2 and cmd[0] == "$wrap_reply"
                reply, effects = self.aux(("call", from_), cmd[1] if wrap else cmd)
                # as in Ra the reply goes first, then the handler's effects
                if reply is not None:
                    # consistent_aux: ``("ok", reply, leader_id)``, as a leader call answers
                    self.reply(from_, ("wrap_reply", reply[1]) if wrap else reply[1])
                self.push(run_effects(self, effects, ("call", from_)))
            case _:
                self.reply(from_, ("error", ("unsupported_call", req)))

    def handle_cast(self, msg: Any) -> None:
        match msg:
            case ("command", prio, (cmd_type, data, mode)):
                if self.role == LEADER:
                    self.leader_command(prio, cmd_type, data, mode)
                else:
                    effects = server.command_not_leader(
                        self.role, prio, (cmd_type, data, mode), self.s)
                    self.push(run_effects(self, effects, CAST))
            case "flush_commands":
                self.flush_low_priority()
            case ("aux_command", cmd):
                _, effects = self.aux("cast", cmd)
                self.push(run_effects(self, effects, CAST))
            case _:
                self.core(msg, CAST)

    def handle_info(self, msg: Any) -> None:
        match msg:
            case ("ra_log_event", _):
                self.core(msg, INFO)
            case ("DOWN", ref, "process", pid, reason):
                self.on_down(ref, pid, reason)
            case ("nodeup", node, *_):
                self.on_node_event(node, "nodeup")
            case ("nodedown", node, *_):
                self.on_node_event(node, "nodedown")
            case ("EXIT", pid, reason) if pid == self.parent:
                self.stop(reason)
            case ("$system_stop", reason):
                self.stop(reason)
            case ("EXIT", _pid, _reason):
                pass  # a helper linked to this server: its end is not ours
            case _:
                # core events re-injected as info (``pipeline_rpcs``) and the like
                self.core(msg, INFO)

    def handle_timeout(self, event: Any) -> None:
        match event:
            case ("core", msg):
                self.core(msg, CAST)
            case "tick":
                self.on_tick()
            case ("machine_timer", name):
                if self.role == LEADER:
                    self.leader_command("normal", USR, ("timeout", name), NOREPLY)

    # ------------------------------------------------------------ commands

    def leader_command(self, prio: str, cmd_type: Any, data: Any, mode: Any) -> None:
        try:
            validate_reply_mode(mode)
        except InvalidReplyMode:
            return  # casts with a bad reply mode are dropped
        if prio == "low" and cmd_type == USR:
            self.low_queue.append((cmd_type, data, mode))
            if not self.flush_scheduled:
                self.flush_scheduled = True
                actors.send(self.pid, ("$gen_cast", "flush_commands"))
            return
        now = self.now()
        cmd = make_command(cmd_type, data, mode, now)
        if cmd_type != USR or actors.whereis(self.system.wal_name) is None:
            self.core(("command", cmd), CAST)
            return
        cmds = [cmd, *self._waiting_user_commands(now)]
        if len(cmds) == 1:
            self.core(("command", cmd), CAST)
        else:
            self.core(("commands", cmds), CAST)

    def _waiting_user_commands(self, now: int) -> list[Any]:
        """Normal-priority user commands already queued right behind this one.

        They are appended with it as one batch: the log, the replies and their
        order are those of appending them one by one, but the leader writes one
        WAL batch and one ``append_entries_rpc`` per follower instead of one per
        command. Only an unbroken run is taken: the first other event goes back
        to the head of the queue, so nothing is reordered.
        """
        cmds: list[Any] = []
        events = self.events
        while len(cmds) < self.command_batch_size:
            event = events.take_waiting()
            if event is None:
                break
            match event:
                case (evtype, ("command", "normal", (cmd_type, data, mode))) if (
                        evtype == CAST and cmd_type == USR):
                    try:
                        validate_reply_mode(mode)
                    except InvalidReplyMode:
                        continue  # dropped, as a lone cast with a bad reply mode
                    cmds.append(make_command(USR, data, mode, now))
                case _:
                    events.push_back_first(event)
                    break
        return cmds

    def flush_low_priority(self) -> None:
        """Append queued low-priority commands in batches, behind the mailbox."""
        self.flush_scheduled = False
        if self.role != LEADER or not self.low_queue:
            return
        now = self.now()
        cmds: list[Any] = []
        while self.low_queue and len(cmds) < self.low_flush_size:
            cmd_type, data, mode = self.low_queue.popleft()
            cmds.append(make_command(cmd_type, data, mode, now))
        self.core(("commands", cmds), CAST)
        if self.low_queue and not self.flush_scheduled:
            self.flush_scheduled = True
            actors.send(self.pid, ("$gen_cast", "flush_commands"))

    # ---------------------------------------------------------------- core

    def core(self, msg: Any, evtype: Any) -> None:
        """Hand one event to the pure core; execute effects; change state."""
        old = self.role
        s = self.s
        self._count(old, msg)
        s.log.wal_up = self._node.whereis(self.system.wal_name) is not None
        new, s, effects = server.handle(old, msg, s, self.now(), evtype)
        self.persist_term_and_vote()
        if new == server.STOP:
            run_effects(self, effects, evtype)
            self.after_event()
            self.stop("normal")
        if new == server.STOP_DELETE:
            run_effects(self, effects, evtype)
            self.after_event()
            self.stop_deleted()
        nexts = run_effects(self, effects, evtype)
        self.transition(new, old, msg)
        self.push(nexts)

    def _count(self, role: str, msg: Any) -> None:
        counters = self.counters
        if type(msg) is tuple and msg:
            if msg[0] == "command" and role == LEADER:
                counters["commands"] += 1
            elif msg[0] == "commands" and role == LEADER:
                counters["commands"] += len(msg[1])
                counters["command_flushes"] += 1
        elif role == FOLLOWER and isinstance(msg, AppendEntriesRpc):
            counters["aer_received_follower"] += 1

    def transition(self, new: str, old: str, msg: Any) -> None:
        self.role = new
        if new != old:
            self._enter(new, old, CAST)
        elif new == RECEIVE_SNAPSHOT and isinstance(msg, InstallSnapshotRpc):
            # every chunk resets receive_snapshot_timeout
            self.events.set_state_timeout(self.receive_snapshot_timeout,
                                          ("core", "receive_snapshot_timeout"))
        else:
            kind = timeouts.on_stay(new)
            if kind is not None:
                self.maybe_set_election_timeout(kind)

    def _enter(self, new: str, old: str, evtype: Any) -> None:
        """State-enter: cancel the state timeout, replay postponed events,
        run the core's enter hook and arm the new state's timeout."""
        self.role = new
        self.events.state_changed()
        s = self.s
        if new == FOLLOWER:
            self.low_queue.clear()
            for ref, (component, _) in list(self.monitors.items()):
                if component == "machine":
                    actors.demonitor(ref, flush=True)
                    del self.monitors[ref]
            for node, comps in list(self.node_monitors.items()):
                comps.discard("machine")
                if not comps:
                    del self.node_monitors[node]
        if new == LEADER:
            self._drop_leader_monitor()
            self.pending_notifys = {}
        effects = server.handle_state_enter(new, old, s)
        self.push(run_effects(self, effects, evtype))
        if new == LEADER:
            # a new leader ticks at once (re-sending to stale peers)
            self.events.set_timeout("tick", 0, "tick")
            self.system.leaderboard[self.config.get("cluster_name")] = (self.id, list(s.cluster))
        if new == AWAIT_CONDITION:
            self.events.set_state_timeout(server.condition_timeout_ms(s),
                                          ("core", "await_condition_timeout"))
            return
        if new == RECEIVE_SNAPSHOT:
            self.events.set_state_timeout(self.receive_snapshot_timeout,
                                          ("core", "receive_snapshot_timeout"))
            return
        kind = timeouts.on_enter(new, old, server.is_new(s))
        if kind is not None:
            self.maybe_set_election_timeout(kind)

    def maybe_set_election_timeout(self, length: str) -> None:
        """Arm an election timer unless a state timeout is already pending."""
        if self.events.state_timeout_pending():
            return
        ms = timeouts.election_timeout_ms(length, self.rng, self.broadcast_time)
        self.events.set_state_timeout(ms, ("core", "election_timeout"))

    def push(self, nexts: list[tuple[Any, Any]]) -> None:
        if nexts:
            self.events.push_next(nexts)

    # --------------------------------------------------------------- tick

    def on_tick(self) -> None:
        self.events.set_timeout("tick", self.tick_timeout, "tick")
        self.s.now_ms = self.now()
        effects = server.tick(self.role, self.s)
        self.push(run_effects(self, effects, CAST))
        if self.role == LEADER and self.pending_notifys:
            send_applied_notifications(self, {})  # try the undelivered ones again
        self.resend_to_restarted_wal()
        self.sync_meta()

    def resend_to_restarted_wal(self) -> None:
        """Writes a WAL took with it when it died are sent to its successor, as in Ra.

        A busy server learns of the loss from the new WAL's ``resend_write``
        (its next write leaves a gap); a quiet one only notices here, once
        `WAL_RESEND_AFTER_MS` passed since its last write and the WAL's pid
        changed while entries are still unconfirmed.
        """
        log = self.s.log
        if self._wal_pid is None or not log.pending():
            return
        if self.now() - self._wal_write_ms <= WAL_RESEND_AFTER_MS:
            return
        wal = actors.whereis(self.system.wal_name)
        if wal is None or wal == self._wal_pid:
            return
        log.handle_event(("resend_write", log.last_written()[0] + 1))

    def sync_meta(self) -> None:
        """Write the lazily stored meta row (``last_applied``) off the hub."""
        if self.meta.dirty:
            gevent.get_hub().threadpool.apply(self.meta.sync)

    # ---------------------------------------------------- monitors, nodes

    def on_down(self, ref: Ref, pid: Any, reason: Any) -> None:
        self.pending_notifys.pop(pid, None)
        entry = self.monitors.pop(ref, None)
        if entry is None:
            return
        component, target = entry
        s = self.s
        if component == "leader":
            if self.leader_mon is not None and self.leader_mon[1] == ref:
                self.leader_mon = None
            if self.role == FOLLOWER and s.leader_id == target:
                length, keep = timeouts.on_leader_down(reason)
                if not keep:
                    s.leader_id = None
                self.maybe_set_election_timeout(length)
        elif component == "snapshot_sender":
            old = self.role
            new, s, effects = server.handle_down(old, component, target, reason, s)
            nexts = run_effects(self, effects, INFO)
            self.transition(new, old, None)
            self.push(nexts)
        elif component == "machine":
            if self.role == LEADER:
                self.leader_command("low", USR, ("down", target, reason), NOREPLY)
        elif component == "aux":
            _, effects = self.aux("cast", ("down", target, reason))
            self.push(run_effects(self, effects, INFO))

    def on_node_event(self, node: str, what: str) -> None:
        server.update_disconnected_peers(node, what, self.s)
        comps = self.node_monitors.get(node, set())
        if "machine" in comps and self.role == LEADER:
            self.leader_command("normal", USR, (what, node), NOREPLY)
        if "aux" in comps:
            _, effects = self.aux("cast", (what, node))
            self.push(run_effects(self, effects, INFO))

    def add_monitor(self, component: str, target: Any) -> None:
        for _, (comp, tgt) in self.monitors.items():
            if comp == component and tgt == target:
                return
        self.monitors[actors.monitor(target)] = (component, target)

    def remove_monitor(self, target: Any) -> None:
        for ref, (_, tgt) in list(self.monitors.items()):
            if tgt == target:
                actors.demonitor(ref, flush=True)
                del self.monitors[ref]

    def monitor_node(self, component: str, node: str) -> None:
        """Node monitors report the node's current status at once, as in Ra."""
        self.node_monitors.setdefault(node, set()).add(component)
        up = node == self.node_name or node in actors.nodes()
        what = "nodeup" if up else "nodedown"
        if component == "machine" and self.role == LEADER:
            self.leader_command("normal", USR, (what, node), NOREPLY)

    def demonitor_node(self, node: str) -> None:
        self.node_monitors.pop(node, None)

    def _monitored_leader(self) -> ServerId | None:
        lead = self.s.leader_id
        if lead is not None and lead != self.id and self.leader_mon is not None and (
            self.leader_mon[0] == lead
        ):
            return lead
        return None

    def _drop_leader_monitor(self) -> None:
        if self.leader_mon is not None:
            _, ref = self.leader_mon
            actors.demonitor(ref, flush=True)
            self.monitors.pop(ref, None)
            self.leader_mon = None

    def track_leader(self) -> None:
        """Followers monitor the leader's process; re-monitor on leader change."""
        lead = self.s.leader_id
        if self.role == LEADER or lead is None or lead == self.id:
            self._drop_leader_monitor()
            return
        if self.leader_mon is not None and self.leader_mon[0] == lead:
            return
        self._drop_leader_monitor()
        ref = actors.monitor(lead)
        self.monitors[ref] = ("leader", lead)
        self.leader_mon = (lead, ref)
        members = list(self.s.cluster)
        self.system.leaderboard[self.config.get("cluster_name")] = (lead, members)

    # ---------------------------------------------------- after each event

    def after_event(self) -> None:
        self.persist_snapshot()
        self.flush_wal()
        self.persist_last_applied()
        self.track_leader()
        if self.stash:
            self.flush_stash()
        if self.pending_queries:
            self.perform_pending_queries()

    def local_query(self, from_: Any, query_fun: Any, options: dict[str, Any],
                    leader: Any) -> None:
        """A local query with options: at once, or parked until its condition holds."""
        try:
            idx_term = local_queries.parse_condition(options.get("condition"))
        except local_queries.BadCondition as exc:
            self.reply(from_, ("error", ("invalid_condition", exc.args[0])))
            return
        if idx_term is None:
            self.reply(from_, self.query_reply(query_fun, leader))
            return
        self.pending_queries = local_queries.park(self.pending_queries, idx_term, from_,
                                                  query_fun)
        # the entry may already be applied
        self.perform_pending_queries()

    def perform_pending_queries(self) -> None:
        """Answer the parked local queries whose entry is now applied with its term.

        A caller that gave up still gets evaluated; its late reply is dropped.
        """
        s = self.s
        snap = s.log.snapshot_index_term()

        def term_at(idx: int) -> int | None:
            if snap is not None and idx == snap[0]:
                return snap[1]
            return s.log.fetch_term(idx)

        self.pending_queries, ready = local_queries.take_ready(
            self.pending_queries, s.last_applied, term_at)
        if not ready:
            return
        if self.role == LEADER:
            leader: Any = self.id
        else:
            leader = s.leader_id if s.leader_id is not None else "not_known"
        for query in ready:
            self.reply(query.from_, self.query_reply(query.query_fun, leader))

    def flush_stash(self) -> None:
        """Held leader calls (`after_event` calls this only when there are some)."""
        if self.role == LEADER:
            held, self.stash = self.stash, []
            self.push([(("call", f), req) for f, req in held])
            return
        lead = self._monitored_leader()
        if lead is not None:
            held, self.stash = self.stash, []
            for from_, _ in held:
                self.reply(from_, ("redirect", lead))

    def flush_wal(self) -> None:
        writes = self.s.log.take_wal_appends()
        if not writes:
            return
        wal = actors.whereis(self.system.wal_name)
        if wal is None:
            return  # the WAL is down: the log's resend covers it once it is back
        for tid, prev_idx, batch in writes:
            actors.send(wal, ("append", self.uid, self.pid, tid, prev_idx, batch))
        self._wal_pid = wal
        self._wal_write_ms = self.now()

    def persist_term_and_vote(self) -> None:
        """``voted_for`` must be durable before a vote is granted (``ra_log_meta:store_sync/4``)."""
        tv = (self.s.current_term, self.s.voted_for)
        if tv != self._persisted_tv:
            self.meta.store("current_term", tv[0])
            self.meta.store("voted_for", tv[1])
            self.sync_meta()
            self._persisted_tv = tv

    def persist_last_applied(self) -> None:
        """Only durably written indexes are recorded (``ra_server:persist_last_applied/1``)."""
        s = self.s
        la = min(s.last_applied, s.log.last_written()[0])
        if la > self._persisted_la:
            self.meta.store("last_applied", la)
            self._persisted_la = la

    def persist_snapshot(self) -> None:
        log = self.s.log
        mark = log.snapshot_mark()
        if mark != self._persisted_snap:
            self.system.disk.save_snapshot(self.uid, log.current_snapshot(), log.checkpoints(),
                                           getattr(log, "live_entries", list)())
            self._persisted_snap = mark

    # --------------------------------------------------------- replies etc.

    def reply(self, from_: Any, value: Any) -> None:
        if isinstance(value, tuple) and len(value) == 2 and value[0] == "wrap_reply":
            value = ("ok", value[1], self.id)
        actors.get_node().reply(from_, value)

    def query_reply(self, query_fun: Any, leader: Any) -> Any:
        s = self.s
        try:
            result = _query_fun(query_fun, s)(s.machine_state)
        except Exception as exc:
            return ("error", gen.crash_reason(exc))
        return ("ok", ((s.last_applied, s.current_term), result), leader)

    def aux(self, kind: Any, cmd: Any) -> tuple[Any, list[Effect]]:
        """Run the aux handler: ``(("reply", r) | None, effects)``.

        ``handle_aux`` with five arguments gets the opaque server state (read
        through `ra.aux`); the legacy six-argument form gets the log and the
        machine state, and the log it returns becomes the server's log.
        """
        s = self.s
        module = s.cfg.effective_machine_module
        handler = self._aux_handler
        if handler is None or handler[0] is not module:
            # once per machine module: ``{aux, ...}`` effects come once per enqueue
            fun = getattr(module, "handle_aux", None)
            handler = self._aux_handler = (
                module, fun, fun is not None and ra_machine.aux_arity(fun) == 6)
        _, fun, legacy = handler
        if fun is None:
            return ("reply", ("error", "aux_handler_not_implemented")), []
        if legacy:
            result = fun(self.role, kind, cmd, self.aux_state, s.log, s.machine_state)
        else:
            result = fun(self.role, kind, cmd, self.aux_state, s)
        tag = result[0] if isinstance(result, tuple | list) and result else None
        if tag == "reply" and len(result) >= 4:
            out: Any = ("reply", result[1])
            aux, inner, rest = result[2], result[3], result[4:]
        elif tag == "no_reply" and len(result) >= 3:
            out = None
            aux, inner, rest = result[1], result[2], result[3:]
        else:
            raise ValueError(f"bad handle_aux return {result!r}")
        self.aux_state = aux
        if legacy:
            s.log = inner
        return out, ra_machine.flatten(rest[0] if rest else [])

    def overview(self) -> dict[str, Any]:
        s = self.s
        snap = s.log.snapshot_index_term()
        return {
            "id": self.id,
            "uid": self.uid,
            "raft_state": self.role,
            "current_term": s.current_term,
            "leader_id": s.leader_id,
            "commit_index": s.commit_index,
            "last_applied": s.last_applied,
            "last_index": s.log.last_index_term()[0],
            "last_written_index": s.log.last_written()[0],
            "snapshot_index": snap[0] if snap is not None else None,
            "members": list(s.cluster),
            "cluster": {sid: peer_overview(p) for sid, p in s.peers().items()},
            "membership": s.membership,
            # machine versioning: what this code supports, what the cluster runs, and since when
            "machine_version": s.cfg.machine_version,
            "effective_machine_version": s.cfg.effective_machine_version,
            "machine_versions": list(s.cfg.machine_versions),
            "machine": ra_machine.overview(s.cfg.effective_machine_module, s.machine_state),
            "counters": dict(self.counters),
        }


def _remove_server_sup(server_pid: Pid, server_sup_sup: str, server_sup: Pid) -> None:
    """Once the deleted server is gone, take its ``ra_server_sup`` out of the system."""
    ref = actors.monitor(server_pid)
    msg = actors.receive(5000, match=lambda m: isinstance(m, tuple) and m[:2] == ("DOWN", ref))
    if msg is actors.TIMEOUT:
        return
    try:
        supervisor.terminate_child(server_sup_sup, server_sup)
    except CallExit:
        pass  # the system is going away as well


def _query_fun(query_fun: Any, s: ServerState) -> Any:
    """Query functions: ``fun(State)`` or ``("with_context", fun)`` taking ``(ctx, State)``."""
    if isinstance(query_fun, tuple) and len(query_fun) == 2 and query_fun[0] == "with_context":
        fun = query_fun[1]
        ctx = {"index": s.last_applied, "term": s.current_term,
               "machine_version": s.cfg.effective_machine_version}
        return lambda state: fun(ctx, state)
    return query_fun
