"""The server state of the pure core (Ra's ``ra_server_state()``): peers, config and the
per-member map that `ra_server` threads through every handler.

State objects are mutable and owned by whoever calls the handlers: a handler
may change the state it is given and returns it. Nothing here does I/O; the
log is the in-memory `ra.log.MemoryLog` (or any object with its interface).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ra import machine as ra_machine
from ra.effect_types import Effect
from ra.log import MemoryLog
from ra.snapshot import Accepting
from ra.types import VOTER, IdxTerm, ServerId

#: Defaults of Ra's ``ra_server`` and ``ra_system`` code.
DEFAULT_MAX_PIPELINE_COUNT = 4096
DEFAULT_MAX_APPEND_ENTRIES_RPC_BATCH_SIZE = 128
DEFAULT_AWAIT_CONDITION_TIMEOUT = 30_000
WAL_DOWN_CONDITION_TIMEOUT = 5_000


@dataclass
class Peer:
    """`ra_peer_state()`; one per member including self (self is not replicated to)."""

    next_index: int = 1
    match_index: int = 0
    query_index: int = 0
    #: ``[(query_index, from, query_fun)]`` oldest first, awaiting a heartbeat quorum
    queries_waiting_heartbeats: list[tuple[int, Any, Any]] = field(default_factory=list)
    #: ``[(from, query_fun)]`` parked until this term's noop is applied
    pending_consistent_queries: list[tuple[Any, Any]] = field(default_factory=list)
    commit_index_sent: int = 0
    status: Any = "normal"
    #: ``{"membership", "uid", "target"}``; ``None`` means voter
    voter_status: dict[str, Any] | None = None
    machine_version: int | None = None

    def is_voter(self) -> bool:
        return self.voter_status is None or self.voter_status.get("membership", VOTER) == VOTER


def peer_overview(peer: Peer) -> dict[str, Any]:
    """What a member's overview says about one peer, as Ra's ``cluster`` map.

    ``membership`` is spelled out (a peer without a voter status is a voter)
    so that a reader does not have to know that rule; ``voter_status`` is the
    stored map (``None`` for a plain voter), with the uid and promotion target.
    """
    vs = peer.voter_status
    return {"next_index": peer.next_index, "match_index": peer.match_index,
            "commit_index_sent": peer.commit_index_sent, "query_index": peer.query_index,
            "status": peer.status, "machine_version": peer.machine_version,
            "membership": VOTER if vs is None else vs.get("membership", VOTER),
            "voter_status": None if vs is None else dict(vs)}


def dehydrate(cluster: dict[ServerId, Peer]) -> dict[ServerId, dict[str, Any]]:
    """The form stored in cluster-change entries and snapshots: only voter status."""
    out: dict[ServerId, dict[str, Any]] = {}
    for sid, peer in cluster.items():
        out[sid] = {} if peer.voter_status is None else {"voter_status": dict(peer.voter_status)}
    return out


def hydrate(snapshot: dict[ServerId, dict[str, Any]] | Iterable[ServerId]) -> dict[ServerId, Peer]:
    """Fresh peers for a stored cluster (``make_cluster`` without self)."""
    if isinstance(snapshot, dict):
        out: dict[ServerId, Peer] = {}
        for sid, snap in snapshot.items():
            vs = snap.get("voter_status")
            out[sid] = Peer(voter_status=dict(vs) if vs is not None else None)
        return out
    return {sid: Peer() for sid in snapshot}


def make_cluster(self_id: ServerId, members: Any) -> dict[ServerId, Peer]:
    cluster = hydrate(members)
    if self_id not in cluster:
        cluster[self_id] = Peer()
    return cluster


def get_membership(
    cluster: dict[ServerId, Peer], sid: ServerId, uid: str, default: str
) -> str:
    """A member's membership, trusted only if the stored uid is this incarnation's."""
    peer = cluster.get(sid)
    if peer is not None and peer.voter_status is not None and peer.voter_status.get("uid") == uid:
        return str(peer.voter_status.get("membership", default))
    return default


def membership_in(cluster: dict[ServerId, Peer], sid: ServerId, uid: str, current: str) -> str:
    """This member's membership under a cluster config it adopts or reverts to.

    A member the config lists without a voter status is a voter (the leader
    only records a status for promotable and non-voting members); one listed
    with the status of this incarnation's uid has that status; otherwise the
    current membership stays.
    """
    peer = cluster.get(sid)
    if peer is not None and peer.voter_status is None:
        return VOTER
    return get_membership(cluster, sid, uid, current)


def voter_count(cluster: dict[ServerId, Peer]) -> int:
    return sum(1 for p in cluster.values() if p.is_voter())


def required_quorum(cluster: dict[ServerId, Peer]) -> int:
    return voter_count(cluster) // 2 + 1


@dataclass
class Condition:
    """What an ``await_condition`` server waits for (``ra_server:handle_await_condition/2``)."""

    predicate: Callable[[Any, ServerState], bool]
    transition_to: str = "follower"
    timeout_effects: list[Effect] = field(default_factory=list)
    timeout_transition_to: str = "follower"
    #: ms; ``None`` means the server's ``await_condition_timeout``
    duration: int | None = None
    name: str = ""


@dataclass
class Cfg:
    id: ServerId
    uid: str
    log_id: str
    machine: Any
    #: latest version the local code supports
    machine_version: int
    #: ``[(idx, version)]`` newest first
    machine_versions: list[tuple[int, int]]
    effective_machine_version: int
    effective_machine_module: Any
    max_pipeline_count: int = DEFAULT_MAX_PIPELINE_COUNT
    max_append_entries_rpc_batch_size: int = DEFAULT_MAX_APPEND_ENTRIES_RPC_BATCH_SIZE
    await_condition_timeout: int = DEFAULT_AWAIT_CONDITION_TIMEOUT
    system_config: dict[str, Any] = field(default_factory=dict)
    #: the members the server was started with: the config in force when
    #: neither the log nor a snapshot holds one
    initial_members: Any = ()


@dataclass
class ServerState:
    cfg: Cfg
    log: MemoryLog
    cluster: dict[ServerId, Peer]
    machine_state: Any
    rng: random.Random
    leader_id: ServerId | None = None
    cluster_change_permitted: bool = False
    cluster_index_term: IdxTerm = (0, 0)
    previous_cluster: tuple[int, int, dict[ServerId, Peer]] | None = None
    current_term: int = 0
    voted_for: ServerId | None = None
    votes: int = 0
    membership: str = VOTER
    commit_index: int = 0
    last_applied: int = 0
    condition: Condition | None = None
    pre_vote_token: Any = None
    query_index: int = 0
    #: ``[(query_index, from, query_fun)]`` oldest first, awaiting a heartbeat quorum
    queries_waiting_heartbeats: list[tuple[int, Any, Any]] = field(default_factory=list)
    #: ``[(from, query_fun)]`` parked until this term's noop is applied
    pending_consistent_queries: list[tuple[Any, Any]] = field(default_factory=list)
    #: ``(index, machine_state, conditions)`` of a release cursor waiting for
    #: its conditions (``{written, Idx}``, ``no_snapshot_sends``)
    pending_release_cursor: tuple[int, Any, list[Any]] | None = None
    #: chunk flag of the last accepted install_snapshot_rpc (receive_snapshot only)
    snapshot_phase: str | None = None
    #: the snapshot being received has live entries (an ``init`` came first)
    snapshot_has_live: bool = False
    #: a ``last`` chunk held back until the live entries written meanwhile are
    #: durable: ``(event type, rpc)``, handled again once nothing is pending
    awaiting_pending: tuple[Any, Any] | None = None
    #: how the event being handled arrived (``cast``, ``("call", from)``...), so a
    #: held-back call can be handled again later and still be answered
    current_event_type: Any = None
    #: the snapshot being received (receive_snapshot only)
    accepting: Accepting | None = None
    #: wall clock (ms) of the event being handled; set by the caller
    now_ms: int = 0

    @property
    def id(self) -> ServerId:
        return self.cfg.id

    def peers(self) -> dict[ServerId, Peer]:
        return {sid: p for sid, p in self.cluster.items() if sid != self.cfg.id}

    def voter_ids(self) -> list[ServerId]:
        return [sid for sid, p in self.cluster.items() if p.is_voter()]


def init(config: dict[str, Any]) -> ServerState:
    """Build a server from its config (``ra_server:init/1`` without recovery I/O).

    Required keys: ``id``, ``initial_members``, ``machine``. Optional:
    ``uid``, ``log`` (a `MemoryLog`), ``membership``, ``initial_machine_version``,
    ``max_pipeline_count``, ``max_append_entries_rpc_batch_size``,
    ``await_condition_timeout``, ``system_config``, ``rng`` (a `random.Random`),
    and the persisted meta ``current_term``, ``voted_for``, ``last_applied``.
    """
    sid: ServerId = config["id"]
    uid: str = config.get("uid", sid[0])
    mac = config["machine"]
    latest = ra_machine.version(mac)
    log = config.get("log") or MemoryLog()
    persisted_last_applied = int(config.get("last_applied", 0))
    recovered = log.recovery_snapshot()
    cluster_index_term: IdxTerm = (0, 0)
    if recovered is None:
        # a new cluster may start below the code's version, never above it (see docs/ra.md)
        effective = min(latest, int(config.get("initial_machine_version", 0)))
        module = ra_machine.which_module(mac, effective)
        cluster = make_cluster(sid, config["initial_members"])
        mac_state = module.init({"name": sid[0], "machine_version": effective})
        last_applied = 0
    else:
        # as ``ra_server:init/1``: the snapshot (or newer checkpoint) replaces init/1 and
        # the initial members; replay resumes after its index, at its version
        meta, mac_state = recovered
        last_applied = int(meta["index"])
        cluster = make_cluster(sid, meta["cluster"])
        cluster_index_term = (last_applied, int(meta["term"]))
        effective = int(meta["machine_version"])
        module = ra_machine.which_module(mac, effective)
    cfg = Cfg(
        id=sid,
        uid=uid,
        log_id=config.get("log_id", f"{sid[0]}@{sid[1]}"),
        machine=mac,
        machine_version=latest,
        machine_versions=[(last_applied, effective)],
        effective_machine_version=effective,
        effective_machine_module=module,
        max_pipeline_count=config.get("max_pipeline_count", DEFAULT_MAX_PIPELINE_COUNT),
        max_append_entries_rpc_batch_size=config.get(
            "max_append_entries_rpc_batch_size", DEFAULT_MAX_APPEND_ENTRIES_RPC_BATCH_SIZE
        ),
        await_condition_timeout=config.get(
            "await_condition_timeout", DEFAULT_AWAIT_CONDITION_TIMEOUT
        ),
        system_config=dict(config.get("system_config", {})),
        initial_members=config["initial_members"],
    )
    state = ServerState(
        cfg=cfg,
        log=log,
        cluster=cluster,
        machine_state=mac_state,
        rng=config.get("rng") or random.Random(0),
        current_term=int(config.get("current_term", 0)),
        voted_for=config.get("voted_for"),
        commit_index=max(persisted_last_applied, last_applied),
        last_applied=last_applied,
        cluster_index_term=cluster_index_term,
    )
    state.membership = get_membership(cluster, sid, uid, config.get("membership", VOTER))
    return state
