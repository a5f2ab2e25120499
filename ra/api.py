"""The client API of Ra (Ra's ``ra`` module; see docs/ra.md, "Client API").

Every function is called from a warren process (``with node.attached():``
or inside a spawned process). Synchronous calls follow leader redirects
transparently; the server id in a result is the one that finally answered.
Pipelined commands are casts whose outcome arrives later in the caller's
mailbox as ``("ra_event", leader, ("applied", [(corr, reply), ...]))`` or
``("ra_event", from, ("rejected", ("not_leader", leader_hint, corr)))``;
the caller follows the hint and resends. Times are milliseconds, default
5000 as in Ra.
"""

from __future__ import annotations

import base64
import os
from typing import Any

import actors
from actors import gen
from actors.pid import CallExit
from ra import system as ra_system
from ra.types import (
    AFTER_LOG_APPEND,
    AWAIT_CONSENSUS,
    NOREPLY,
    RA_CLUSTER,
    RA_JOIN,
    RA_LEAVE,
    USR,
    ServerId,
)

DEFAULT_TIMEOUT = 5000
#: errors on which a list of servers moves on to the next one (as ``ra:process_command/3`` does)
_TRY_NEXT = ("noproc", "nodedown", "shutdown", "system_not_started")


def new_uid(cluster_name: Any) -> str:
    """``ra:new_uid/1``: six url-safe chars of the name, upper-cased, and a random suffix."""
    prefix = "".join(c for c in str(cluster_name) if c.isalnum() or c in "-_")[:6].upper()
    suffix = base64.urlsafe_b64encode(os.urandom(9)).decode().rstrip("=")
    return prefix + suffix


# ---------------------------------------------------------------- calls


def _call_error(exc: CallExit, target: Any) -> Any:
    reason = exc.reason[0] if isinstance(exc.reason, tuple) else exc.reason
    if reason == "timeout":
        return ("timeout", target)
    if isinstance(reason, tuple) and reason and reason[0] == "nodedown":
        return ("error", "nodedown")
    return ("error", reason)


def _now() -> int:
    return int(actors.get_node().clock.monotonic_ms())


def _leader_call_one(server_id: ServerId, req: Any, timeout: int) -> Any:
    deadline = _now() + timeout
    target: Any = server_id
    while True:
        remaining = deadline - _now()
        if remaining <= 0:
            return ("timeout", target)
        try:
            result = gen.call(target, ("leader_call", req), remaining)
        except CallExit as exc:
            return _call_error(exc, target)
        if isinstance(result, tuple) and len(result) == 2 and result[0] == "redirect":
            target = result[1]
            continue
        return result


def _leader_call(loc: Any, req: Any, timeout: int) -> Any:
    """A leader call to one server, or to a list tried in order on failures."""
    if not isinstance(loc, list):
        return _leader_call_one(loc, req, timeout)
    errors = []
    for server_id in loc:
        result = _leader_call_one(server_id, req, timeout)
        failed = result[0] == "timeout" or (result[0] == "error" and result[1] in _TRY_NEXT)
        if not failed:
            return result
        errors.append((server_id, result))
    return ("error", ("no_more_servers_to_try", errors))


def _local_call(server_id: ServerId, req: Any, timeout: int = DEFAULT_TIMEOUT) -> Any:
    try:
        return gen.call(server_id, req, timeout)
    except CallExit as exc:
        return _call_error(exc, server_id)


def _timeout_of(opts: Any) -> tuple[int, Any]:
    if isinstance(opts, dict):
        return int(opts.get("timeout", DEFAULT_TIMEOUT)), opts.get("reply_from")
    return int(opts), None


# ------------------------------------------------------------- commands


def process_command(server_loc: Any, cmd: Any, timeout: int | dict[str, Any] = DEFAULT_TIMEOUT
                    ) -> Any:
    """``("ok", reply, leader)``, ``("error", reason)`` or ``("timeout", server)``.

    `timeout` may be a map with ``timeout`` and ``reply_from``
    (``"leader"``, ``"local"`` or ``("member", id)``).
    """
    ms, reply_from = _timeout_of(timeout)
    mode: Any = AWAIT_CONSENSUS
    if reply_from is not None:
        mode = (AWAIT_CONSENSUS, {"reply_from": reply_from})
    return _leader_call(server_loc, ("command", "normal", (USR, cmd, mode)), ms)


def pipeline_command(server_id: ServerId, cmd: Any, correlation: Any = None,
                     priority: str = "low") -> str:
    """Cast a command; with a correlation the outcome comes back as an ``ra_event``.

    The priority defaults to ``low``, as Ra's ``pipeline_command/2,3`` do.
    """
    mode: Any = NOREPLY if correlation is None else ("notify", correlation, actors.self())
    return gen.cast(server_id, ("command", priority, (USR, cmd, mode)))


# -------------------------------------------------------------- queries


def _query_request(query_fun: Any, timeout: int | dict[str, Any]) -> tuple[Any, int]:
    """The server request and the call timeout of a ``local_query``/``leader_query``.

    `timeout` is milliseconds or a map with ``timeout`` and ``condition``
    (``("applied", (idx, term))``: run the query once that entry is applied
    on the member that runs it).
    """
    if isinstance(timeout, dict):
        options = {k: v for k, v in timeout.items() if k != "timeout"}
        return ("local_query", query_fun, options), int(timeout.get("timeout", DEFAULT_TIMEOUT))
    return ("local_query", query_fun), int(timeout)


def local_query(server_id: ServerId, query_fun: Any,
                timeout: int | dict[str, Any] = DEFAULT_TIMEOUT) -> Any:
    """``("ok", ((last_applied, current_term), result), leader | "not_known")``.

    With ``{"condition": ("applied", (idx, term))}`` the member answers once it
    has applied ``idx`` with term ``term``; until then the caller waits (up to
    its timeout, then ``("timeout", server_id)``).
    """
    req, ms = _query_request(query_fun, timeout)
    return _local_call(server_id, ("local_call", req), ms)


def leader_query(server_loc: Any, query_fun: Any,
                 timeout: int | dict[str, Any] = DEFAULT_TIMEOUT) -> Any:
    """`local_query` run on the leader (redirected there); the same options."""
    req, ms = _query_request(query_fun, timeout)
    return _leader_call(server_loc, req, ms)


def consistent_query(server_loc: Any, query_fun: Any, timeout: int = DEFAULT_TIMEOUT) -> Any:
    """``("ok", result, leader)`` after a heartbeat quorum confirmed leadership."""
    return _leader_call(server_loc, ("consistent_query", query_fun), timeout)


def consistent_aux(server_loc: Any, aux_cmd: Any, timeout: int = DEFAULT_TIMEOUT) -> Any:
    """``("ok", reply, leader)``: the leader's aux handler answers `aux_cmd` as a
    call, once a heartbeat quorum confirmed its leadership (as `consistent_query`)."""
    return _leader_call(server_loc, ("consistent_aux", aux_cmd), timeout)


def members(server_loc: Any, timeout: int = DEFAULT_TIMEOUT) -> Any:
    """``("ok", [server_id], leader)``: the leader's view, or ``("local", id)`` for one member's."""
    if isinstance(server_loc, tuple) and len(server_loc) == 2 and server_loc[0] == "local":
        return _local_call(server_loc[1], ("local_call", "members"), timeout)
    return _leader_call(server_loc, "members", timeout)


def member_overview(server_id: ServerId, timeout: int = DEFAULT_TIMEOUT) -> Any:
    return _local_call(server_id, ("local_call", "overview"), timeout)


def ping(server_id: ServerId, timeout: int = DEFAULT_TIMEOUT) -> Any:
    """``("pong", raft_state)``."""
    return _local_call(server_id, "ping", timeout)


def aux_command(server_id: ServerId, cmd: Any, timeout: int = DEFAULT_TIMEOUT) -> Any:
    return _local_call(server_id, ("local_call", ("aux_command", cmd)), timeout)


def cast_aux_command(server_id: ServerId, cmd: Any) -> str:
    return gen.cast(server_id, ("aux_command", cmd))


# ----------------------------------------------------------- membership


def add_member(server_loc: Any, new: Any, timeout: int = DEFAULT_TIMEOUT) -> Any:
    """Append a ``'$ra_join'``; ``("ok", (idx, term), leader)`` once appended.

    `new` is a server id (joins as a voter) or ``{"id", "membership", "uid"}``.
    The joining server must be started separately with `start_server`.
    """
    return _leader_call(server_loc, ("command", "normal", (RA_JOIN, new, AFTER_LOG_APPEND)),
                        timeout)


def remove_member(server_loc: Any, server_id: ServerId, timeout: int = DEFAULT_TIMEOUT) -> Any:
    return _leader_call(server_loc, ("command", "normal", (RA_LEAVE, server_id,
                                                           AFTER_LOG_APPEND)), timeout)


def transfer_leadership(server_id: ServerId, target: ServerId,
                        timeout: int = DEFAULT_TIMEOUT) -> Any:
    """``"ok"``, ``"already_leader"`` or ``("error", reason)`` with reason
    ``unknown_member``, ``non_voter`` or ``not_up_to_date``."""
    return _leader_call(server_id, ("transfer_leadership", target), timeout)


def trigger_compaction(server_id: ServerId) -> str:
    """``ra:trigger_compaction/1``: the member runs a major compaction of its log
    now (segments below its snapshot rewritten to hold only live entries)."""
    return gen.cast(server_id, ("ra_log_event", "major_compaction"))


def trigger_election(server_id: ServerId, timeout: int = DEFAULT_TIMEOUT) -> Any:
    """Start an election now (follower/await_condition); required for brand-new servers."""
    return _local_call(server_id, "trigger_election", timeout)


# ---------------------------------------------------- server lifecycle


def _rpc_result(result: Any) -> Any:
    if isinstance(result, tuple) and result and result[0] == "badrpc":
        return ("error", result[1])
    return result


def start_server(system: str, config: dict[str, Any]) -> Any:
    """Start one member from its config (``id``, ``uid``, ``cluster_name``,
    ``initial_members``, ``machine`` and optional keys of Ra's ``ra_server:ra_server_config()``)."""
    node = config["id"][1]
    return _rpc_result(ra_system.rpc(node, ra_system.start_server_local, system, config))


def restart_server(system: str, server_id: ServerId,
                   mutable_config: dict[str, Any] | None = None) -> Any:
    return _rpc_result(ra_system.rpc(server_id[1], ra_system.restart_server_local, system,
                                     server_id[0], mutable_config))


def stop_server(system: str, server_id: ServerId) -> Any:
    return _rpc_result(ra_system.rpc(server_id[1], ra_system.stop_server_local, system,
                                     server_id[0]))


def force_delete_server(system: str, server_id: ServerId) -> Any:
    return _rpc_result(ra_system.rpc(server_id[1], ra_system.force_delete_server_local, system,
                                     server_id[0]))


def start_cluster(system: str, cluster_name: Any, machine: Any, server_ids: list[ServerId],
                  timeout: int = DEFAULT_TIMEOUT,
                  server_config: dict[str, Any] | None = None) -> Any:
    """Start every member with a fresh uid, elect the first started (local node
    first) and wait for the cluster to answer ``members``.

    ``("ok", started, not_started)``; if nothing started or no leader
    emerged, the started members are force-deleted and the result is
    ``("error", "cluster_not_formed")``. `server_config` adds optional server
    config keys (``tick_timeout``, ``log_init_args`` ...) to every member.
    """
    local = actors.node()
    ordered = sorted(server_ids, key=lambda sid: sid[1] != local)
    started: list[ServerId] = []
    not_started: list[ServerId] = []
    for sid in ordered:
        uid = new_uid(cluster_name)
        config = {**(server_config or {}), "id": sid, "uid": uid, "cluster_name": cluster_name,
                  "initial_members": list(server_ids), "machine": machine}
        config["log_init_args"] = {**config.get("log_init_args", {})}
        result = start_server(system, config)
        (started if result == "ok" else not_started).append(sid)
    if started:
        trigger_election(started[0], timeout)
        if members(started, timeout * len(server_ids))[0] == "ok":
            return ("ok", started, not_started)
    for sid in started:
        force_delete_server(system, sid)
    return ("error", "cluster_not_formed")


def delete_cluster(server_ids: list[ServerId], timeout: int = DEFAULT_TIMEOUT,
                   system: str = "default") -> Any:
    """Commit the cluster's ``'$ra_cluster' delete`` entry; ``("ok", leader)``.

    Deletion is itself replicated (docs/ra.md, "Cluster deletion"): every member that
    applies the entry runs the machine's ``state_enter(eol)`` effects, then
    stops and deletes its data, the leader last, once every member has the
    entry. The call returns when the leader applied it, so members may still
    be finishing. A quorum must be up (``("error", "timeout")`` otherwise). A
    member that is down meanwhile keeps its data, and the leader waits for it;
    `force_delete_server` removes such a member. `system` is accepted for
    callers that pass it; the entry reaches every member through Raft.
    """
    del system
    cmd = ("command", "normal", (RA_CLUSTER, "delete", AWAIT_CONSENSUS))
    match _leader_call(list(server_ids), cmd, timeout):
        case ("ok", _reply, leader):
            return ("ok", leader)
        case ("timeout", _):
            return ("error", "timeout")
        case other:
            return other
