"""A deterministic in-memory cluster of pure Ra server cores.

This is a test bed, not a runtime: one seeded `random.Random`, a fake clock
and a priority queue of messages stand in for processes, the network and the
WAL. It emulates just enough of ``ra_server_proc`` (``next_event`` at the head
of the queue, state-enter, state timeouts, ticks, a WAL that confirms writes
later, an aten-like node failure detector) to run Raft end to end, and it
records what safety checks need: the leader of every term and every applied
entry. A failing run replays exactly from its seed.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ra import release_cursor, server, timeouts
from ra import seq as ra_seq
from ra import snapshot as ra_snapshot
from ra.effect_types import Effect, unknown_effect
from ra.effects import executes
from ra.log import DEFAULT_MIN_SNAPSHOT_INTERVAL, MemoryLog
from ra.machine import Machine
from ra.state import ServerState, init
from ra.types import (
    AWAIT_CONDITION,
    FOLLOWER,
    LEADER,
    RECEIVE_SNAPSHOT,
    RECOVERED,
    AppendEntriesReply,
    InstallSnapshotResult,
    InstallSnapshotRpc,
    ServerId,
    make_command,
)

TICK_MS = 1000
POLL_MS = timeouts.ATEN_POLL_INTERVAL
CLIENT = "client"


class CounterMachine(Machine):
    """Adds integers; replies with the new total. Deterministic, as machines must be."""

    def init(self, config: dict[str, Any]) -> int:
        return 0

    def apply(self, meta: dict[str, Any], command: Any, state: int) -> tuple[Any, ...]:
        match command:
            case ("add", n):
                new = state + int(n)
                return (new, new)
        return (state, ("error", "unknown_command"))


class SnapshottingCounter(CounterMachine):
    """A counter that lets go of its log every `every` applied entries.

    Its state is the total alone, so a release cursor at the applied index is
    always correct; the optional `condition` exercises conditional cursors.
    """

    def __init__(self, every: int, condition: list[Any] | None = None) -> None:
        self.every = every
        self.condition = condition

    def apply(self, meta: dict[str, Any], command: Any, state: int) -> tuple[Any, ...]:
        new, reply = super().apply(meta, command, state)
        idx = meta["index"]
        if idx % self.every:
            return (new, reply)
        if self.condition is None:
            return (new, reply, [("release_cursor", idx, new)])
        return (new, reply, [("release_cursor", idx, new, {"condition": self.condition})])


@dataclass
class SnapshotSender:
    """The leader's helper that streams one snapshot to one peer by calls."""

    sid: Any
    leader: ServerId
    peer: ServerId
    rpcs: list[InstallSnapshotRpc]
    pos: int = 0
    done: bool = False


class SafetyViolation(AssertionError):
    """Election safety or state machine safety does not hold."""


@dataclass
class SimServer:
    sid: ServerId
    state: ServerState
    role: str = FOLLOWER
    queue: deque[tuple[Any, Any]] = field(default_factory=deque)
    timer_at: int | None = None
    timer_kind: str = ""
    stopped: bool = False
    wal_ready_at: int = 0
    tick_gen: int = 0
    #: peer -> token of its armed snapshot retry timer (a cancelled timer fires into nothing)
    snapshot_retry: dict[ServerId, int] = field(default_factory=dict)


@dataclass(order=True)
class _Scheduled:
    at: int
    seq: int
    kind: str = field(compare=False)
    target: Any = field(compare=False)
    payload: Any = field(compare=False)


class Sim:
    """Three (or `n`) servers on nodes ``n1..nN`` named ``s1..sN``."""

    def __init__(
        self,
        n: int = 3,
        seed: int = 0,
        drop_rate: float = 0.0,
        net_delay: tuple[int, int] = (1, 5),
        wal_delay: tuple[int, int] = (1, 3),
        machine: Any = None,
        min_snapshot_interval: int = DEFAULT_MIN_SNAPSHOT_INTERVAL,
        snapshot_chunk_size: int = ra_snapshot.DEFAULT_SNAPSHOT_CHUNK_SIZE,
        install_snap_rpc_timeout: int = 2_000,
    ) -> None:
        self.rng = random.Random(seed)
        self.now = 0
        self.drop_rate = drop_rate
        self.net_delay = net_delay
        self.wal_delay = wal_delay
        self._events: list[_Scheduled] = []
        self._seq = 0
        self._link_clock: dict[tuple[Any, Any], int] = {}
        self.blocked: set[frozenset[str]] = set()
        self.ids: list[ServerId] = [(f"s{i}", f"n{i}") for i in range(1, n + 1)]
        self.servers: dict[ServerId, SimServer] = {}
        #: term -> leaders seen in that term (election safety wants at most one)
        self.leaders: dict[int, set[ServerId]] = {}
        #: index -> (term, command) of the first application seen anywhere
        self.applied: dict[int, tuple[int, Any]] = {}
        self._applied_upto: dict[ServerId, int] = {}
        #: client notifications in arrival order: (correlation, reply)
        self.notified: list[tuple[Any, Any]] = []
        self.rejected: list[Any] = []
        #: last_applied -> machine state first seen there (snapshot installs must match)
        self.states_at: dict[int, Any] = {}
        self.snapshot_chunk_size = snapshot_chunk_size
        self.install_snap_rpc_timeout = install_snap_rpc_timeout
        self.senders: dict[Any, SnapshotSender] = {}
        #: (peer, snapshot index) of every completed snapshot install
        self.installs: list[tuple[ServerId, int]] = []
        for sid in self.ids:
            st = init({
                "id": sid,
                "uid": sid[0],
                "initial_members": list(self.ids),
                "machine": machine or CounterMachine(),
                "log": MemoryLog(min_snapshot_interval=min_snapshot_interval),
                "rng": random.Random(self.rng.getrandbits(32)),
            })
            srv = SimServer(sid=sid, state=st)
            self.servers[sid] = srv
            self._applied_upto[sid] = 0
            self._enter(srv, FOLLOWER, RECOVERED, "cast")
            self._schedule(self.rng.randint(1, TICK_MS), "tick", sid, 0)
            self._schedule(self.rng.randint(1, POLL_MS), "poll", sid, None)

    # ---- scheduling ------------------------------------------------------

    def _schedule(self, delay: int, kind: str, target: Any, payload: Any) -> None:
        self._seq += 1
        heapq.heappush(self._events, _Scheduled(self.now + delay, self._seq, kind, target, payload))

    def reachable(self, a: str, b: str) -> bool:
        return a == b or frozenset((a, b)) not in self.blocked

    def partition(self, *groups: Iterable[str]) -> None:
        """Cut every link between nodes of different groups."""
        sets = [set(g) for g in groups]
        self.blocked = set()
        for i, ga in enumerate(sets):
            for gb in sets[i + 1:]:
                for a in ga:
                    for b in gb:
                        self.blocked.add(frozenset((a, b)))

    def heal(self) -> None:
        self.blocked = set()

    def _send(self, from_sid: Any, to: Any, msg: Any, evtype: Any) -> None:
        """Ordered per link, possibly dropped (never blocks, like noconnect sends)."""
        from_node = from_sid[1] if isinstance(from_sid, tuple) else "client_node"
        to_node = to[1] if isinstance(to, tuple) else "client_node"
        if not self.reachable(from_node, to_node):
            return
        if self.drop_rate and self.rng.random() < self.drop_rate:
            return
        link = (from_sid, to)
        at = max(self.now + self.rng.randint(*self.net_delay), self._link_clock.get(link, 0))
        self._link_clock[link] = at
        self._seq += 1
        heapq.heappush(self._events, _Scheduled(at, self._seq, "msg", to, (msg, evtype)))

    # ---- driving ---------------------------------------------------------

    def trigger_election(self, sid: ServerId) -> None:
        self._deliver(self.servers[sid], "election_timeout", "cast")

    def command(self, data: Any, corr: Any, to: ServerId | None = None) -> None:
        """A client pipelines `data` with ``{notify, corr, client}`` to `to` or a leader."""
        target = to or self.leader()
        if target is None:
            return
        cmd = make_command("$usr", data, ("notify", corr, CLIENT), self.now)
        self._send(CLIENT, target, ("command", cmd), "cast")

    def leader(self) -> ServerId | None:
        """The running leader with the highest term, if any."""
        best: tuple[int, ServerId] | None = None
        for srv in self.servers.values():
            if not srv.stopped and srv.role == LEADER:
                cand = (srv.state.current_term, srv.sid)
                best = cand if best is None or cand > best else best
        return best[1] if best else None

    def run_for(self, ms: int) -> None:
        self.run_until(self.now + ms)

    def run_until(self, t: int) -> None:
        while self._events and self._events[0].at <= t:
            ev = heapq.heappop(self._events)
            self.now = ev.at
            self._fire(ev)
        self.now = max(self.now, t)

    def run_until_leader(self, limit_ms: int = 30_000) -> ServerId | None:
        deadline = self.now + limit_ms
        while self.now < deadline:
            self.run_for(50)
            lead = self.leader()
            if lead is not None and self.servers[lead].state.cluster_change_permitted:
                return lead
        return self.leader()

    def _fire(self, ev: _Scheduled) -> None:
        if ev.kind == "msg":
            if ev.target == CLIENT:
                self._client_receive(ev.payload[0])
                return
            if ev.target in self.senders:
                self._sender_receive(self.senders[ev.target], ev.payload[0])
                return
            srv = self.servers[ev.target]
            if not srv.stopped:
                self._deliver(srv, ev.payload[0], ev.payload[1])
        elif ev.kind == "timer":
            srv = self.servers[ev.target]
            if srv.stopped or srv.timer_at != ev.at or ev.payload != srv.timer_kind:
                return  # cancelled or re-armed since
            srv.timer_at = None
            if srv.role == AWAIT_CONDITION:
                msg = "await_condition_timeout"
            elif srv.role == RECEIVE_SNAPSHOT:
                msg = "receive_snapshot_timeout"
            else:
                msg = "election_timeout"
            self._deliver(srv, msg, "cast")
        elif ev.kind == "snapshot_retry":
            srv = self.servers[ev.target]
            peer, token = ev.payload
            if not srv.stopped and srv.snapshot_retry.get(peer) == token:
                del srv.snapshot_retry[peer]
                self._deliver(srv, ("snapshot_retry_timeout", peer), "cast")
        elif ev.kind == "sender_timeout":
            sender = self.senders.get(ev.target)
            if sender is not None and not sender.done and sender.pos == ev.payload:
                self._sender_exit(sender, "timeout")
        elif ev.kind == "wal":
            srv = self.servers[ev.target]
            if not srv.stopped:
                self._deliver(srv, ("ra_log_event", ev.payload), "cast")
        elif ev.kind == "tick":
            srv = self.servers[ev.target]
            if not srv.stopped and ev.payload == srv.tick_gen:
                srv.state.now_ms = self.now
                self._run_effects(srv, server.tick(srv.role, srv.state), "cast")
                self._drain(srv)
                self._schedule(TICK_MS, "tick", ev.target, srv.tick_gen)
        elif ev.kind == "poll":
            self._poll(self.servers[ev.target])
            self._schedule(POLL_MS, "poll", ev.target, None)

    def _poll(self, srv: SimServer) -> None:
        """aten: a follower whose leader's node is unreachable suspects it."""
        lead = srv.state.leader_id
        if not srv.stopped and srv.role == LEADER:
            # aten reports reachable nodes as up: peers marked disconnected get a new chance
            for peer in srv.state.peers():
                if self.reachable(srv.sid[1], peer[1]):
                    server.update_disconnected_peers(peer[1], "nodeup", srv.state)
        if srv.stopped or srv.role != FOLLOWER or lead is None:
            return
        if not self.reachable(srv.sid[1], lead[1]):
            self._maybe_set_timer(srv, timeouts.LONG)

    def _client_receive(self, msg: Any) -> None:
        match msg:
            case ("applied", replies):
                self.notified.extend(replies)
            case ("rejected", reason):
                self.rejected.append(reason)

    # ---- the process emulation -------------------------------------------

    def _deliver(self, srv: SimServer, msg: Any, evtype: Any) -> None:
        srv.queue.append((msg, evtype))
        self._drain(srv)

    def _drain(self, srv: SimServer) -> None:
        while srv.queue and not srv.stopped:
            msg, evtype = srv.queue.popleft()
            self._step(srv, msg, evtype)
        self._flush_wal(srv)
        self._check(srv)

    def _step(self, srv: SimServer, msg: Any, evtype: Any) -> None:
        old = srv.role
        if old not in (LEADER,) and isinstance(msg, tuple) and msg and msg[0] == "command":
            # the shell's job for non-leaders: reject notifying commands with a hint
            effects = _not_leader(old, msg, srv.state)
            self._run_effects(srv, effects, evtype)
            return
        if isinstance(msg, tuple) and msg and msg[0] == "DOWN":
            _, component, pid, info = msg
            new, srv.state, effects = server.handle_down(old, component, pid, info, srv.state)
        else:
            new, srv.state, effects = server.handle(old, msg, srv.state, self.now, evtype)
        if new == server.STOP:
            self._run_effects(srv, effects, evtype)
            srv.stopped = True
            return
        nexts = self._run_effects(srv, effects, evtype)
        srv.role = new
        if new != old:
            self._enter(srv, new, old, evtype)
        elif new == RECEIVE_SNAPSHOT and isinstance(msg, InstallSnapshotRpc):
            # every chunk resets receive_snapshot_timeout
            self._set_timer(srv, ra_snapshot.DEFAULT_RECEIVE_SNAPSHOT_TIMEOUT, "receive_snapshot")
        else:
            kind = timeouts.on_stay(new)
            if kind is not None:
                self._maybe_set_timer(srv, kind)
        if old == RECEIVE_SNAPSHOT and new == FOLLOWER and srv.state.accepting is None and (
            isinstance(msg, InstallSnapshotRpc) and msg.chunk_state[1] == "last"
        ):
            self.installs.append((srv.sid, srv.state.last_applied))
        srv.queue.extendleft(reversed(nexts))

    def _enter(self, srv: SimServer, new: str, old: str, evtype: Any) -> None:
        srv.timer_at = None  # a state change cancels the state timeout
        srv.role = new
        enter_effects = server.handle_state_enter(new, old, srv.state)
        nexts = self._run_effects(srv, enter_effects, evtype)
        srv.queue.extendleft(reversed(nexts))
        if new == LEADER:
            self.leaders.setdefault(srv.state.current_term, set()).add(srv.sid)
            # a new leader ticks at once (re-sending to stale peers), then every TICK_MS
            srv.tick_gen += 1
            self._schedule(0, "tick", srv.sid, srv.tick_gen)
        if new == AWAIT_CONDITION:
            self._set_timer(srv, server.condition_timeout_ms(srv.state), "condition")
            return
        if new == RECEIVE_SNAPSHOT:
            self._set_timer(srv, ra_snapshot.DEFAULT_RECEIVE_SNAPSHOT_TIMEOUT, "receive_snapshot")
            return
        kind = timeouts.on_enter(new, old, server.is_new(srv.state))
        if kind is not None:
            self._maybe_set_timer(srv, kind)

    def _set_timer(self, srv: SimServer, ms: int, kind: str) -> None:
        srv.timer_at = self.now + ms
        srv.timer_kind = kind
        self._seq += 1
        heapq.heappush(self._events, _Scheduled(srv.timer_at, self._seq, "timer", srv.sid, kind))

    def _maybe_set_timer(self, srv: SimServer, length: str) -> None:
        if srv.timer_at is None:
            self._set_timer(srv, timeouts.election_timeout_ms(length, self.rng), length)

    def _run_effects(self, srv: SimServer, effects: list[Effect], evtype: Any) -> list[Any]:
        """Execute what this member executes; return next events in order.

        Every effect the core emits has a case; machine effects the simulated
        machines never emit, and any unknown effect, raise rather than vanish,
        so a run never passes by leaving out something a real server would do.
        """
        nexts: list[Any] = []
        st = srv.state
        voter_nodes = {sid[1] for sid in st.voter_ids()}
        work = deque(effects)
        while work:
            eff = work.popleft()
            if not executes(eff, srv.role, srv.sid[1], st.membership, voter_nodes,
                            own_id=srv.sid, member_ids=list(st.cluster)):
                continue
            match eff:
                case ("next_event", evt):
                    nexts.append((evt, evtype))
                case ("next_event", etype, evt):
                    nexts.append((evt, etype))
                case ("send_rpc", to, rpc):
                    self._send(srv.sid, to, rpc, "cast")
                case ("cast", to, msg):
                    self._send(srv.sid, to, msg, "cast")
                case ("send_vote_requests", reqs):
                    for to, rpc in reqs:
                        self._send(srv.sid, to, rpc, ("call", srv.sid))
                case ("reply", reply):
                    if isinstance(evtype, tuple) and evtype[0] == "call":
                        self._send(srv.sid, evtype[1], reply, "cast")
                case ("send_msg", to, msg, _opts):
                    self._send(srv.sid, to, msg, "cast")
                case ("notify", nots):
                    for pid, replies in nots.items():
                        self._send(srv.sid, pid, ("applied", list(replies)), "cast")
                case ("send_ra_event", pid, evt):
                    self._send(srv.sid, pid, evt, "cast")
                case "start_election_timeout":
                    self._maybe_set_timer(srv, timeouts.LONG)
                case ("record_leader_msg", _):
                    if srv.role == FOLLOWER:
                        srv.timer_at = None
                case ("release_cursor", *_) | ("checkpoint", *_):
                    work.extendleft(reversed(release_cursor.handle_effect(eff, st)))
                case ("bg_work", job, _err):
                    self._bg_work(srv, job)
                case ("send_snapshot", to, (_snap, _lead, term)):
                    self._start_sender(srv, to, term)
                case ("start_snapshot_retry_timer", peer, ms):
                    self._seq += 1
                    srv.snapshot_retry[peer] = self._seq
                    self._schedule(ms, "snapshot_retry", srv.sid, (peer, self._seq))
                case ("cancel_snapshot_retry_timer", peer):
                    srv.snapshot_retry.pop(peer, None)
                case ("demonitor", "process", _pid):
                    pass
                case ("aux", _cmd):
                    self._aux(st)
                case (
                    ("send_msg", _, _) | ("mod_call", _, _, _) | ("monitor", *_)
                    | ("demonitor", *_) | ("timer", *_) | ("log", *_) | ("log_ext", *_)
                    | ("append", *_) | ("try_append", *_) | ("reply", _, _, *_)
                    | "garbage_collection"
                ):
                    # the simulated machines emit none of these
                    raise NotImplementedError(f"ra.sim does not execute {eff!r}")
                case _:
                    unknown_effect(eff, "ra.sim")
        return nexts

    def _aux(self, st: ServerState) -> None:
        """``aux`` effects (the core's ``tick`` and ``eval``) go to the machine's aux handler.

        The simulated machines have none, and a server whose machine has none
        does nothing with an aux cast; a machine with one needs a shell that
        runs it, which the simulator is not.
        """
        if getattr(st.cfg.effective_machine_module, "handle_aux", None) is not None:
            raise NotImplementedError("ra.sim does not run machine aux handlers")

    # ---- snapshots ---------------------------------------------------------

    def _bg_work(self, srv: SimServer, job: Any) -> None:
        """The worker writes (or promotes) a snapshot, then reports it written."""
        live: list[int] = []
        match job:
            case ("write_snapshot", kind, meta, _state, *rest):
                idxterm = (meta["index"], meta["term"])
                live = list(rest[0]) if rest else []
            case ("promote_checkpoint", idxterm):
                kind = "snapshot"
        evt: tuple[Any, ...] = ("snapshot_written", idxterm, live, kind)
        delay = self.rng.randint(*self.wal_delay)
        self._schedule(delay, "msg", srv.sid, (("ra_log_event", evt), "cast"))

    def _start_sender(self, srv: SimServer, peer: ServerId, term: int) -> None:
        st = srv.state
        if not self.reachable(srv.sid[1], peer[1]):
            server.update_peer(peer, st, status="disconnected")
            return
        status = st.cluster[peer].status
        attempt = status[1] if isinstance(status, tuple) else 0
        snap = st.log.current_snapshot()
        assert snap is not None
        meta, mac_state = snap
        self._seq += 1
        sender_id = (f"snapshot_sender{self._seq}", srv.sid[1])
        rpcs = []
        live = st.log.live_indexes()
        if live:
            # the init and pre phases, with the live entries the peer lacks as it is now
            rpcs.append(ra_snapshot.init_rpc(meta, term, srv.sid))
            lacking = [i for chunk in ra_snapshot.live_to_send(
                live, self.servers[peer].state.last_applied) for i in chunk]
            rpcs.extend(ra_snapshot.pre_rpcs(meta, term, srv.sid, st.log.sparse_read(lacking)))
        rpcs.extend(ra_snapshot.install_snapshot_rpcs(
            meta, mac_state, term, srv.sid, self.snapshot_chunk_size))
        sender = SnapshotSender(sender_id, srv.sid, peer, rpcs)
        self.senders[sender_id] = sender
        server.update_peer(peer, st, status=("sending_snapshot", sender_id, attempt))
        self._sender_call(sender)

    def _sender_call(self, sender: SnapshotSender) -> None:
        self._send(sender.sid, sender.peer, sender.rpcs[sender.pos], ("call", sender.sid))
        self._schedule(self.install_snap_rpc_timeout, "sender_timeout", sender.sid, sender.pos)

    def _sender_receive(self, sender: SnapshotSender, reply: Any) -> None:
        if sender.done:
            return
        match reply:
            case InstallSnapshotResult() if sender.pos + 1 < len(sender.rpcs):
                sender.pos += 1
                self._sender_call(sender)
            case InstallSnapshotResult() | AppendEntriesReply():
                # the final answer goes to the leader as if the peer had cast it
                self._send(sender.sid, sender.leader, (sender.peer, reply), "cast")
                self._sender_exit(sender, "normal")

    def _sender_exit(self, sender: SnapshotSender, reason: str) -> None:
        sender.done = True
        del self.senders[sender.sid]
        down = ("DOWN", "snapshot_sender", sender.sid, reason)
        self._schedule(0, "msg", sender.leader, (down, "cast"))

    def _flush_wal(self, srv: SimServer) -> None:
        """Confirm writes later, in order, one ``written`` event per term run."""
        for batch in srv.state.log.take_wal_writes():
            runs: list[tuple[int, list[int]]] = []
            for idx, term, _ in batch:
                if runs and runs[-1][0] == term:
                    runs[-1][1].append(idx)
                else:
                    runs.append((term, [idx]))
            at = max(self.now + self.rng.randint(*self.wal_delay), srv.wal_ready_at)
            srv.wal_ready_at = at
            for term, idxs in runs:
                self._seq += 1
                evt = ("written", term, ra_seq.from_list(idxs))
                heapq.heappush(self._events, _Scheduled(at, self._seq, "wal", srv.sid, evt))

    # ---- safety ----------------------------------------------------------

    def _check(self, srv: SimServer) -> None:
        for term, leaders in self.leaders.items():
            if len(leaders) > 1:
                raise SafetyViolation(f"two leaders in term {term}: {sorted(leaders)}")
        st = srv.state
        upto = self._applied_upto[srv.sid]
        if st.last_applied > upto:
            seen_state = self.states_at.setdefault(st.last_applied, st.machine_state)
            if seen_state != st.machine_state:
                raise SafetyViolation(
                    f"{srv.sid} has state {st.machine_state!r} at {st.last_applied}, "
                    f"another member had {seen_state!r}"
                )
        for idx in range(upto + 1, st.last_applied + 1):
            entry = st.log.fetch(idx)
            if entry is None:
                continue  # covered by an installed snapshot: checked through the state
            seen = self.applied.setdefault(idx, (entry[1], entry[2]))
            if seen != (entry[1], entry[2]):
                raise SafetyViolation(
                    f"{srv.sid} applied {entry} at {idx}, another member applied {seen}"
                )
        self._applied_upto[srv.sid] = max(upto, st.last_applied)

    def check_log_matching(self) -> None:
        """Raft's log matching property across every pair of logs."""
        logs = [s.state.log for s in self.servers.values()]
        for i, a in enumerate(logs):
            for b in logs[i + 1:]:
                last = min(a.last_index_term()[0], b.last_index_term()[0])
                agree = True
                for idx in range(last, 0, -1):
                    ea, eb = a.fetch(idx), b.fetch(idx)
                    if agree and ea is not None and eb is not None and ea[1] == eb[1]:
                        agree = False  # from here down the logs must be identical
                    if not agree and ea != eb:
                        raise SafetyViolation(f"logs diverge at {idx}: {ea} vs {eb}")


def _not_leader(role: str, msg: Any, st: ServerState) -> list[Any]:
    _, cmd = msg
    cmd_type, _meta, data, mode = cmd
    return server.command_not_leader(role, "normal", (cmd_type, data, mode), st)
