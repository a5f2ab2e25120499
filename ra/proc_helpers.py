"""Short-lived helper processes of a Ra server (as ``ra_server_proc`` spawns them).

A server never blocks on a peer: a vote request is one synchronous call made
by a throw-away process that casts the answer back (a timeout is simply
lost), and a snapshot is streamed chunk by chunk by a sender process whose
exit reason tells the leader whether to retry. Both are plain functions run
with `actors.spawn`.
"""

from __future__ import annotations

import logging
from typing import Any

import actors
from actors import gen
from actors.pid import CallExit, Pid, ProcessExit
from ra.snapshot import init_rpc, install_snapshot_rpcs, live_to_send, pre_rpcs
from ra.types import AppendEntriesReply, InstallSnapshotResult, ServerId

log = logging.getLogger("warren.ra")


def request_vote(server: Pid, peer: ServerId, rpc: Any, timeout_ms: int) -> None:
    """Call `peer` with a (pre-)vote request and cast its result to `server`."""
    try:
        result = gen.call(peer, rpc, timeout_ms)
    except CallExit:
        return
    actors.send(server, ("$gen_cast", result))


def send_snapshot(leader: Pid, leader_id: ServerId, peer: ServerId, meta: dict[str, Any],
                  mac_state: Any, term: int, chunk_size: int, timeout_ms: int,
                  live: list[int] | None = None) -> None:
    """Stream one snapshot to `peer`; the final reply goes to the leader.

    Every chunk is a synchronous call. Exiting normally means the result was
    delivered; any failure (timeout, peer down) exits abnormally so the
    leader backs off and retries.

    First, as Ra's sender does, it asks what machine version the peer's code
    supports: a snapshot taken at a higher version is not sent at all (the
    peer could not run it); the sender ends normally and the leader offers
    the snapshot again later, so a peer restarted with newer code gets it.

    A snapshot with `live` indexes is announced with ``init``; then the live
    entries above the peer's ``last_applied`` (read from the leader, which
    holds them below its snapshot) go in ``pre`` calls before the bytes.
    """
    try:
        theirs = gen.call(peer, ("local_call", "machine_version"), timeout_ms)
    except CallExit as exc:
        raise ProcessExit(("snapshot_send_failed", exc.reason[0]))
    if int(meta.get("machine_version", 0)) > int(theirs[1]):
        log.debug("not sending the snapshot at %s to %s: its code supports machine "
                  "version %s, the snapshot is at %s", meta.get("index"), peer, theirs[1],
                  meta.get("machine_version"))
        return
    if live and not _send_live(leader, leader_id, peer, meta, term, live, timeout_ms):
        return
    for rpc in install_snapshot_rpcs(meta, mac_state, term, leader_id, chunk_size):
        try:
            reply = gen.call(peer, rpc, timeout_ms)
        except CallExit as exc:
            raise ProcessExit(("snapshot_send_failed", exc.reason[0]))
        match reply:
            case InstallSnapshotResult() if rpc.chunk_state[1] != "last":
                continue
            case InstallSnapshotResult() | AppendEntriesReply():
                # the peer is done (or already past the snapshot): tell the leader
                actors.send(leader, ("$gen_cast", (peer, reply)))
                return
            case _:
                raise ProcessExit(("unexpected_snapshot_reply", reply))


def _call(peer: Any, req: Any, timeout_ms: int) -> Any:
    try:
        return gen.call(peer, req, timeout_ms)
    except CallExit as exc:
        raise ProcessExit(("snapshot_send_failed", exc.reason[0]))


def _send_live(leader: Pid, leader_id: ServerId, peer: ServerId, meta: dict[str, Any],
               term: int, live: list[int], timeout_ms: int) -> bool:
    """The ``init`` and ``pre`` phases; False when the peer is already past the
    snapshot (its append_entries_reply went to the leader) and nothing more is sent."""
    reply = _call(peer, init_rpc(meta, term, leader_id), timeout_ms)
    match reply:
        case AppendEntriesReply():
            actors.send(leader, ("$gen_cast", (peer, reply)))
            return False
        case InstallSnapshotResult():
            pass
        case _:
            raise ProcessExit(("unexpected_install_snapshot_result", reply))
    counters = _call(peer, ("local_call", ("counters", ["last_applied"])), timeout_ms)
    for idxs in live_to_send(live, int(counters["last_applied"])):
        read = _call(leader_id, ("local_call", ("read_entries", idxs)), timeout_ms)
        entries = list(read[1])
        if [e[0] for e in entries] != idxs:
            raise ProcessExit(("live_entries_missing", idxs))
        for rpc in pre_rpcs(meta, term, leader_id, entries):
            result = _call(peer, rpc, timeout_ms)
            if not isinstance(result, InstallSnapshotResult):
                raise ProcessExit(("unexpected_install_snapshot_result", result))
    return True
