"""Who executes an effect (Ra's ``ra_server_proc`` effect handling).

Every member applies every committed entry, so every member sees the same
machine effects; whether it *executes* one depends on its Raft state, its
node and its membership. Keeping this decision a pure function lets the
process shell, the simulation and the tests share one definition.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from ra.effect_types import Effect, UnknownEffect
from ra.types import LEADER, VOTER

#: Effects that every member executes in every state.
_EVERY_MEMBER = frozenset(
    {
        "release_cursor",
        "checkpoint",
        "aux",
        "try_append",
        "demonitor",
        # internal effects, executed by whichever state emitted them
        "send_rpc",
        "cast",
        "next_event",
        "send_vote_requests",
        "record_leader_msg",
        "start_snapshot_retry_timer",
        "cancel_snapshot_retry_timer",
        "bg_work",
        "send_ra_event",
    }
)
#: Effects only a leader executes.
_LEADER_ONLY = frozenset({"mod_call", "append", "timer", "send_snapshot", "notify"})
_EVERY_MEMBER_ATOMS = frozenset({"garbage_collection", "start_election_timeout"})


def always_executes(effect: Effect) -> bool:
    """True for an effect every member runs whatever its state, node and membership.

    The shell asks this first and skips gathering `executes`' arguments (the
    voters' nodes, the member ids) for most of a replicating leader's effects:
    its AppendEntries and replies are ``send_rpc`` and ``cast``. None of these
    tags has a case of its own in `executes`, so both always agree.
    """
    return isinstance(effect, tuple) and bool(effect) and effect[0] in _EVERY_MEMBER


def default_node_of(target: Any, own_node: str) -> str:
    """Node of a send target: ``(name, node)`` ids, registered names, pids.

    A pid is anything with a ``node`` attribute; a bare name is registered
    locally, so it means the executing member's own node.
    """
    if isinstance(target, tuple) and len(target) == 2 and isinstance(target[1], str):
        return target[1]
    if isinstance(target, str):
        return own_node
    node = getattr(target, "node", None)
    if node is None:
        raise TypeError(f"cannot tell the node of {target!r}")
    return str(node)


def can_execute_locally(
    raft_state: str,
    target_node: str,
    own_node: str,
    membership: str,
    voter_nodes: Collection[str],
) -> bool:
    """The *local rule* (``can_execute_locally`` in ra_server_proc).

    The leader executes when the target is on its own node or when no voter
    lives on the target's node (non-voters never execute local effects, so
    the leader stands in for them). Any other member executes only for its
    own node, and only if it is a voter.
    """
    if raft_state == LEADER:
        return target_node == own_node or target_node not in voter_nodes
    return target_node == own_node and membership == VOTER


def _has_local(opts: Any) -> bool:
    if isinstance(opts, str):
        return opts == "local"
    return "local" in opts


def executes(
    effect: Effect,
    raft_state: str,
    own_node: str,
    membership: str,
    voter_nodes: Collection[str],
    *,
    own_id: Any = None,
    member_ids: Collection[Any] = (),
    node_of: Callable[[Any, str], str] = default_node_of,
) -> bool:
    """Whether the member described by the arguments executes `effect`.

    `voter_nodes` are the nodes hosting voters of the cluster (the leader's
    view); `member_ids` are all member ids, needed for ``reply_from =>
    {member, Id}``. An effect that is not one of `Effect` raises `UnknownEffect`
    (Ra's shell ignores it; warren's effects are a closed set, so an unknown
    one is a bug in whoever emitted it).
    """
    if isinstance(effect, str):
        if effect in _EVERY_MEMBER_ATOMS:
            return True
        raise UnknownEffect(effect, "ra.effects.executes")
    if not isinstance(effect, tuple) or not effect:
        raise UnknownEffect(effect, "ra.effects.executes")
    tag = effect[0]
    is_leader = raft_state == LEADER
    match effect:
        case ("send_msg", _to, _msg):
            return is_leader
        case ("send_msg", to, _msg, opts):
            if _has_local(opts):
                return can_execute_locally(
                    raft_state, node_of(to, own_node), own_node, membership, voter_nodes
                )
            return is_leader
        case ("log" | "log_ext", _idxs, _fun, ("local", node)):
            return can_execute_locally(raft_state, node, own_node, membership, voter_nodes)
        case ("log", _idxs, _fun):
            return is_leader
        case ("monitor", _kind, _target):
            return is_leader
        case ("monitor", _kind, component, _target):
            return is_leader if component == "machine" else True
        case ("reply", _reply):
            return True
        case ("reply", _from, _reply):
            return is_leader
        case ("reply", from_, _reply, replier):
            return _reply_from_executes(
                replier, from_, raft_state, own_node, membership, voter_nodes,
                own_id, member_ids, node_of,
            )
    if tag in _LEADER_ONLY:
        return is_leader
    if tag in _EVERY_MEMBER:
        return True
    raise UnknownEffect(effect, "ra.effects.executes")


def _reply_from_executes(
    replier: Any,
    from_: Any,
    raft_state: str,
    own_node: str,
    membership: str,
    voter_nodes: Collection[str],
    own_id: Any,
    member_ids: Collection[Any],
    node_of: Callable[[Any, str], str],
) -> bool:
    """``reply_from`` of ``ra:process_command/3``: leader, the caller's local voter, or a member."""
    if replier == "leader":
        return raft_state == LEADER
    if replier == "local":
        pid = from_[0] if isinstance(from_, tuple) else from_
        return can_execute_locally(
            raft_state, node_of(pid, own_node), own_node, membership, voter_nodes
        )
    if isinstance(replier, tuple) and len(replier) == 2 and replier[0] == "member":
        member = replier[1]
        if member == own_id:
            return True
        return raft_state == LEADER and member not in member_ids
    return False
