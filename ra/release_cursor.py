"""Snapshot hints from the machine: ``release_cursor`` and ``checkpoint`` (``ra_machine`` effects).

Every member applies every entry, so every member sees the same hints and
snapshots its own log independently; nothing here is replicated. The shell
calls `handle_effect` when it executes one of these effects and then runs
the effects returned (a ``bg_work`` write, whose completion comes back as a
``snapshot_written`` log event).

A release cursor may carry conditions. They exist because a snapshot taken
too early can hurt: ``{written, Idx}`` waits until the local log has fsynced
`Idx` (a snapshot must never cover entries that are not durable locally),
and ``no_snapshot_sends`` waits until the leader is not streaming a snapshot
(replacing it mid-stream would waste the transfer). An unmet hint is stashed
in ``pending_release_cursor`` (a newer one replaces it) and re-checked after
written events, applies and snapshot-send completions.

The machine's live indexes for the state (``ra_machine:live_indexes``) go with
every snapshot and checkpoint write: the log keeps those entries below it.
"""

from __future__ import annotations

from typing import Any

from ra import machine as ra_machine
from ra.effect_types import Effect
from ra.state import ServerState, dehydrate

Effects = list[Effect]


def index_machine_version(idx: int, s: ServerState) -> int:
    """The machine version in force at `idx` (``machine_versions`` is newest first)."""
    for v_idx, ver in s.cfg.machine_versions:
        if v_idx <= idx:
            return ver
    return s.cfg.machine_versions[-1][1]


def check_condition(cond: Any, s: ServerState) -> bool:
    match cond:
        case ("written", idx):
            return bool(idx <= s.log.last_written()[0])
        case "no_snapshot_sends":
            return not any(
                isinstance(p.status, tuple) and p.status[0] == "sending_snapshot"
                for p in s.cluster.values()
            )
    raise ValueError(f"unknown release_cursor condition {cond!r}")


def live_indexes(ver: int, mac_state: Any, s: ServerState) -> list[int]:
    """The live indexes of `mac_state` as the machine of version `ver` names them."""
    module = ra_machine.which_module(s.cfg.machine, ver)
    return sorted(int(i) for i in ra_machine.live_indexes(module, mac_state))


def _do_update(idx: int, mac_state: Any, s: ServerState) -> Effects:
    ver = index_machine_version(idx, s)
    return s.log.update_release_cursor(idx, dehydrate(s.cluster), ver, mac_state,
                                       live_indexes(ver, mac_state, s))


def update_release_cursor(
    idx: int, mac_state: Any, opts: dict[str, Any] | None, s: ServerState
) -> Effects:
    conds = list((opts or {}).get("condition", []))
    if conds and not all(check_condition(c, s) for c in conds):
        s.pending_release_cursor = (idx, mac_state, conds)
        return []
    return _do_update(idx, mac_state, s)


def maybe_emit_pending_release_cursor(s: ServerState, effects: Effects) -> Effects:
    """Process a stashed release cursor if its conditions now hold."""
    pending = s.pending_release_cursor
    if pending is None:
        return effects
    idx, mac_state, conds = pending
    if not all(check_condition(c, s) for c in conds):
        return effects
    s.pending_release_cursor = None
    return _do_update(idx, mac_state, s) + effects


def checkpoint(idx: int, mac_state: Any, s: ServerState) -> Effects:
    ver = index_machine_version(idx, s)
    return s.log.checkpoint(idx, dehydrate(s.cluster), ver, mac_state,
                            live_indexes(ver, mac_state, s))


def promote_checkpoint(idx: int, s: ServerState) -> Effects:
    return s.log.promote_checkpoint(idx)


def handle_effect(effect: Any, s: ServerState) -> Effects:
    """Execute a machine's snapshot hint on this member; returns follow-up effects."""
    match effect:
        case ("release_cursor", idx):
            return promote_checkpoint(idx, s)
        case ("release_cursor", idx, mac_state):
            return update_release_cursor(idx, mac_state, None, s)
        case ("release_cursor", idx, mac_state, opts):
            return update_release_cursor(idx, mac_state, opts, s)
        case ("checkpoint", idx, mac_state):
            return checkpoint(idx, mac_state, s)
    raise ValueError(f"not a snapshot effect: {effect!r}")
