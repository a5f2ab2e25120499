"""Consistent queries on the leader (``ra:consistent_query/2``): a read without a log write.

``consistent_aux`` takes the same path: once confirmed, its aux command runs
on the leader as an aux call (docs/ra.md, "Aux state machine").

A leader cannot answer from its own state alone: a newer leader may have
been elected without it knowing. So it bumps ``query_index``, sends a
``heartbeat_rpc`` carrying it to its peers and answers only once a voter
quorum (itself included) has acknowledged an index at least as high. Every
acknowledgement proves the peer had not moved to a higher term when it
answered, so a quorum of them proves this server was still the leader after
the query arrived. A new leader parks queries until its noop is applied,
because only then does its state include everything committed before it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ra.effect_types import Effect
from ra.state import ServerState, required_quorum
from ra.types import HeartbeatRpc

Effects = list[Effect]


@dataclass(frozen=True, slots=True)
class AuxQuery:
    """A ``consistent_aux`` request: the aux command to run once leadership is confirmed."""

    cmd: Any


def _answer(from_: Any, query_fun: Any, s: ServerState) -> tuple[Any, ...]:
    if isinstance(query_fun, AuxQuery):
        # Ra hands the aux command to the aux handler as a call whose reply is wrapped
        return ("next_event", ("call", from_),
                ("local_call", ("aux_command", ("$wrap_reply", query_fun.cmd))))
    return ("reply", from_, ("ok", query_fun(s.machine_state), s.id))


def request(from_: Any, query_fun: Any, s: ServerState) -> Effects:
    """A ``consistent_query`` call reached the leader."""
    if not s.cluster_change_permitted:
        s.pending_consistent_queries.append((from_, query_fun))
        return []
    if required_quorum(s.cluster) == 1 and s.cluster.get(s.id) is not None and (
        s.cluster[s.id].is_voter()
    ):
        return [_answer(from_, query_fun, s)]
    s.query_index += 1
    s.queries_waiting_heartbeats.append((s.query_index, from_, query_fun))
    return heartbeat_rpcs(s)


def heartbeat_rpcs(s: ServerState) -> Effects:
    """A heartbeat to every normal peer that has not yet confirmed the latest query index."""
    effects: Effects = []
    for peer_id, peer in s.peers().items():
        if peer.status == "normal" and peer.query_index < s.query_index:
            effects.append(("send_rpc", peer_id, HeartbeatRpc(s.query_index, s.current_term, s.id)))
    return effects


def agreed_query_index(s: ServerState) -> int:
    """Highest query index confirmed by a voter quorum (self counts with its own)."""
    idxs = []
    for sid, peer in s.cluster.items():
        if peer.is_voter():
            idxs.append(s.query_index if sid == s.id else peer.query_index)
    if s.id not in s.cluster:
        idxs.append(s.query_index)
    idxs.sort(reverse=True)
    return idxs[required_quorum(s.cluster) - 1] if idxs else 0


def heartbeat_reply(peer_id: Any, query_index: int, s: ServerState) -> Effects:
    """A current-term ``heartbeat_reply``: answer every query now confirmed.

    The confirmed queries are taken from the front of the waiting queue
    (lowest query index first) and answered in the reverse order, newest
    first, as Ra accumulates them.
    """
    peer = s.cluster[peer_id]
    peer.query_index = max(peer.query_index, query_index)
    agreed = agreed_query_index(s)
    confirmed: Effects = []
    while s.queries_waiting_heartbeats and s.queries_waiting_heartbeats[0][0] <= agreed:
        _, from_, query_fun = s.queries_waiting_heartbeats.pop(0)
        confirmed.append(_answer(from_, query_fun, s))
    confirmed.reverse()
    return confirmed


def flush_pending(s: ServerState) -> Effects:
    """Issue the queries parked while the new leader's noop was uncommitted.

    Each parked query gets a heartbeat round of its own (its own query index),
    as Ra submits them one by one: the newest parked query takes the lowest
    index, and the rounds of older queries come first among the effects.
    """
    parked, s.pending_consistent_queries = s.pending_consistent_queries, []
    effects: Effects = []
    for from_, query_fun in reversed(parked):
        effects = request(from_, query_fun, s) + effects
    return effects
