"""Cluster deletion (docs/ra.md, "Cluster deletion"): when a member of a deleted cluster is done.

Applying the ``'$ra_cluster' delete`` entry ends a cluster's life on every
member, but a member may only delete its data once nobody needs it any more:
the leader keeps replicating (``terminating_leader``) until every peer holds
and knows the commit of the delete entry, so that each of them applies it
too; a follower (``terminating_follower``) waits until everything in its log
is written, so that its own acknowledgement to the leader was true.
"""

from __future__ import annotations

from ra.effect_types import Effect
from ra.replication import make_rpcs
from ra.state import ServerState
from ra.types import TERMINATING_FOLLOWER, TERMINATING_LEADER

Effects = list[Effect]

#: Returned instead of a Raft state when a member of a deleted cluster is done
#: (``{stop, {shutdown, delete}}``): the caller stops it and deletes its data.
STOP_DELETE = "stop_delete"


def is_fully_persisted(s: ServerState) -> bool:
    """Every entry of the log is written (``last_written == last_index``)."""
    return s.log.last_written() == s.log.last_index_term()


def is_fully_replicated(s: ServerState) -> bool:
    """Every peer matched and was sent the leader's commit index."""
    peers = list(s.peers().values())
    if not peers:
        return True
    ci = s.commit_index
    return (min(p.match_index for p in peers) >= ci
            and min(p.commit_index_sent for p in peers) >= ci)


def leader_applied_delete(s: ServerState, effects: Effects) -> tuple[str, ServerState, Effects]:
    """The leader applied the delete entry: stop at once if every peer has it,
    else keep replicating from ``terminating_leader``."""
    effects = [*effects, *make_rpcs(s)]
    if is_fully_replicated(s):
        return STOP_DELETE, s, effects
    return TERMINATING_LEADER, s, effects


def after_terminating_leader(s: ServerState, effects: Effects) -> tuple[str, ServerState, Effects]:
    """Re-check after each event of a terminating leader; re-send to stale peers."""
    if is_fully_replicated(s):
        return STOP_DELETE, s, effects
    return TERMINATING_LEADER, s, [*effects, *make_rpcs(s)]


def after_terminating_follower(
    s: ServerState, effects: Effects
) -> tuple[str, ServerState, Effects]:
    if is_fully_persisted(s):
        return STOP_DELETE, s, effects
    return TERMINATING_FOLLOWER, s, effects
