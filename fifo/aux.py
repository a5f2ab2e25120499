"""Per-member aux state of ``rabbit_fifo`` v7: checkpoints, timers, log reads (``handle_aux``).

Machine 8 snapshots instead of checkpointing (`do_snapshot_v8`): at
``last_applied``, with the messages' raft indexes as the snapshot's live
indexes, so the log keeps only the entries of messages still queued and the
bodies are read back from those entries, never held in the state.

Aux runs outside the replicated log, on every member, after each applied batch
(``eval``) and on every Ra tick. Its time-based decisions use a clock injected
by the caller, never a clock read of its own. The Ra side of the interface is
duck-typed: ``ra_aux`` must offer ``machine_state()``, ``last_applied()`` and
``log_fetch(idx)`` (the user command at `idx`, or ``None`` once truncated).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fifo.commands import get_msg, make_requeue
from fifo.consumer_timeout import timer_effect as consumer_timer_effect
from fifo.consumers import find_consumer
from fifo.delivery import get_next_msg, messages_total
from fifo.effects import mod_call
from fifo.msg import get_header, msg_header, unpack
from fifo.pq import PriorityQ
from fifo.queries import (
    query_notify_decorators_info,
    query_peek,
    smallest_raft_index,
)
from fifo.records import RabbitFifoState, copy_state
from fifo.versions import rules_of_state

__all__ = [
    "CHECK_MAX_BYTES",
    "CHECK_MAX_INDEXES",
    "CHECK_MIN_INDEXES",
    "CHECK_MIN_INTERVAL_MS",
    "AuxState",
    "Checkpoint",
    "handle_aux",
    "init_aux",
    "timer_effect",
]

CHECK_MIN_INTERVAL_MS = 1000
CHECK_MIN_INDEXES = 4096 * 2
CHECK_MAX_INDEXES = 666_667
CHECK_MAX_BYTES = 128_000_000


@dataclass(slots=True)
class Checkpoint:
    index: int
    timestamp: int
    smallest_index: int | None = None
    messages_total: int = 0
    indexes: int = CHECK_MIN_INDEXES
    bytes_in: int = 0


@dataclass(slots=True)
class AuxState:
    name: Any
    last_checkpoint: Checkpoint
    last_decorators_state: Any = None
    tick_pid: Any = None
    cache: dict[str, Any] = field(default_factory=dict)
    bytes_in: int = 0
    bytes_out: int = 0


def init_aux(name: Any, now: int) -> AuxState:
    return AuxState(name=name, last_checkpoint=Checkpoint(index=0, timestamp=now))


def timer_effect(now: int, s: RabbitFifoState) -> tuple[str, str, Any]:
    """(Re)arm the expiry timer for the next deliverable message, or cancel it."""
    m = get_next_msg(s)
    expiry = None if m is None else get_header("expiry", msg_header(m))
    if expiry is None:
        return ("timer", "expire_msgs", "infinity")
    return ("timer", "expire_msgs", max(0, expiry - now))


def expiry_timer_v8(s: RabbitFifoState) -> Any:
    """v8: an absolute timer for the earliest expiry among the head of the returns and
    the head of every priority level, or the next delayed message's ready time;
    none when nothing is due."""
    if s.messages_total == 0 and not s.delayed:
        return None
    heads = [s.returns[0]] if s.returns else []
    heads += s.messages.heads() if isinstance(s.messages, PriorityQ) else []
    expiries = [e for e in (get_header("expiry", msg_header(m)) for m in heads) if e is not None]
    next_delayed = s.delayed.next_at()
    if next_delayed is not None:
        expiries.append(next_delayed)  # the same timer promotes due delayed messages
    if not expiries:
        return None
    return ("timer", "expire_msgs", max(0, min(expiries)), {"abs": True})


def _v8_timers(now: int, aux: AuxState, s: RabbitFifoState) -> list[Any]:
    """The leader's absolute timers: message expiry and the consumer timeout (re-armed
    only when the earliest lock is earlier than the one armed, or that one passed)."""
    effects = []
    expiry = expiry_timer_v8(s)
    if expiry is not None:
        effects.append(expiry)
    armed = aux.cache.get("consumer_timeout")
    if armed is not None and armed <= now:
        armed = None
    lock = consumer_timer_effect(s, armed)
    if lock is not None:
        aux.cache["consumer_timeout"] = s.next_consumer_timeout
        effects.append(lock)
    return effects


def _release_cursor(last: int | None, new: int | None) -> list[Any]:
    if new is not None and (last is None or new > last):
        return [("release_cursor", new - 1)]
    return []


def _due(now: int, check: Checkpoint, last_applied: int, total: int, bytes_in: int) -> bool:
    """Enough indexes (or an empty queue past a few) and time, or enough bytes, went by."""
    indexes_since = last_applied - check.index
    enough_data = bytes_in - check.bytes_in > CHECK_MAX_BYTES * max(1, total / CHECK_MAX_INDEXES)
    enough_time = now - check.timestamp > CHECK_MIN_INTERVAL_MS
    return (enough_time and (indexes_since > check.indexes or (total == 0 and indexes_since > 32))
            ) or enough_data


def do_snapshot_v8(now: int, check: Checkpoint, ra_aux: Any, bytes_in: int,
                   force: bool) -> tuple[Checkpoint, list[Any]]:
    """v8 (upstream's ``do_snapshot``): a snapshot at ``last_applied`` once it is due.

    No checkpoint and no release cursor at the smallest live index: Ra keeps the
    entries at the state's live indexes below the snapshot, so a snapshot can
    cover the whole applied log however old the oldest message is. As
    upstream, it waits until ``last_applied`` is written locally and no
    snapshot is being sent (``{written, Idx}``, ``no_snapshot_sends``).
    Upstream decides when by the bytes its commands made reclaimable; warren
    keeps the cadence of its checkpoints (`_due`).
    """
    last_applied = ra_aux.last_applied()
    s: RabbitFifoState = ra_aux.machine_state()
    total = messages_total(s)
    if not (force or _due(now, check, last_applied, total, bytes_in)):
        return check, []
    snapshot = copy_state(s)
    snapshot.msg_cache = None
    new = Checkpoint(index=last_applied, timestamp=now, messages_total=total, bytes_in=bytes_in,
                     indexes=min(max(total, CHECK_MIN_INDEXES), CHECK_MAX_INDEXES))
    cond = {"condition": [("written", last_applied), "no_snapshot_sends"]}
    return new, [("release_cursor", last_applied, snapshot, cond)]


def do_checkpoints(now: int, check: Checkpoint, ra_aux: Any, bytes_in: int,
                   force: bool) -> tuple[Checkpoint, list[Any]]:
    """Checkpoint when enough indexes, time or bytes went by; release what is dead."""
    last_applied = ra_aux.last_applied()
    s: RabbitFifoState = ra_aux.machine_state()
    indexes_since = last_applied - check.index
    smallest = smallest_raft_index(s)
    new_smallest = last_applied if smallest is None else smallest
    total = messages_total(s)
    enough_data = bytes_in - check.bytes_in > CHECK_MAX_BYTES * max(1, total / CHECK_MAX_INDEXES)
    enough_time = now - check.timestamp > CHECK_MIN_INTERVAL_MS
    if (enough_time and (indexes_since > check.indexes or (total == 0 and indexes_since > 32))) \
            or enough_data or force:
        snapshot = copy_state(s)
        snapshot.msg_cache = None
        new = Checkpoint(index=last_applied, timestamp=now, smallest_index=new_smallest,
                         messages_total=total, bytes_in=bytes_in,
                         indexes=min(max(total, CHECK_MIN_INDEXES), CHECK_MAX_INDEXES))
        return new, [("checkpoint", last_applied, snapshot),
                     *_release_cursor(check.smallest_index, new_smallest)]
    if new_smallest == check.smallest_index:
        return check, []  # nothing moved: the same checkpoint, no cursor to release
    # built field by field: `dataclasses.replace` walks the fields on every call
    moved = Checkpoint(check.index, check.timestamp, new_smallest, check.messages_total,
                       check.indexes, check.bytes_in)
    return moved, _release_cursor(check.smallest_index, new_smallest)


def _fetch_bodies(ra_aux: Any, checked: dict[int, Any], msg_ids: Any) -> list[tuple[Any, ...]]:
    out = []
    for msg_id in sorted(set(msg_ids) & checked.keys()):
        idx, header = unpack(checked[msg_id])
        cmd = ra_aux.log_fetch(idx)
        if cmd is not None:  # the consumer may have crashed and the entry gone
            out.append((msg_id, idx, header, get_msg(cmd)))
    return out


def handle_aux(ra_state: str, kind: Any, cmd: Any, aux: AuxState, ra_aux: Any,
               now: int) -> tuple[Any, ...]:
    """Returns ``("no_reply", Aux, RaAux, Effects)`` or ``("reply", R, Aux, RaAux, Effects)``."""
    s: RabbitFifoState = ra_aux.machine_state()
    match cmd:
        case "eval":
            rules = rules_of_state(s)
            effects: list[Any] = []
            if rules.consumer_timeout_in_machine:  # machine 8
                aux.last_checkpoint, effects = do_snapshot_v8(now, aux.last_checkpoint, ra_aux,
                                                              aux.bytes_in, False)
            elif not rules.v2_commands:  # machine 2 stores release cursors instead
                aux.last_checkpoint, effects = do_checkpoints(now, aux.last_checkpoint, ra_aux,
                                                              aux.bytes_in, False)
            if ra_state != "leader":
                return ("no_reply", aux, ra_aux, effects)
            if rules.consumer_timeout_in_machine:
                effects[:0] = _v8_timers(now, aux, s)
            else:
                effects.insert(0, timer_effect(now, s))
            dec = query_notify_decorators_info(s)
            if dec != aux.last_decorators_state:
                aux.last_decorators_state = dec
                effects.insert(0, mod_call("rabbit_quorum_queue", "spawn_notify_decorators",
                                           [s.cfg.resource, "consumer_state_changed",
                                            list(dec)]))
            return ("no_reply", aux, ra_aux, effects)
        case ("bytes_in", (meta_size, body_size)):
            aux.bytes_in += meta_size + body_size
            return ("no_reply", aux, ra_aux, [])
        case ("return", key, msg_ids) as ret, corr, pid:
            return ("no_reply", aux, ra_aux, _aux_return(s, ret, key, msg_ids, corr, pid, ra_aux))
        case "tick" if (rules := rules_of_state(s)).v2_commands \
                or rules.consumer_timeout_in_machine:
            # machine 2 releases its stored cursors as it drains; machine 8 snapshots at eval
            return ("no_reply", aux, ra_aux, [])
        case "tick":
            smallest = smallest_raft_index(s)
            idx = ra_aux.last_applied() if smallest is None else smallest - 1
            return ("no_reply", aux, ra_aux, [("release_cursor", idx)])
        case "force_checkpoint":
            if rules_of_state(s).consumer_timeout_in_machine:
                # v8 forces a snapshot (a purge): the messages still queued keep their
                # entries as the snapshot's live indexes
                aux.last_checkpoint, effects = do_snapshot_v8(now, aux.last_checkpoint, ra_aux,
                                                              aux.bytes_in, True)
                return ("no_reply", aux, ra_aux, effects)
            aux.last_checkpoint, effects = do_checkpoints(now, aux.last_checkpoint, ra_aux,
                                                          aux.bytes_in, True)
            return ("no_reply", aux, ra_aux, effects)
        case ("get_checked_out", key, msg_ids):
            c = s.consumers.get(key)
            if c is None:
                return ("reply", ("error", "consumer_not_found"), aux, ra_aux, [])
            msgs = [(i, (h, body)) for i, _, h, body in _fetch_bodies(ra_aux, c.checked_out,
                                                                      msg_ids)]
            return ("reply", ("ok", msgs), aux, ra_aux, [])
        case ("peek", pos):
            res = query_peek(pos, s)
            if res[0] == "ok":
                idx, header = res[1]
                return ("reply", ("ok", (header, get_msg(ra_aux.log_fetch(idx)))), aux, ra_aux,
                        [])
            return ("reply", res, aux, ra_aux, [])
        case "garbage_collection":
            return ("no_reply", aux, ra_aux, ["garbage_collection"])
        case ("handle_tick", [qname, overview, nodes]) if ra_state == "leader":
            return ("no_reply", aux, ra_aux,
                    [mod_call("rabbit_quorum_queue", "handle_tick", [qname, overview, nodes])])
        case ("dlx", "setup") if ra_state == "leader" \
                and s.cfg.dead_letter_handler == "at_least_once":
            pid = None if s.dlx.consumer is None else s.dlx.consumer.pid
            return ("no_reply", aux, ra_aux,
                    [mod_call("rabbit_fifo_dlx", "ensure_worker_started", [s.cfg.resource, pid])])
        case ("dlx", "teardown", pid):
            return ("no_reply", aux, ra_aux,
                    [mod_call("rabbit_fifo_dlx", "ensure_worker_terminated", [pid])])
    return ("no_reply", aux, ra_aux, [])


def _aux_return(s: RabbitFifoState, ret: Any, key: Any, msg_ids: Any, corr: Any, pid: Any,
                ra_aux: Any) -> list[Any]:
    """v7 clients return through aux: without a delivery limit the messages are
    re-appended as ``requeue`` commands (back of the queue), otherwise the
    ``return`` is appended unchanged."""
    notify = ("notify", corr, pid)
    if s.cfg.delivery_limit is not None:
        return [("append", ret, notify)]
    found = find_consumer(key, s)
    if found is None:
        return []
    ckey, c = found
    to_return = _fetch_bodies(ra_aux, c.checked_out, msg_ids)
    return [("append", make_requeue(ckey, msg_id, idx, header, body),
             notify if n == len(to_return) - 1 else "noreply")
            for n, (msg_id, idx, header, body) in enumerate(to_return)]
