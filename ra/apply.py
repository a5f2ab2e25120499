"""The apply loop (Ra's ``ra_server:apply_to/5``): committed entries into the machine.

Every member runs this for every committed entry, in index order. It builds
the Meta map, calls the machine, and turns replies into effects according to
each command's reply mode; which member executes them is decided later
(`ra.effects`). ``applied`` notifications are batched per pid for the whole
apply batch and lead the effect list, so a client learns of a batch in one
``ra_event`` with its correlations in log order.
"""

from __future__ import annotations

from typing import Any

from ra import machine as ra_machine
from ra.effect_types import Effect
from ra.state import ServerState, get_membership, hydrate
from ra.trace_context import TraceContext
from ra.types import (
    AWAIT_CONSENSUS,
    NOOP,
    NOTIFY,
    RA_CLUSTER,
    RA_CLUSTER_CHANGE,
    RA_NO_REPLY,
    USR,
    Entry,
)

Effects = list[Effect]


class DeleteAndTerminate(Exception):
    """The ``'$ra_cluster' delete`` entry was applied (docs/ra.md, "Cluster deletion").

    Ra throws out of its apply loop here, so nothing after the poison pill is
    applied; the handler that was applying catches it and moves the server to
    a terminating state. `effects` are those of the batch so far, led by the
    machine's ``state_enter(eol)`` effects.
    """

    def __init__(self, effects: Effects) -> None:
        super().__init__("delete_and_terminate")
        self.effects = effects


def server_trace_context(s: ServerState, index: int | None = None) -> TraceContext:
    """The context a tracing machine is handed: server `s` at the entry `index` (None
    for a state entry). Built only for a machine that is `ra.machine.tracing`."""
    return TraceContext(term=s.current_term, leader=s.leader_id, cluster=tuple(s.cluster),
                        last_applied=s.last_applied, index=index, log=s.log)


def machine_state_enter(ra_state: str, s: ServerState) -> Effects:
    """The machine's ``state_enter`` on server `s`, handed the server's context if the
    machine is tracing."""
    module = s.cfg.effective_machine_module
    ctx = server_trace_context(s) if ra_machine.tracing(module) else None
    return ra_machine.call_state_enter(module, ra_state, s.machine_state, ctx)


def augment_command_meta(
    idx: int, term: int, mac_ver: int, reply_mode: Any, cmd_meta: dict[str, Any]
) -> dict[str, Any]:
    """The Meta map handed to ``apply/3``: ``ts`` is renamed ``system_time``."""
    meta: dict[str, Any] = {"index": idx, "machine_version": mac_ver, "term": term, **cmd_meta}
    if "ts" in meta:
        meta["system_time"] = meta.pop("ts")
    if reply_mode is not None:
        meta["reply_mode"] = reply_mode
    return meta


def add_reply(
    cmd_meta: dict[str, Any],
    reply: Any,
    reply_mode: Any,
    effects: Effects,
    notifys: dict[Any, list[tuple[Any, Any]]],
) -> None:
    """Turn a machine reply into a reply effect or a pending notification."""
    if reply == RA_NO_REPLY:
        return
    from_ = cmd_meta.get("from")
    if reply_mode == AWAIT_CONSENSUS and from_ is not None:
        effects.append(("reply", from_, ("wrap_reply", reply)))
        return
    if isinstance(reply_mode, tuple) and reply_mode and reply_mode[0] == AWAIT_CONSENSUS:
        if from_ is None:
            return
        opts = reply_mode[1] if isinstance(reply_mode[1], dict) else {}
        replier = opts.get("reply_from", "leader")
        if not (replier == "local" or (isinstance(replier, tuple) and replier[0] == "member")):
            replier = "leader"
        effects.append(("reply", from_, ("wrap_reply", reply), replier))
        return
    if isinstance(reply_mode, tuple) and len(reply_mode) == 3 and reply_mode[0] == NOTIFY:
        _, corr, pid = reply_mode
        notifys.setdefault(pid, []).append((corr, reply))


def apply_to(target: int, s: ServerState, effects_in: Effects) -> Effects:
    """Apply ``last_applied+1 .. min(last_index, target)``; return the effects.

    Order: ``("notify", {pid: [(corr, reply), ...]})`` first, then
    `effects_in`, then per entry its machine effects followed by its reply.
    Stops early if a noop announced a machine version this code lacks.
    Raises `DeleteAndTerminate` once the cluster's delete entry is applied.
    A machine that is `ra.machine.tracing` (asked once per batch, and again after a
    noop switched the module) is handed each entry's `TraceContext`.
    """
    notifys: dict[Any, list[tuple[Any, Any]]] = {}
    out: Effects = []
    cfg = s.cfg
    if target > s.last_applied and cfg.machine_version >= cfg.effective_machine_version:
        last_idx, _ = s.log.last_index_term()
        upto = min(last_idx, target)
        module, traced = None, False
        for entry in s.log.fold(s.last_applied + 1, upto):
            if cfg.machine_version < cfg.effective_machine_version:
                break
            if cfg.effective_machine_module is not module:
                module = cfg.effective_machine_module
                traced = ra_machine.tracing(module)
            if _apply_entry(entry, s, out, notifys, traced):
                eol = machine_state_enter("eol", s)
                head: Effects = [("notify", notifys)] if notifys else []
                raise DeleteAndTerminate(eol + head + list(effects_in) + out)
    head = [("notify", notifys)] if notifys else []
    return head + list(effects_in) + out


def _apply_usr(
    idx: int, term: int, cmd_meta: dict[str, Any], cmd: Any, reply_mode: Any,
    s: ServerState, out: Effects, notifys: dict[Any, list[tuple[Any, Any]]], traced: bool,
) -> None:
    meta = augment_command_meta(idx, term, s.cfg.effective_machine_version, reply_mode, cmd_meta)
    module = s.cfg.effective_machine_module
    ctx = server_trace_context(s, idx) if traced else None
    mac_state, reply, mac_effects = ra_machine.call_apply(module, meta, cmd, s.machine_state,
                                                          ctx)
    s.machine_state = mac_state
    out.extend(mac_effects)
    add_reply(cmd_meta, reply, reply_mode, out, notifys)
    s.last_applied = idx


def _apply_entry(
    entry: Entry, s: ServerState, out: Effects, notifys: dict[Any, list[tuple[Any, Any]]],
    traced: bool = False,
) -> bool:
    """Apply one entry; True if it was the cluster's delete entry (end of life)."""
    idx, term, cmd = entry
    match cmd:
        case (tag, cmd_meta, data, reply_mode) if tag == USR:
            _apply_usr(idx, term, cmd_meta, data, reply_mode, s, out, notifys, traced)
        case (tag, cmd_meta, new_cluster, reply_mode) if tag == RA_CLUSTER_CHANGE:
            add_reply(cmd_meta, "ok", reply_mode, out, notifys)
            ci, ct = s.cluster_index_term
            if idx > ci and term >= ct:
                # recovery path: the config in force is older than this one
                s.cluster = hydrate(new_cluster)
                s.membership = get_membership(s.cluster, s.cfg.id, s.cfg.uid, s.membership)
                s.cluster_index_term = (idx, term)
            s.cluster_change_permitted = True
            s.last_applied = idx
        case (tag, cmd_meta, next_ver) if tag == NOOP:
            _apply_noop(idx, term, cmd_meta, next_ver, s, out, notifys)
        case (tag, cmd_meta, "delete", reply_mode) if tag == RA_CLUSTER:
            add_reply(cmd_meta, "ok", reply_mode, out, notifys)
            s.last_applied = idx
            return True
        case _:
            # unknown entries are counted as applied so the server makes progress
            s.last_applied = idx
    return False


def _apply_noop(
    idx: int, term: int, cmd_meta: dict[str, Any], next_ver: int,
    s: ServerState, out: Effects, notifys: dict[Any, list[tuple[Any, Any]]],
) -> None:
    """A noop: the effective machine version only moves forward (docs/ra.md, versioning).

    A higher version this code supports switches the module (`which_module`),
    records ``(idx, version)`` in ``machine_versions`` and applies
    ``("machine_version", old, new)`` through the new module, so the machine
    converts its state exactly once, at this index, on every member. A
    higher version this code lacks is adopted as the effective version
    without advancing ``last_applied``: the member keeps replicating but
    applies nothing more until it is restarted with newer code.
    """
    cfg = s.cfg
    # the noop of the current term being applied lets membership changes proceed
    permit = term == s.current_term
    old_ver = cfg.effective_machine_version
    if next_ver > old_ver and cfg.machine_version >= next_ver:
        s.cluster_change_permitted = s.cluster_change_permitted or permit
        module = ra_machine.which_module(cfg.machine, next_ver)
        cfg.effective_machine_version = next_ver
        cfg.machine_versions.insert(0, (idx, next_ver))
        cfg.effective_machine_module = module
        # Ra builds this command's meta twice and the first build, carrying the
        # version of the local code rather than `next_ver`, wins; kept as is.
        inner = augment_command_meta(idx, term, cfg.machine_version, None, cmd_meta)
        _apply_usr(idx, term, inner, ("machine_version", old_ver, next_ver), "none",
                   s, out, notifys, ra_machine.tracing(module))
    elif next_ver > old_ver:
        cfg.effective_machine_version = next_ver
    else:
        s.cluster_change_permitted = s.cluster_change_permitted or permit
        s.last_applied = idx
