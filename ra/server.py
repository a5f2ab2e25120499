"""The pure Ra server core: ``ra_server``'s handlers without the process.

Each ``handle_<state>(msg, state)`` returns ``(next_raft_state, state,
effects)``. The caller (a process shell, the simulation, a test) owns the
state, sets ``state.now_ms`` before each event, executes the effects, emits
``state_enter`` on transitions (`handle_state_enter`) and persists
``current_term``/``voted_for`` synchronously whenever they changed, before
executing any effect: a vote must be durable before it is granted.

Events are the wire records of `ra.types` (bare, or as ``(peer_id, reply)``
for AER/heartbeat/snapshot replies as Ra casts them) and Erlang-shaped
tuples: ``("command", cmd)``, ``("commands", [cmd])``,
``("ra_log_event", evt)``, ``("transfer_leadership", id)``,
``("consistent_query", from, fun)``, ``("snapshot_retry_timeout", peer)`` and
the atoms ``"election_timeout"``, ``"await_condition_timeout"``,
``"receive_snapshot_timeout"``, ``"pipeline_rpcs"``, ``"try_become_leader"``.
``DOWN`` of a snapshot sender goes to `handle_down`; what the shell did when
executing ``send_snapshot`` comes back through `update_peer`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ra import consistent_queries, deletion, versioning
from ra import machine as ra_machine
from ra.apply import DeleteAndTerminate, apply_to, machine_state_enter
from ra.effect_types import Effect
from ra.log_base import WalDown
from ra.release_cursor import maybe_emit_pending_release_cursor
from ra.replication import (
    append_entries_reply,
    cast_reply,
    evaluate_quorum,
    fetch_term,
    initialise_peers,
    make_all_rpcs,
    make_pipelined_rpc_effects,
    make_rpcs,
    send_snapshot_effect,
)
from ra.snapshot import INIT, LAST, NEXT, PRE, Accepting, retry_delay_ms
from ra.state import (
    WAL_DOWN_CONDITION_TIMEOUT,
    Condition,
    Peer,
    ServerState,
    dehydrate,
    get_membership,
    hydrate,
    make_cluster,
    membership_in,
    required_quorum,
)
from ra.types import (
    AFTER_LOG_APPEND,
    AWAIT_CONDITION,
    CANDIDATE,
    FOLLOWER,
    LEADER,
    NOOP,
    NOREPLY,
    NOTIFY,
    PRE_VOTE,
    RA_CLUSTER_CHANGE,
    RA_JOIN,
    RA_LEAVE,
    RA_PROTO_VERSION,
    RECEIVE_SNAPSHOT,
    TERMINATING_FOLLOWER,
    TERMINATING_LEADER,
    USR,
    VOTER,
    AppendEntriesReply,
    AppendEntriesRpc,
    Entry,
    HeartbeatReply,
    HeartbeatRpc,
    IdxTerm,
    InfoReply,
    InfoRpc,
    InstallSnapshotResult,
    InstallSnapshotRpc,
    PreVoteResult,
    PreVoteRpc,
    RequestVoteResult,
    RequestVoteRpc,
    ServerId,
)

Effects = list[Effect]
Result = tuple[str, ServerState, Effects]

#: Returned instead of a Raft state when a removed leader must stop (``{stop, normal}``).
STOP = "stop"
STOP_DELETE = deletion.STOP_DELETE


class LeaderSawAppendEntriesInSameTerm(AssertionError):
    """Two leaders in one term: Raft's election safety was violated."""


class LeaderSawHeartbeatInSameTerm(AssertionError):
    """Two leaders in one term, seen through a heartbeat."""


# ---------------------------------------------------------------------------
# term / vote bookkeeping
# ---------------------------------------------------------------------------


def update_term_and_voted_for(term: int, voted_for: ServerId | None, s: ServerState) -> None:
    s.current_term = term
    s.voted_for = voted_for


def update_term(term: int | None, s: ServerState) -> None:
    """Adopt a higher term, forgetting the vote of the old one."""
    if term is not None and term > s.current_term:
        update_term_and_voted_for(term, None, s)


def is_candidate_log_up_to_date(idx: int, term: int, last: tuple[int, int]) -> bool:
    """Raft §5.4.1 against the last *appended* entry."""
    last_idx, last_term = last
    return term > last_term or (term == last_term and idx >= last_idx)


def _unsupported(msg: Any) -> Effects:
    # answered only if the event was a call; dropped for casts
    return [("reply", ("error", ("unsupported_call", msg)))]


# ---------------------------------------------------------------------------
# dispatch and state enter
# ---------------------------------------------------------------------------


def handle(raft_state: str, msg: Any, s: ServerState, now_ms: int | None = None,
           event_type: Any = None) -> Result:
    """Dispatch `msg` to the handler of `raft_state`; `event_type` is how it arrived."""
    if now_ms is not None:
        s.now_ms = now_ms
    s.current_event_type = event_type
    handler = _HANDLERS.get(raft_state)
    if handler is None:
        raise ValueError(f"no pure handler for raft state {raft_state!r}")
    return handler(msg, s)


def handle_state_enter(raft_state: str, old_state: str, s: ServerState) -> Effects:
    """Raft-level enter hook plus the machine's ``state_enter`` effects."""
    if raft_state == LEADER:
        if old_state != AWAIT_CONDITION:
            s.cluster_change_permitted = False
    elif raft_state == FOLLOWER:
        for peer in s.cluster.values():
            peer.status = "normal"
    return machine_state_enter(raft_state, s)


def tick(raft_state: str, s: ServerState) -> Effects:
    """``tick_timeout``: the leader re-sends to stale peers and ticks the machine."""
    if raft_state == LEADER:
        rpcs = make_rpcs(s)
        # peers restarted with newer code are noticed here (docs/ra.md, "Machine versioning")
        info = versioning.info_rpc_effects(s)
        mac = ra_machine.call_tick(s.cfg.effective_machine_module, s.now_ms, s.machine_state)
        return rpcs + info + mac + [("aux", "tick")]
    if raft_state in (FOLLOWER, AWAIT_CONDITION):
        return [("aux", "tick")]
    if raft_state == TERMINATING_LEADER:
        return make_rpcs(s)
    return []


def is_new(s: ServerState) -> bool:
    return s.log.is_new() and s.log.snapshot_index_term() is None


def recover(s: ServerState) -> bool:
    """Replay committed entries with effects discarded, then adopt the newest
    cluster change of the uncommitted tail (``ra_server:init/1`` recovering the cluster).

    True if the replay reached the cluster's delete entry: the member stopped
    before it finished deleting itself and must finish now.
    """
    try:
        apply_to(s.commit_index, s, [])
    except DeleteAndTerminate:
        return True
    last_idx, _ = s.log.last_index_term()
    for idx, term, cmd in s.log.fold(s.last_applied + 1, last_idx):
        if isinstance(cmd, tuple) and cmd and cmd[0] == RA_CLUSTER_CHANGE:
            s.cluster = hydrate(cmd[2])
            s.membership = membership_in(s.cluster, s.cfg.id, s.cfg.uid, s.membership)
            s.cluster_change_permitted = True
            s.cluster_index_term = (idx, term)
    return False


def log_event(evt: Any, s: ServerState) -> Effects:
    """Hand a ``ra_log_event`` to the log; a write may satisfy a stashed release cursor."""
    effects = s.log.handle_event(evt)
    return maybe_emit_pending_release_cursor(s, effects)


def update_peer(peer_id: ServerId, s: ServerState, **fields: Any) -> None:
    """``ra_server:update_peer``: the shell records what executing an effect did
    (e.g. ``status={"sending_snapshot", pid, attempt}`` or ``"disconnected"``)."""
    peer = s.cluster[peer_id]
    for key, value in fields.items():
        setattr(peer, key, value)


def update_disconnected_peers(node: str, status: str, s: ServerState) -> None:
    """A ``nodeup`` ends ``disconnected`` and snapshot backoff for peers on that node."""
    if status != "nodeup":
        return
    for (_, peer_node), peer in s.cluster.items():
        in_backoff = isinstance(peer.status, tuple) and peer.status[0] == "snapshot_backoff"
        if peer_node == node and (peer.status == "disconnected" or in_backoff):
            peer.status = "normal"


def handle_down(raft_state: str, component: str, pid: Any, info: Any, s: ServerState) -> Result:
    """``DOWN`` of a monitored helper; only snapshot senders are handled here."""
    if component != "snapshot_sender" or raft_state not in (LEADER, AWAIT_CONDITION):
        return raft_state, s, []
    found = [
        (peer_id, peer) for peer_id, peer in s.cluster.items()
        if isinstance(peer.status, tuple) and peer.status[0] == "sending_snapshot"
        and peer.status[1] == pid
    ]
    if not found:
        return raft_state, s, []
    peer_id, peer = found[0]
    status = peer.status
    if info == "normal":
        # success was already processed through install_snapshot_result
        peer.status = "normal"
        return raft_state, s, maybe_emit_pending_release_cursor(s, [])
    attempt = int(status[2]) + 1
    peer.status = ("snapshot_backoff", attempt)
    return raft_state, s, [("start_snapshot_retry_timer", peer_id, retry_delay_ms(attempt))]


# ---------------------------------------------------------------------------
# elections (``ra_server:handle_pre_vote/2``, ``handle_candidate/2``)
# ---------------------------------------------------------------------------


def call_for_election(target: str, s: ServerState, effects: Effects | None = None) -> Result:
    effects = effects or []
    last_idx, last_term = s.log.last_index_term()
    peer_ids = list(s.peers())
    if target == CANDIDATE:
        new_term = s.current_term + 1
        reqs: list[tuple[ServerId, RequestVoteRpc | PreVoteRpc]] = [
            (p, RequestVoteRpc(term=new_term, candidate_id=s.id,
                               last_log_index=last_idx, last_log_term=last_term))
            for p in peer_ids
        ]
        update_term_and_voted_for(new_term, s.id, s)
        s.leader_id = None
        s.votes = 0
        self_vote: RequestVoteResult | PreVoteResult = RequestVoteResult(
            term=new_term, vote_granted=True)
        return CANDIDATE, s, [("next_event", "cast", self_vote),
                              ("send_vote_requests", reqs), *effects]
    token = s.rng.getrandbits(64)
    term = s.current_term
    reqs = [
        (p, PreVoteRpc(machine_version=s.cfg.machine_version, term=term, token=token,
                       candidate_id=s.id, last_log_index=last_idx, last_log_term=last_term))
        for p in peer_ids
    ]
    # voted_for := self for the current term; the term itself is unchanged
    update_term_and_voted_for(term, s.id, s)
    s.leader_id = None
    s.votes = 0
    s.pre_vote_token = token
    self_vote = PreVoteResult(term=term, token=token, vote_granted=True)
    return PRE_VOTE, s, [("next_event", "cast", self_vote), ("send_vote_requests", reqs), *effects]


def process_pre_vote(fsm_state: str, rpc: PreVoteRpc, s: ServerState) -> Result:
    """Answer a pre-vote; never sets ``voted_for`` (thesis §9.6)."""
    if rpc.term < s.current_term:
        return fsm_state, s, [("reply", PreVoteResult(s.current_term, rpc.token, False))]
    update_term(rpc.term, s)
    up_to_date = is_candidate_log_up_to_date(
        rpc.last_log_index, rpc.last_log_term, s.log.last_index_term()
    )
    cfg = s.cfg
    their, eff, ours = rpc.machine_version, cfg.effective_machine_version, cfg.machine_version
    if up_to_date and rpc.version > RA_PROTO_VERSION:
        return fsm_state, s, [("reply", PreVoteResult(rpc.term, rpc.token, False))]
    if up_to_date and (their == eff or eff <= their <= ours):
        return fsm_state, s, [("reply", PreVoteResult(rpc.term, rpc.token, True))]
    if up_to_date:
        return fsm_state, s, [("reply", PreVoteResult(rpc.term, rpc.token, False)),
                              "start_election_timeout"]
    if fsm_state == FOLLOWER:
        # this server is the better candidate: no reply, start its own timer
        return fsm_state, s, ["start_election_timeout"]
    return fsm_state, s, [("reply", PreVoteResult(rpc.term, rpc.token, False))]


def post_election_effects(s: ServerState) -> Effects:
    """The new leader's noop and version requests (`ra.versioning`)."""
    return versioning.post_election_effects(s)


def _become_leader(s: ServerState) -> Result:
    s.leader_id = s.id
    initialise_peers(s)
    s.votes = 0
    return LEADER, s, post_election_effects(s)


# ---------------------------------------------------------------------------
# leader
# ---------------------------------------------------------------------------


def _step_down(term: int, s: ServerState, effects: Effects) -> Result:
    s.leader_id = None
    update_term(term, s)
    return FOLLOWER, s, effects


def handle_leader(msg: Any, s: ServerState) -> Result:
    try:
        raft_state, s, effects = _handle_leader_msg(msg, s)
    except DeleteAndTerminate as eol:
        return _leader_delete_and_terminate(s, eol.effects)
    if raft_state == LEADER and s.pending_consistent_queries and s.cluster_change_permitted:
        # the noop of this term is applied: parked queries can be confirmed now
        effects = effects + consistent_queries.flush_pending(s)
    return raft_state, s, effects


def _leader_delete_and_terminate(s: ServerState, effects: Effects) -> Result:
    return deletion.leader_applied_delete(s, effects)


def handle_terminating_leader(msg: Any, s: ServerState) -> Result:
    """A leader that applied the delete entry: no new commands, otherwise a
    leader (replies, written events) that re-sends to stale peers after every
    event and stops once every peer has the delete entry (docs/ra.md, "Cluster deletion")."""
    if isinstance(msg, tuple) and msg and msg[0] in ("command", "commands"):
        return TERMINATING_LEADER, s, []
    try:
        _, s, effects = _handle_leader_msg(msg, s)
    except DeleteAndTerminate as again:
        # entries after the delete entry are never applied
        effects = again.effects
    return deletion.after_terminating_leader(s, effects)


def handle_terminating_follower(msg: Any, s: ServerState) -> Result:
    """A follower that applied the delete entry only handles log events, and
    stops once its whole log is written (docs/ra.md, "Cluster deletion")."""
    effects: Effects = []
    if isinstance(msg, tuple) and msg and msg[0] == "ra_log_event":
        _, s, effects = handle_follower(msg, s)
    return deletion.after_terminating_follower(s, effects)


def _handle_leader_msg(msg: Any, s: ServerState) -> Result:
    cur = s.current_term
    match msg:
        case (peer_id, AppendEntriesReply(term=term, success=True) as reply) if term == cur:
            return _leader_aer_success(peer_id, reply, s)
        case (peer_id, AppendEntriesReply(term=term)) if term > cur:
            if peer_id not in s.cluster:
                return LEADER, s, []
            return _step_down(term, s, [])
        case (peer_id, AppendEntriesReply(success=False) as reply):
            if peer_id not in s.cluster:
                return LEADER, s, []
            return _leader_aer_failure(peer_id, reply, s)
        case ("command", cmd):
            return _leader_command(cmd, s)
        case ("commands", cmds):
            return _leader_commands(cmds, s)
        case ("ra_log_event", ("written", _, _) as evt):
            effects = log_event(evt, s)
            effects = evaluate_quorum(s, effects)
            return LEADER, s, [("next_event", "info", "pipeline_rpcs"), *effects]
        case ("ra_log_event", evt):
            return LEADER, s, log_event(evt, s)
        case ("snapshot_retry_timeout", peer_id):
            peer = s.cluster.get(peer_id)
            if peer is not None and isinstance(peer.status, tuple) and (
                peer.status[0] == "snapshot_backoff"
            ):
                # the status stays in backoff so the shell can read the attempt count
                return LEADER, s, [send_snapshot_effect(peer_id, s)]
            return LEADER, s, []
        case "pipeline_rpcs":
            more, effects = make_pipelined_rpc_effects(s, [])
            if more:
                effects = [("next_event", "info", "pipeline_rpcs"), *effects]
            return LEADER, s, effects
        case (peer_id, InstallSnapshotResult(term=term)) if term > cur:
            if peer_id not in s.cluster:
                return LEADER, s, []
            return _step_down(term, s, [])
        case (peer_id, InstallSnapshotResult(last_index=last_index)):
            peer = s.cluster.get(peer_id)
            if peer is None:
                return LEADER, s, []
            effects = []
            if isinstance(peer.status, tuple) and peer.status[0] == "sending_snapshot":
                effects.append(("demonitor", "process", peer.status[1]))
            peer.status = "normal"
            peer.match_index = last_index
            peer.commit_index_sent = last_index
            peer.next_index = last_index + 1
            effects = maybe_emit_pending_release_cursor(s, effects)
            effects = maybe_promote_peer(peer_id, s, effects)
            _, effects = make_pipelined_rpc_effects(s, effects)
            return LEADER, s, effects
        case InstallSnapshotRpc(term=term, leader_id=leader) if term > cur:
            if leader not in s.cluster:
                return LEADER, s, []
            return _step_down(term, s, [("next_event", msg)])
        case AppendEntriesRpc(term=term) if term > cur:
            return _step_down(term, s, [("next_event", msg)])
        case AppendEntriesRpc(term=term) if term == cur:
            raise LeaderSawAppendEntriesInSameTerm(f"{s.cfg.log_id}: term {term}")
        case AppendEntriesRpc(leader_id=leader_id):
            reply = append_entries_reply(cur, False, s)
            return LEADER, s, [cast_reply(s.id, leader_id, reply)]
        case HeartbeatRpc(term=term) if term > cur:
            return _step_down(term, s, [("next_event", msg)])
        case HeartbeatRpc(term=term, query_index=qi, leader_id=leader_id) if term < cur:
            return LEADER, s, [cast_reply(s.id, leader_id, HeartbeatReply(qi, cur))]
        case HeartbeatRpc(term=term):
            raise LeaderSawHeartbeatInSameTerm(f"{s.cfg.log_id}: term {term}")
        case (peer_id, HeartbeatReply(term=term, query_index=qi)):
            if term > cur:
                return _step_down(term, s, [])
            if term < cur or peer_id not in s.cluster:
                return LEADER, s, []
            return LEADER, s, consistent_queries.heartbeat_reply(peer_id, qi, s)
        case ("consistent_query", from_, query_fun):
            return LEADER, s, consistent_queries.request(from_, query_fun, s)
        case ("consistent_aux", from_, aux_cmd):
            return LEADER, s, consistent_queries.request(
                from_, consistent_queries.AuxQuery(aux_cmd), s)
        case RequestVoteRpc(term=term, candidate_id=cand) if term > cur:
            if cand not in s.cluster:
                return LEADER, s, []
            return _step_down(term, s, [("next_event", msg)])
        case RequestVoteRpc():
            return LEADER, s, [("reply", RequestVoteResult(cur, False))]
        case PreVoteRpc(term=term, candidate_id=cand) if term > cur:
            if cand not in s.cluster:
                return LEADER, s, []
            return _step_down(term, s, [("next_event", msg)])
        case PreVoteRpc():
            # a live leader answers a canvassing member with AERs, not a vote
            return LEADER, s, make_all_rpcs(s)
        case RequestVoteResult() | PreVoteResult():
            return LEADER, s, []
        case ("transfer_leadership", target):
            return _transfer_leadership(target, s)
        case InfoRpc(term=term) | InfoReply(term=term) if term > cur:
            return _step_down(term, s, [("next_event", msg)])
        case InfoRpc():
            return LEADER, s, [versioning.info_reply_effect(msg, s)]
        case InfoReply():
            return LEADER, s, versioning.handle_info_reply(msg, s)
    return LEADER, s, _unsupported(msg)


def _leader_aer_success(peer_id: ServerId, reply: AppendEntriesReply, s: ServerState) -> Result:
    peer = s.cluster.get(peer_id)
    if peer is None:
        return LEADER, s, []
    peer.match_index = max(peer.match_index, reply.last_index)
    peer.next_index = max(peer.next_index, reply.next_index)
    effects = maybe_promote_peer(peer_id, s, [])
    effects = evaluate_quorum(s, effects)
    effects = [("next_event", "info", "pipeline_rpcs"), *effects]
    if s.id in s.cluster:
        return LEADER, s, effects
    if s.commit_index >= s.cluster_index_term[0]:
        # removed from the cluster and the removal is committed: push the
        # commit index out and stop
        _, effects = make_pipelined_rpc_effects(s, effects)
        return STOP, s, effects
    return LEADER, s, effects


def _leader_aer_failure(peer_id: ServerId, reply: AppendEntriesReply, s: ServerState) -> Result:
    peer = s.cluster[peer_id]
    term = s.log.fetch_term(reply.last_index)
    if term is None:
        peer.next_index = reply.next_index
    elif term == reply.last_term and reply.last_index >= peer.match_index:
        peer.match_index = reply.last_index
        peer.next_index = reply.next_index
    elif reply.last_index < peer.match_index:
        # the peer lost data it had confirmed
        peer.match_index = reply.last_index
        peer.next_index = reply.last_index + 1
    else:
        peer.next_index = max(min(peer.next_index - 1, reply.last_index), peer.match_index + 1)
    _, effects = make_pipelined_rpc_effects(s, [])
    return LEADER, s, effects


def _cmd_from(cmd: Any) -> Any:
    if isinstance(cmd, tuple) and len(cmd) == 4 and isinstance(cmd[1], dict):
        return cmd[1].get("from")
    return None


def append_error_reply(cmd: Any, reason: Any, effects: Effects) -> Effects:
    from_ = _cmd_from(cmd)
    if from_ is not None:
        return [("reply", from_, ("error", reason)), *effects]
    return effects


def after_log_append_reply(cmd: Any, idx: int, term: int, effects: Effects) -> Effects:
    from_ = _cmd_from(cmd)
    if from_ is not None and cmd[3] == AFTER_LOG_APPEND:
        return [("reply", from_, ("wrap_reply", (idx, term))), *effects]
    return effects


def _wal_down_condition(_msg: Any, s: ServerState) -> bool:
    return s.log.can_write()


def _wal_down(s: ServerState, effects: Effects) -> Result:
    others = list(s.peers())
    cond_effects: Effects = (
        [("next_event", "cast", ("transfer_leadership", others[0]))] if others else []
    )
    s.condition = Condition(
        predicate=_wal_down_condition,
        transition_to=LEADER,
        timeout_effects=cond_effects,
        timeout_transition_to=LEADER,
        duration=WAL_DOWN_CONDITION_TIMEOUT,
        name="wal_down",
    )
    return AWAIT_CONDITION, s, effects


def _leader_command(cmd: Any, s: ServerState) -> Result:
    outcome = append_log_leader(cmd, s)
    if outcome[0] == "not_appended":
        reason = outcome[1]
        effects = append_error_reply(cmd, reason, [])
        if reason == "wal_down":
            return _wal_down(s, effects)
        return LEADER, s, effects
    _, idx, term = outcome
    force = isinstance(cmd, tuple) and cmd[0] == NOOP
    _, effects = make_pipelined_rpc_effects(s, [], force)
    return LEADER, s, after_log_append_reply(cmd, idx, term, effects)


def _leader_commands(cmds: list[Any], s: ServerState) -> Result:
    """A flushed batch of low-priority user commands: one pipelining pass."""
    effects: Effects = []
    for cmd in cmds:
        outcome = append_log_leader(cmd, s)
        if outcome[0] == "not_appended":
            return _wal_down(s, effects)
        _, idx, term = outcome
        effects = after_log_append_reply(cmd, idx, term, effects)
    _, effects = make_pipelined_rpc_effects(s, effects)
    return LEADER, s, effects


def ensure_promotion_target(voter: dict[str, Any] | None, s: ServerState) -> Any:
    if voter is None or voter.get("membership") != "promotable":
        return voter
    if "uid" not in voter:
        return ("error", "missing_uid")
    if "target" in voter:
        return voter
    # the change is appended at the next index, so the target is reachable
    return {**voter, "target": s.log.next_index()}


def append_log_leader(cmd: Any, s: ServerState) -> tuple[Any, ...]:
    """Append one command; joins and leaves become full cluster changes."""
    tag = cmd[0] if isinstance(cmd, tuple) and cmd else None
    if tag in (RA_JOIN, RA_LEAVE) and not s.cluster_change_permitted:
        return ("not_appended", "cluster_change_not_permitted")
    if tag == RA_JOIN:
        _, meta, joining, mode = cmd
        if isinstance(joining, dict):
            sid = joining["id"]
            if "voter_status" in joining:
                status = joining["voter_status"]
            else:
                status = {k: joining[k] for k in ("membership", "uid", "target") if k in joining}
        else:
            # legacy join: a bare server id joins as a voter
            sid, status = joining, None
            if sid in s.cluster:
                return ("not_appended", "already_member")
        voter = ensure_promotion_target(status or None, s)
        if isinstance(voter, tuple):
            return ("not_appended", voter[1])
        existing = s.cluster.get(sid)
        if existing is not None and existing.voter_status == voter:
            return ("not_appended", "already_member")
        new_cluster = dict(s.cluster)
        if existing is not None:
            new_cluster[sid] = Peer(
                next_index=existing.next_index, match_index=existing.match_index,
                query_index=existing.query_index, commit_index_sent=existing.commit_index_sent,
                status=existing.status, voter_status=voter,
                machine_version=existing.machine_version,
            )
        else:
            new_cluster[sid] = Peer(voter_status=voter)
        return append_cluster_change(new_cluster, meta, mode, s)
    if tag == RA_LEAVE:
        _, meta, leaving, mode = cmd
        if leaving not in s.cluster:
            return ("not_appended", "not_member")
        new_cluster = {sid: p for sid, p in s.cluster.items() if sid != leaving}
        return append_cluster_change(new_cluster, meta, mode, s)
    idx = s.log.next_index()
    try:
        s.log.append((idx, s.current_term, cmd))
    except WalDown:
        return ("not_appended", "wal_down")
    return ("ok", idx, s.current_term)


def append_cluster_change(
    cluster: dict[ServerId, Peer], meta: Any, mode: Any, s: ServerState
) -> tuple[Any, ...]:
    """Append the full new config and switch to it at once, before commit."""
    idx = s.log.next_index()
    term = s.current_term
    command = (RA_CLUSTER_CHANGE, meta, dehydrate(cluster), mode)
    try:
        s.log.append((idx, term, command))
    except WalDown:
        return ("not_appended", "wal_down")
    prev_idx, prev_term = s.cluster_index_term
    s.previous_cluster = (prev_idx, prev_term, s.cluster)
    s.cluster = cluster
    s.cluster_change_permitted = False
    s.cluster_index_term = (idx, term)
    return ("ok", idx, term)


def maybe_promote_peer(peer_id: ServerId, s: ServerState, effects: Effects) -> Effects:
    peer = s.cluster.get(peer_id)
    vs = peer.voter_status if peer is not None else None
    if peer is None or vs is None or vs.get("membership") != "promotable":
        return effects
    if peer.match_index >= vs.get("target", 0):
        join = (RA_JOIN, {"ts": s.now_ms},
                {"id": peer_id, "voter_status": {**vs, "membership": VOTER}}, NOREPLY)
        return [("next_event", ("command", join)), *effects]
    return effects


def _transfer_leadership_condition(msg: Any, s: ServerState) -> bool:
    match msg:
        case AppendEntriesRpc(term=term) | InstallSnapshotRpc(term=term):
            return term > s.current_term
    return False


def _transfer_leadership(target: ServerId, s: ServerState) -> Result:
    if target == s.id:
        return LEADER, s, [("reply", "already_leader")]
    peer = s.cluster.get(target)
    if peer is None:
        return LEADER, s, [("reply", ("error", "unknown_member"))]
    if not peer.is_voter():
        return LEADER, s, [("reply", ("error", "non_voter"))]
    if peer.next_index != s.log.next_index():
        return LEADER, s, [("reply", ("error", "not_up_to_date"))]
    s.condition = Condition(
        predicate=_transfer_leadership_condition,
        transition_to=FOLLOWER,
        timeout_effects=[],
        timeout_transition_to=LEADER,
        name="transfer_leadership",
    )
    return AWAIT_CONDITION, s, [("reply", "ok"), ("send_msg", target, "election_timeout", "cast")]


# ---------------------------------------------------------------------------
# candidate and pre_vote
# ---------------------------------------------------------------------------


def handle_candidate(msg: Any, s: ServerState) -> Result:
    cur = s.current_term
    match msg:
        case RequestVoteResult(term=term, vote_granted=True) if term == cur:
            s.votes += 1
            if s.votes == required_quorum(s.cluster):
                return _become_leader(s)
            return CANDIDATE, s, []
        case RequestVoteResult(term=term) if term > cur:
            update_term_and_voted_for(term, None, s)
            return FOLLOWER, s, []
        case RequestVoteResult() | PreVoteResult():
            return CANDIDATE, s, []
        case AppendEntriesRpc(term=term) | HeartbeatRpc(term=term) if term >= cur:
            update_term_and_voted_for(term, None, s)
            return FOLLOWER, s, [("next_event", msg)]
        case AppendEntriesRpc(leader_id=leader_id):
            return CANDIDATE, s, [cast_reply(s.id, leader_id, append_entries_reply(cur, False, s))]
        case HeartbeatRpc(leader_id=leader_id, query_index=qi):
            return CANDIDATE, s, [cast_reply(s.id, leader_id, HeartbeatReply(qi, cur))]
        case (_, HeartbeatReply(term=term) | AppendEntriesReply(term=term)) if term > cur:
            update_term_and_voted_for(term, None, s)
            return FOLLOWER, s, []
        case RequestVoteRpc(term=term) | PreVoteRpc(term=term) if term > cur:
            update_term_and_voted_for(term, None, s)
            return FOLLOWER, s, [("next_event", msg)]
        case RequestVoteRpc():
            return CANDIDATE, s, [("reply", RequestVoteResult(cur, False))]
        case PreVoteRpc():
            return process_pre_vote(CANDIDATE, msg, s)
        case InstallSnapshotRpc(term=term) if term >= cur:
            s.votes = 0
            return FOLLOWER, s, [("next_event", msg)]
        case InstallSnapshotRpc(meta=meta):
            reply = InstallSnapshotResult(cur, meta["index"], meta["term"])
            return CANDIDATE, s, [("reply", reply)]
        case ("ra_log_event", evt):
            return CANDIDATE, s, log_event(evt, s)
        case "election_timeout":
            return call_for_election(CANDIDATE, s)
        case InfoRpc(term=term) | InfoReply(term=term) if term > cur:
            update_term_and_voted_for(term, None, s)
            return FOLLOWER, s, [("next_event", msg)]
        case InfoRpc():
            return CANDIDATE, s, [versioning.empty_info_reply_effect(msg, s)]
        case InfoReply():
            return CANDIDATE, s, []
    return CANDIDATE, s, _unsupported(msg)


def handle_pre_vote(msg: Any, s: ServerState) -> Result:
    cur = s.current_term
    match msg:
        case AppendEntriesRpc(term=term) | HeartbeatRpc(term=term) if term >= cur:
            update_term(term, s)
            s.votes = 0
            return FOLLOWER, s, [("next_event", msg)]
        case HeartbeatRpc(leader_id=leader_id, query_index=qi):
            return PRE_VOTE, s, [cast_reply(s.id, leader_id, HeartbeatReply(qi, cur))]
        case (_, HeartbeatReply(term=term)) if term > cur:
            update_term(term, s)
            s.votes = 0
            return FOLLOWER, s, []
        case RequestVoteRpc(term=term) if term > cur:
            update_term(term, s)
            s.votes = 0
            return FOLLOWER, s, [("next_event", msg)]
        case PreVoteResult(term=term) if term > cur:
            update_term(term, s)
            s.votes = 0
            return FOLLOWER, s, []
        case InstallSnapshotRpc(term=term) if term >= cur:
            s.votes = 0
            return FOLLOWER, s, [("next_event", msg)]
        case PreVoteResult(term=term, vote_granted=True, token=token) if (
            term == cur and token == s.pre_vote_token and s.membership == VOTER
        ):
            s.votes += 1
            if s.votes == required_quorum(s.cluster):
                return call_for_election(CANDIDATE, s)
            return PRE_VOTE, s, []
        case PreVoteResult() | RequestVoteResult():
            return PRE_VOTE, s, []
        case PreVoteRpc():
            return process_pre_vote(PRE_VOTE, msg, s)
        case "election_timeout":
            return call_for_election(PRE_VOTE, s)
        case ("ra_log_event", evt):
            return PRE_VOTE, s, log_event(evt, s)
        case InfoRpc(term=term) | InfoReply(term=term) if term > cur:
            # the follower adopts the term when it handles the message again
            s.votes = 0
            return FOLLOWER, s, [("next_event", msg)]
        case InfoRpc():
            return PRE_VOTE, s, [versioning.empty_info_reply_effect(msg, s)]
        case InfoReply():
            return PRE_VOTE, s, []
    return PRE_VOTE, s, _unsupported(msg)


# ---------------------------------------------------------------------------
# follower
# ---------------------------------------------------------------------------


def drop_existing(
    entries: tuple[Entry, ...], prev_idx: int, s: ServerState
) -> tuple[Sequence[Entry], int]:
    """Skip leading entries the log already holds with the same term.

    When none is held (the usual case) the entries come back as received, so a
    run that arrived packed (`ra.packed`) reaches the WAL with its pickle."""
    last_valid = prev_idx
    for pos, (idx, term, _) in enumerate(entries):
        if not s.log.exists(idx, term):
            return (entries if pos == 0 else entries[pos:]), last_valid
        last_valid = idx
    return (), last_valid


def has_log_entry_or_snapshot(idx: int, term: int, s: ServerState) -> str:
    found = s.log.fetch_term(idx)
    if found is None:
        snap = s.log.snapshot_index_term()
        if snap is not None and snap[0] == idx:
            return "entry_ok" if snap[1] == term else "term_mismatch"
        return "missing"
    return "entry_ok" if found == term else "term_mismatch"


def evaluate_commit_index_follower(s: ServerState, effects: Effects) -> Result:
    """Apply up to ``min(last appended, commit_index)``: a follower may apply
    entries it has not fsynced yet, because the leader holds a durable quorum."""
    if s.leader_id is None:
        return FOLLOWER, s, effects
    last_idx, _ = s.log.last_index_term()
    before = s.last_applied
    try:
        effects = apply_to(min(last_idx, s.commit_index), s, effects)
    except DeleteAndTerminate as eol:
        # the leader learns at once that this member applied the delete entry
        reply = append_entries_reply(s.current_term, True, s)
        return TERMINATING_FOLLOWER, s, [cast_reply(s.id, s.leader_id, reply), *eol.effects]
    effects = maybe_emit_pending_release_cursor(s, effects)
    if s.last_applied > before:
        effects = [("aux", "eval"), *effects]
    return FOLLOWER, s, effects


def pre_append_log_follower(entry: Entry, s: ServerState) -> None:
    """Adopt cluster changes at append time; revert one that is overwritten.

    On a revert the membership is worked out again from the config reverted
    to, so a member that a now-discarded change had demoted is a voter again.
    """
    idx, term, cmd = entry
    is_change = isinstance(cmd, tuple) and cmd and cmd[0] == RA_CLUSTER_CHANGE
    ci_idx, ci_term = s.cluster_index_term
    if idx == ci_idx and term != ci_term:
        if is_change:
            _adopt_cluster(hydrate(cmd[2]), (idx, term), s)
            return
        p_idx, p_term, p_cluster = (s.previous_cluster if s.previous_cluster is not None
                                    else previous_config(idx, s))
        s.previous_cluster = None
        _adopt_cluster(p_cluster, (p_idx, p_term), s)
        pre_append_log_follower(entry, s)
        return
    if is_change:
        s.previous_cluster = (ci_idx, ci_term, s.cluster)
        _adopt_cluster(hydrate(cmd[2]), (idx, term), s)


def _adopt_cluster(cluster: dict[ServerId, Peer], idx_term: IdxTerm, s: ServerState) -> None:
    s.cluster = cluster
    s.membership = membership_in(cluster, s.id, s.cfg.uid, s.membership)
    s.cluster_index_term = idx_term


def previous_config(idx: int, s: ServerState) -> tuple[int, int, dict[ServerId, Peer]]:
    """The config in force before index `idx`, read from the log and snapshot.

    Needed when a restarted member (which adopted its log's newest change
    without knowing the one before) sees that change overwritten: the newest
    cluster change below `idx`, else the snapshot's cluster, else the initial
    members.
    """
    for e_idx, e_term, cmd in reversed(s.log.fold(1, idx - 1)):
        if isinstance(cmd, tuple) and cmd and cmd[0] == RA_CLUSTER_CHANGE:
            return e_idx, e_term, hydrate(cmd[2])
    snap = s.log.current_snapshot()
    if snap is not None:
        meta = snap[0]
        return int(meta["index"]), int(meta["term"]), make_cluster(s.id, meta["cluster"])
    return 0, 0, make_cluster(s.id, s.cfg.initial_members)


def _follower_catchup(original_reason: str) -> Any:
    def predicate(msg: Any, s: ServerState) -> bool:
        match msg:
            case AppendEntriesRpc(term=term, prev_log_index=pli, prev_log_term=plt) if (
                term >= s.current_term
            ):
                found = has_log_entry_or_snapshot(pli, plt, s)
                if found == "entry_ok":
                    return True
                # a missing entry may be followed by a mismatch: leave to handle it
                return found == "term_mismatch" and original_reason == "missing"
            case InstallSnapshotRpc(term=term, meta=meta) if term >= s.current_term:
                return bool(meta["index"] >= s.log.next_index())
        return False

    return predicate


def _follower_aer(rpc: AppendEntriesRpc, s: ServerState) -> Result:
    effects0: Effects = [("record_leader_msg", rpc.leader_id)]
    s.leader_id = rpc.leader_id
    update_term(rpc.term, s)
    term = rpc.term
    found = has_log_entry_or_snapshot(rpc.prev_log_index, rpc.prev_log_term, s)
    if found == "entry_ok":
        entries, last_valid = drop_existing(rpc.entries, rpc.prev_log_index, s)
        if not entries:
            local_last, _ = s.log.last_index_term()
            if not rpc.entries and local_last > rpc.prev_log_index:
                # an empty AER resets the end of the log to the leader's
                assert rpc.prev_log_index >= s.last_applied
                s.log.set_last_index(rpc.prev_log_index)
                validated = True
            else:
                validated = local_last <= last_valid
            if validated:
                s.commit_index = rpc.leader_commit
                next_state, s, effects = evaluate_commit_index_follower(s, effects0)
                reply = append_entries_reply(term, True, s)
                return next_state, s, [cast_reply(s.id, rpc.leader_id, reply), *effects]
            # only duplicates, and the local log is longer than they prove:
            # confirm what is proven so a leader resending after a mismatch progresses
            valid = max(s.last_applied, last_valid)
            valid_term = fetch_term(valid, s)
            assert valid_term is not None
            reply = AppendEntriesReply(s.current_term, True, valid + 1, valid, valid_term)
            return FOLLOWER, s, [cast_reply(s.id, rpc.leader_id, reply)]
        assert entries[0][0] >= s.last_applied, "writing below the last applied index"
        s.commit_index = rpc.leader_commit
        for entry in entries:
            pre_append_log_follower(entry, s)
        try:
            s.log.write(entries)
        except WalDown:
            s.condition = Condition(predicate=_wal_down_condition, name="wal_down")
            return AWAIT_CONDITION, s, effects0
        # no reply now: the WAL's `written` event triggers it, as in Ra
        return evaluate_commit_index_follower(s, effects0)
    if found == "missing":
        reply = append_entries_reply(term, False, s)
        effects = [cast_reply(s.id, rpc.leader_id, reply), *effects0]
        s.condition = Condition(
            predicate=_follower_catchup("missing"),
            timeout_effects=list(effects),
            name="catchup_missing",
        )
        return AWAIT_CONDITION, s, effects
    # term mismatch: rewind the reply to last_applied, which is committed
    la_term = fetch_term(s.last_applied, s)
    assert la_term is not None
    reply = AppendEntriesReply(term, False, s.last_applied + 1, s.last_applied, la_term)
    effects = [cast_reply(s.id, rpc.leader_id, reply), *effects0]
    s.condition = Condition(
        predicate=_follower_catchup("term_mismatch"),
        timeout_effects=list(effects),
        name="catchup_term_mismatch",
    )
    return AWAIT_CONDITION, s, effects


def handle_follower(msg: Any, s: ServerState) -> Result:
    cur = s.current_term
    match msg:
        case AppendEntriesRpc(term=term) if term >= cur:
            return _follower_aer(msg, s)
        case AppendEntriesRpc(leader_id=leader_id):
            return FOLLOWER, s, [cast_reply(s.id, leader_id, append_entries_reply(cur, False, s))]
        case HeartbeatRpc(term=term, leader_id=leader_id, query_index=qi) if term >= cur:
            update_term(term, s)
            s.leader_id = leader_id
            return FOLLOWER, s, [cast_reply(s.id, leader_id, HeartbeatReply(qi, term))]
        case HeartbeatRpc(leader_id=leader_id, query_index=qi):
            return FOLLOWER, s, [cast_reply(s.id, leader_id, HeartbeatReply(qi, cur))]
        case ("ra_log_event", evt):
            before = s.log.last_written()
            effects = log_event(evt, s)
            if s.log.last_written() != before and s.leader_id is not None:
                reply = append_entries_reply(cur, True, s)
                return FOLLOWER, s, [cast_reply(s.id, s.leader_id, reply), *effects]
            return FOLLOWER, s, effects
        case PreVoteRpc() if s.membership != VOTER:
            return FOLLOWER, s, []
        case PreVoteRpc():
            return process_pre_vote(FOLLOWER, msg, s)
        case RequestVoteRpc() if s.membership != VOTER:
            return FOLLOWER, s, []
        case RequestVoteRpc(term=term, candidate_id=cand) if (
            term == cur and s.voted_for is not None and s.voted_for != cand
        ):
            return FOLLOWER, s, [("reply", RequestVoteResult(term, False))]
        case RequestVoteRpc(term=term, candidate_id=cand) if term >= cur:
            update_term(term, s)
            if is_candidate_log_up_to_date(
                msg.last_log_index, msg.last_log_term, s.log.last_index_term()
            ):
                update_term_and_voted_for(term, cand, s)
                return FOLLOWER, s, [("reply", RequestVoteResult(term, True))]
            return FOLLOWER, s, [("reply", RequestVoteResult(term, False))]
        case RequestVoteRpc():
            return FOLLOWER, s, [("reply", RequestVoteResult(cur, False))]
        case (_, AppendEntriesReply(term=term) | HeartbeatReply(term=term)):
            update_term(max(term, cur), s)
            return FOLLOWER, s, []
        case InstallSnapshotRpc(term=term, meta=meta) if term < cur:
            return FOLLOWER, s, [("reply", InstallSnapshotResult(cur, meta["index"], meta["term"]))]
        case InstallSnapshotRpc():
            return _follower_install_snapshot(msg, s)
        case RequestVoteResult() | PreVoteResult():
            return FOLLOWER, s, []
        case "election_timeout" | "try_become_leader":
            if s.membership != VOTER:
                return FOLLOWER, s, []
            return call_for_election(PRE_VOTE, s)
        case InfoRpc(term=term) | InfoReply(term=term) if term > cur:
            update_term(term, s)
            return FOLLOWER, s, [("next_event", msg)]
        case InfoRpc():
            return FOLLOWER, s, [versioning.info_reply_effect(msg, s)]
        case InfoReply():
            return FOLLOWER, s, []
    return FOLLOWER, s, _unsupported(msg)


def _follower_install_snapshot(rpc: InstallSnapshotRpc, s: ServerState) -> Result:
    """Start accepting a snapshot, or tell the leader to skip ahead (``ra_server``)."""
    meta = rpc.meta
    snap_idx = int(meta["index"])
    num, flag = rpc.chunk_state
    if int(meta["machine_version"]) > s.cfg.machine_version:
        # a snapshot this code cannot run: ignored, the sender times out
        return FOLLOWER, s, []
    if snap_idx > s.last_applied and num <= 1 and flag != PRE:
        s.accepting = Accepting(meta=dict(meta))
        if flag == INIT:
            # live entries will follow; entries above last_applied cannot be trusted
            s.log.set_last_index(s.last_applied)
            s.snapshot_has_live = True
        update_term(rpc.term, s)
        s.snapshot_phase = flag
        s.leader_id = rpc.leader_id
        return RECEIVE_SNAPSHOT, s, [("next_event", rpc), ("record_leader_msg", rpc.leader_id)]
    # already past the snapshot: a failed AER reply makes the leader resume from last_applied
    la_term = fetch_term(s.last_applied, s)
    assert la_term is not None
    reply = AppendEntriesReply(rpc.term, False, s.last_applied + 1, s.last_applied, la_term)
    update_term(rpc.term, s)
    return FOLLOWER, s, [("reply", reply)]


# ---------------------------------------------------------------------------
# receive_snapshot
# ---------------------------------------------------------------------------


def abort_receive(s: ServerState) -> None:
    """Drop a partial snapshot; entries written during a ``pre`` phase are undone."""
    s.accepting = None
    s.snapshot_phase = None
    s.snapshot_has_live = False
    s.awaiting_pending = None
    s.log.set_last_index(s.last_applied)


def handle_receive_snapshot(msg: Any, s: ServerState) -> Result:
    cur = s.current_term
    match msg:
        case InstallSnapshotRpc(term=term) if term >= cur:
            return _receive_chunk(msg, s)
        case InstallSnapshotRpc(meta=meta):
            return RECEIVE_SNAPSHOT, s, [
                ("reply", InstallSnapshotResult(cur, meta["index"], meta["term"]))
            ]
        case AppendEntriesRpc(term=term) | RequestVoteRpc(term=term) if term > cur:
            abort_receive(s)
            update_term(term, s)
            return FOLLOWER, s, [("next_event", msg)]
        case RequestVoteRpc():
            return RECEIVE_SNAPSHOT, s, [("reply", RequestVoteResult(cur, False))]
        case PreVoteRpc():
            return process_pre_vote(RECEIVE_SNAPSHOT, msg, s)
        case "receive_snapshot_timeout":
            abort_receive(s)
            return FOLLOWER, s, []
        case ("ra_log_event", evt):
            effects = log_event(evt, s)
            held = s.awaiting_pending
            if held is not None and not s.log.pending():
                # the live entries are durable: the held-back last chunk completes now
                s.awaiting_pending = None
                etype, rpc = held
                effects.append(("next_event", rpc) if etype is None
                               else ("next_event", etype, rpc))
            return RECEIVE_SNAPSHOT, s, effects
        case InfoRpc(term=term) | InfoReply(term=term) if term > cur:
            abort_receive(s)
            update_term(term, s)
            return FOLLOWER, s, [("next_event", msg)]
        case InfoRpc():
            return RECEIVE_SNAPSHOT, s, [versioning.empty_info_reply_effect(msg, s)]
    # heartbeats, same-term AERs, replies: dropped while receiving
    return RECEIVE_SNAPSHOT, s, []


def _receive_chunk(rpc: InstallSnapshotRpc, s: ServerState) -> Result:
    meta = rpc.meta
    snap_idx, snap_term = int(meta["index"]), int(meta["term"])
    reply = InstallSnapshotResult(s.current_term, snap_idx, snap_term)
    acc = s.accepting
    assert acc is not None, "receive_snapshot without an accepting snapshot"
    num, flag = rpc.chunk_state
    if flag == INIT:
        if s.snapshot_phase == INIT and acc.idxterm()[0] == snap_idx:
            return RECEIVE_SNAPSHOT, s, [("reply", reply)]
        # the sender restarted: start over from follower
        abort_receive(s)
        return FOLLOWER, s, [("next_event", rpc)]
    assert acc.idxterm() == (snap_idx, snap_term), "chunk of another snapshot"
    update_term(rpc.term, s)
    if flag == PRE:
        # live entries below the snapshot the follower lacks: written past its log's
        # end, leaving gaps (those above last_applied only: the rest it holds)
        for entry in rpc.data:
            if entry[0] > s.last_applied and entry[0] > s.log.last_index_term()[0]:
                s.log.write_sparse(tuple(entry))
        s.snapshot_phase = PRE
        return RECEIVE_SNAPSHOT, s, [("reply", reply)]
    if flag == NEXT:
        acc.accept_chunk(num, rpc.data)
        s.snapshot_phase = NEXT
        return RECEIVE_SNAPSHOT, s, [("reply", reply)]
    assert flag == LAST, f"unknown chunk flag {flag!r}"
    if s.snapshot_has_live and s.log.pending():
        # as Ra: live entries written in the pre phase must be durable before the
        # snapshot above them is installed; the chunk is handled again once they are
        s.awaiting_pending = (s.current_event_type, rpc)
        return RECEIVE_SNAPSHOT, s, []
    return _complete_snapshot(acc, num, rpc.data, reply, s)


def _complete_snapshot(
    acc: Accepting, num: int, data: bytes, reply: InstallSnapshotResult, s: ServerState
) -> Result:
    meta = acc.meta
    snap_idx, snap_term = acc.idxterm()
    mac_state = acc.complete(num, data)
    cfg = s.cfg
    old_meta = {"machine_version": cfg.effective_machine_version, "term": s.current_term,
                "index": s.last_applied, "cluster": dehydrate(s.cluster)}
    snap_ver = int(meta["machine_version"])
    if snap_ver > cfg.effective_machine_version:
        cfg.effective_machine_version = snap_ver
        cfg.machine_versions.insert(0, (snap_idx, snap_ver))
        cfg.effective_machine_module = ra_machine.which_module(cfg.machine, snap_ver)
    module = cfg.effective_machine_module
    live = sorted(int(i) for i in ra_machine.live_indexes(module, mac_state))
    log_effects = s.log.install_snapshot(dict(meta), mac_state, live)
    old_state = s.machine_state
    installed = ra_machine.call_snapshot_installed(module, dict(meta), mac_state,
                                                   old_meta, old_state)
    s.commit_index = snap_idx
    s.last_applied = snap_idx
    s.cluster_index_term = (snap_idx, snap_term)
    s.cluster = make_cluster(s.id, meta["cluster"])
    s.membership = get_membership(s.cluster, s.id, s.cfg.uid, s.membership)
    s.machine_state = mac_state
    s.accepting = None
    s.snapshot_phase = None
    s.snapshot_has_live = False
    s.awaiting_pending = None
    return FOLLOWER, s, [("reply", reply), *log_effects, *installed]


# ---------------------------------------------------------------------------
# await_condition
# ---------------------------------------------------------------------------


def condition_timeout_ms(s: ServerState) -> int:
    """State timeout armed on entering ``await_condition``."""
    if s.condition is not None and s.condition.duration is not None:
        return s.condition.duration
    return s.cfg.await_condition_timeout


def handle_await_condition(msg: Any, s: ServerState) -> Result:
    cond = s.condition
    assert cond is not None, "await_condition without a condition"
    match msg:
        case RequestVoteRpc():
            return FOLLOWER, s, [("next_event", msg)]
        case PreVoteRpc():
            return process_pre_vote(AWAIT_CONDITION, msg, s)
        case "election_timeout":
            if s.membership != VOTER:
                return AWAIT_CONDITION, s, []
            s.condition = None
            return call_for_election(PRE_VOTE, s)
        case "await_condition_timeout":
            s.condition = None
            if cond.predicate(msg, s):
                return cond.transition_to, s, []
            return cond.timeout_transition_to, s, list(cond.timeout_effects)
        case ("ra_log_event", evt):
            return AWAIT_CONDITION, s, log_event(evt, s)
    if cond.predicate(msg, s):
        s.condition = None
        return cond.transition_to, s, [("next_event", msg)]
    return AWAIT_CONDITION, s, []


# ---------------------------------------------------------------------------
# commands that reach a non-leader (``ra_server:handle_follower/2``)
# ---------------------------------------------------------------------------


def command_not_leader(
    raft_state: str, priority: str, command: tuple[Any, Any, Any], s: ServerState
) -> Effects:
    """What a non-leader does with a *cast* ``{command, Prio, {Type, Data, Mode}}``.

    Notifying commands are rejected with a leader hint when a leader other than
    this member is known (in ``await_condition`` always, with no hint); with no
    leader known they are dropped unanswered, as Ra drops them: the client
    learns of a new leader from the machine or resends after a silence.
    Fire-and-forget commands are forwarded to a known leader from
    follower/receive_snapshot -- the data of any command type, as a user
    command, which is what Ra's ``ra:pipeline_command`` forward makes of it --
    else dropped.
    """
    _cmd_type, data, mode = command
    if isinstance(mode, tuple) and len(mode) == 3 and mode[0] == NOTIFY:
        _, corr, pid = mode
        if raft_state == AWAIT_CONDITION:
            return [("send_ra_event", pid, ("rejected", ("not_leader", None, corr)))]
        if s.leader_id is not None and s.leader_id != s.id:
            return [("send_ra_event", pid, ("rejected", ("not_leader", s.leader_id, corr)))]
        return []
    if (
        mode == NOREPLY
        and raft_state in (FOLLOWER, RECEIVE_SNAPSHOT)
        and s.leader_id is not None
    ):
        return [("cast", s.leader_id, ("command", priority, (USR, data, NOREPLY)))]
    return []


_HANDLERS = {
    LEADER: handle_leader,
    FOLLOWER: handle_follower,
    CANDIDATE: handle_candidate,
    PRE_VOTE: handle_pre_vote,
    AWAIT_CONDITION: handle_await_condition,
    RECEIVE_SNAPSHOT: handle_receive_snapshot,
    TERMINATING_LEADER: handle_terminating_leader,
    TERMINATING_FOLLOWER: handle_terminating_follower,
}
