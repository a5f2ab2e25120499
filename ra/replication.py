"""Leader-side replication and commit (Ra's ``ra_server``).

The leader keeps no timer per follower: it pipelines AppendEntries as long
as a peer has fewer than ``max_pipeline_count`` entries in flight, and a
stale peer is simply re-sent one AER on the next tick. Commit counts the
leader's own *written* index, never its appended one, so an entry is only
committed once a quorum holds it on disk.
"""

from __future__ import annotations

from typing import Any

from ra.apply import apply_to
from ra.effect_types import Effect
from ra.packed import PackedEntries
from ra.release_cursor import maybe_emit_pending_release_cursor
from ra.state import Peer, ServerState
from ra.types import AppendEntriesReply, AppendEntriesRpc, ServerId

Effects = list[Effect]


def append_entries_reply(term: int, success: bool, s: ServerState) -> AppendEntriesReply:
    """A follower's reply: `next_index` from the appended log, `last_*` from the written one."""
    lw_idx, lw_term = s.log.last_written()
    last_idx, _ = s.log.last_index_term()
    return AppendEntriesReply(
        term=term, success=success, next_index=last_idx + 1, last_index=lw_idx, last_term=lw_term
    )


def cast_reply(from_id: ServerId, to: ServerId, msg: Any) -> tuple[Any, ...]:
    """``{cast, To, {From, Msg}}``: how followers answer AERs and heartbeats."""
    return ("cast", to, (from_id, msg))


def fetch_term(idx: int, s: ServerState) -> int | None:
    """Term of `idx` from the log, or from the snapshot if it is exactly there."""
    term = s.log.fetch_term(idx)
    if term is not None:
        return term
    snap = s.log.snapshot_index_term()
    if snap is not None and snap[0] == idx:
        return snap[1]
    return None


def make_rpc_effect(peer_id: ServerId, peer: Peer, batch: int, s: ServerState,
                    shared: list[Any] | None = None) -> tuple[int, Any]:
    """One AER (or a snapshot send) for `peer`; returns ``(new_next_index, effect)``.

    `shared` holds the last entries sent in this round as ``[first, last, entries]``:
    a peer that needs the same run gets the same `PackedEntries`, pickled once for
    all of them (Ra reuses the previous peer's entries the same way).
    """
    prev_idx = peer.next_index - 1
    prev_term = s.log.fetch_term(prev_idx)
    if prev_term is None:
        snap = s.log.snapshot_index_term()
        if snap is None:
            raise AssertionError(
                f"{s.cfg.log_id}: no entry or snapshot at {prev_idx} for peer {peer_id}"
            )
        if snap[0] == prev_idx:
            prev_term = snap[1]
        else:
            # next_index is not advanced: entries follow once the snapshot is in
            return snap[0], send_snapshot_effect(peer_id, s)
    last_idx, _ = s.log.last_index_term()
    upto = min(last_idx, prev_idx + batch)
    entries: tuple[Any, ...]
    if upto <= prev_idx:
        entries = ()  # only the commit index to tell
    elif shared and shared[0] == prev_idx + 1 and shared[1] == upto:
        entries = shared[2]
    else:
        entries = PackedEntries(s.log.fold(prev_idx + 1, upto))
        if shared is not None:
            shared[:] = [prev_idx + 1, upto, entries]
    rpc = AppendEntriesRpc(
        term=s.current_term,
        leader_id=s.cfg.id,
        leader_commit=s.commit_index,
        prev_log_index=prev_idx,
        prev_log_term=prev_term,
        entries=entries,
    )
    return upto + 1, ("send_rpc", peer_id, rpc)


def send_snapshot_effect(peer_id: ServerId, s: ServerState) -> tuple[Any, ...]:
    """``{send_snapshot, Peer, {SnapState, LeaderId, Term}}``: the shell starts a
    sender (reading the snapshot from the log) and marks the peer
    ``{sending_snapshot, Pid, Attempt}`` through `update_peer`."""
    snap = s.log.snapshot_index_term()
    return ("send_snapshot", peer_id, (snap, s.cfg.id, s.current_term))


def make_pipelined_rpc_effects(
    s: ServerState, effects: Effects, force: bool = False
) -> tuple[bool, Effects]:
    """Send to every normal peer that lacks entries or the latest commit index.

    Returns ``(more, effects)``: `more` says another round could send more
    (the leader then re-enters ``pipeline_rpcs`` as a next event).
    """
    cfg = s.cfg
    next_log_idx = s.log.next_index()
    max_count = cfg.max_pipeline_count
    more = False
    rpcs: Effects = []
    shared: list[Any] = []
    for peer_id, peer in s.cluster.items():
        if not _rpc_due(peer_id, peer, s, next_log_idx, force):
            continue
        in_flight = peer.next_index - peer.match_index - 1
        batch = max(1, min(cfg.max_append_entries_rpc_batch_size, max_count - in_flight))
        new_next, eff = make_rpc_effect(peer_id, peer, batch, s, shared)
        assert new_next >= peer.next_index or eff[0] == "send_snapshot"
        if eff[0] == "send_rpc":
            peer.next_index = new_next
        peer.commit_index_sent = s.commit_index
        new_in_flight = peer.next_index - peer.match_index - 1
        more = more or (peer.next_index < next_log_idx and new_in_flight < max_count)
        rpcs.append(eff)
    if shared:
        s.log.sent_run = shared[2]
    return more, rpcs + effects


def _rpc_due(peer_id: ServerId, peer: Peer, s: ServerState, next_log_idx: int,
             force: bool) -> bool:
    """Whether `make_pipelined_rpc_effects` sends to this peer now."""
    if peer_id == s.cfg.id or peer.status != "normal":
        return False
    if not (peer.next_index < next_log_idx or peer.commit_index_sent < s.commit_index):
        return False
    return force or peer.next_index - peer.match_index - 1 < s.cfg.max_pipeline_count


def pipeline_due(s: ServerState) -> bool:
    """Whether a ``pipeline_rpcs`` event would send anything (to any peer).

    The leader re-enters ``pipeline_rpcs`` after every reply and every WAL write, as
    Ra does; most find every peer up to date. The shell asks this first and skips
    handing such an event to the core, whose answer would be no effect and no change."""
    next_log_idx = s.log.next_index()
    for peer_id, peer in s.cluster.items():  # a loop, not any(): no generator per event
        if _rpc_due(peer_id, peer, s, next_log_idx, False):
            return True
    return False


def stale_peers(s: ServerState) -> list[ServerId]:
    """Normal peers with unconfirmed entries or an outdated commit index."""
    out = []
    for peer_id, peer in s.cluster.items():
        if peer_id == s.cfg.id or peer.status != "normal":
            continue
        if peer.match_index < peer.next_index - 1 or peer.commit_index_sent < s.commit_index:
            out.append(peer_id)
    return out


def make_rpcs_for(peer_ids: list[ServerId], s: ServerState) -> Effects:
    """One single-entry AER per peer: used to assert leadership, not to replicate."""
    effects: Effects = []
    for peer_id in peer_ids:
        peer = s.cluster[peer_id]
        new_next, eff = make_rpc_effect(peer_id, peer, 1, s)
        if eff[0] == "send_rpc":
            peer.next_index = new_next
        peer.commit_index_sent = s.commit_index
        effects.append(eff)
    return effects


def make_rpcs(s: ServerState) -> Effects:
    """Tick: re-send to stale peers (dropped messages are recovered this way)."""
    return make_rpcs_for(stale_peers(s), s)


def make_all_rpcs(s: ServerState) -> Effects:
    """Answer a pre-vote with an AER to every reachable peer (``ra_server:handle_leader/2``)."""
    cancel: Effects = []
    targets: list[ServerId] = []
    for peer_id, peer in s.peers().items():
        if isinstance(peer.status, tuple) and peer.status[0] == "snapshot_backoff":
            cancel.append(("cancel_snapshot_retry_timer", peer_id))
            targets.append(peer_id)
        elif peer.status == "normal":
            targets.append(peer_id)
    return cancel + make_rpcs_for(targets, s)


def match_indexes(s: ServerState) -> list[int]:
    """The leader's *written* index plus every voter peer's match index."""
    idxs = [s.log.last_written()[0]]
    for peer_id, peer in s.cluster.items():
        if peer_id != s.cfg.id and peer.is_voter():
            idxs.append(peer.match_index)
    return idxs


def agreed_commit(indexes: list[int]) -> int:
    ordered = sorted(indexes, reverse=True)
    return ordered[len(ordered) // 2]


def increment_commit_index(s: ServerState) -> None:
    """Raft §5.4.2: only an entry of the current term is committed by counting.

    As in Ra there is no monotonicity guard: if a quorum's agreed index drops
    (a peer reported data loss, a member was added) while still in the current
    term, the commit index follows it down. Nothing applied is undone.
    """
    candidate = agreed_commit(match_indexes(s))
    if fetch_term(candidate, s) == s.current_term:
        s.commit_index = candidate


def evaluate_quorum(s: ServerState, effects: Effects) -> Effects:
    before = s.commit_index
    increment_commit_index(s)
    if s.commit_index > before:
        effects = [("aux", "eval"), *effects]
    return maybe_emit_pending_release_cursor(s, apply_to(s.commit_index, s, effects))


def initialise_peers(s: ServerState) -> None:
    """A new leader starts every peer at its own next index, nothing matched."""
    next_idx = s.log.next_index()
    for sid, peer in list(s.cluster.items()):
        s.cluster[sid] = Peer(
            next_index=next_idx,
            voter_status=peer.voter_status,
            machine_version=peer.machine_version,
        )
