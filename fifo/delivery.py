"""The delivery loop (``rabbit_fifo:checkout``), message expiry and length limits.

Every command that can make a message deliverable or a consumer servable ends
in `checkout`: it pairs ready messages with consumers from the service queue,
turns the pairs into delivery effects, feeds the at-least-once dead-letter
worker, and only then enforces the length limits -- so limits see the queue
after deliveries, exactly as upstream.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, NamedTuple

from fifo import dlx
from fifo.commands import get_msg
from fifo.consumers import consumer_id, update_or_remove_con
from fifo.effects import DELIVERY_SEND_MSG_OPTS, dead_lettered, send_msg
from fifo.msg import Msg, get_header, msg_header, msg_idx, msg_size, unpack
from fifo.pq import PriorityQ
from fifo.records import Consumer, RabbitFifoState, erl_sorted
from fifo.serial_number import add as serial_add
from fifo.versions import rules_of, rules_of_state
from ra.effect_types import Effect

__all__ = [
    "DELIVERY_CHUNK_LIMIT_B",
    "LOW_LIMIT",
    "LimitView",
    "assign_to_consumer",
    "checkout",
    "checkout_one",
    "chunk_disk_msgs",
    "evaluate_limit",
    "expire_batch",
    "expire_head",
    "expire_msgs",
    "get_next_msg",
    "is_below_soft_limit",
    "is_over_limit",
    "limit_view",
    "messages_ready",
    "messages_total",
    "promote_delayed",
    "take_next_msg",
]

DELIVERY_CHUNK_LIMIT_B = 128_000
LOW_LIMIT = 0.8

Meta = Mapping[str, Any]


def messages_ready(s: RabbitFifoState) -> int:
    return len(s.messages) + len(s.returns)


def messages_total(s: RabbitFifoState) -> int:
    return s.messages_total + dlx.stat(s.dlx)[0]


# --- taking messages -------------------------------------------------------------------------


def take_next_msg(s: RabbitFifoState) -> Msg | None:
    """Returns first, then the priority queue; taken indexes become live indexes."""
    if s.returns:
        return s.returns.popleft()
    m = s.messages.out()
    if m is not None:
        s.ra_indexes.append(msg_idx(m))
    return m


def get_next_msg(s: RabbitFifoState) -> Msg | None:
    if s.returns:
        return s.returns[0]
    return s.messages.get()


def _is_expired(ts: int, m: Msg) -> bool:
    expiry = get_header("expiry", msg_header(m))
    return expiry is not None and ts >= expiry


def expire_batch(ts: int, s: RabbitFifoState, effects: list[Effect]) -> None:
    """v8: take the expired prefix of returns and of every priority level at once.

    All of them are dead-lettered in one call (one counter effect, or one log
    read for at-most-once), returns first, then levels from the highest.
    """
    expired: list[Msg] = []
    while s.returns and _is_expired(ts, s.returns[0]):
        expired.append(s.returns.popleft())
    assert isinstance(s.messages, PriorityQ)
    expired.extend(s.messages.take_while(lambda m: _is_expired(ts, m)))
    effects.extend(dlx.discard(expired, "expired", s.cfg.dead_letter_handler, s.dlx,
                               acquired_count=True))
    for m in expired:
        s.ra_indexes.delete(msg_idx(m))
        s.msg_bytes_enqueue -= msg_size(m)
    s.messages_total -= len(expired)


def promote_delayed(ts: int, s: RabbitFifoState) -> None:
    """v8: delayed messages whose time has come join the returns, earliest first."""
    s.returns.extend(s.delayed.take_ready(ts))


def expire_head(meta: Meta, s: RabbitFifoState, effects: list[Effect]) -> None:
    """Expiry before a delivery: nothing unless the next message has expired."""
    ts = meta["system_time"]
    if rules_of(meta).batch_expiry:
        m = get_next_msg(s)
        if m is not None and _is_expired(ts, m):
            expire_batch(ts, s, effects)
        return
    expire_msgs(ts, s, effects)


def expire_msgs(ts: int, s: RabbitFifoState, effects: list[Effect]) -> bool:
    """v7: drop expired messages from the head only; each one is dead-lettered."""
    expired = False
    while True:
        m = get_next_msg(s)
        if m is None:
            return expired
        expiry = get_header("expiry", msg_header(m))
        if expiry is None or ts < expiry:
            return expired
        take_next_msg(s)
        effects.extend(dlx.discard([m], "expired", s.cfg.dead_letter_handler, s.dlx))
        s.ra_indexes.delete(msg_idx(m))
        s.messages_total -= 1
        s.msg_bytes_enqueue -= msg_size(m)
        expired = True


def checkout_one(meta: Meta, s: RabbitFifoState,
                 effects: list[Effect]) -> tuple[Hashable, int, Msg] | None:
    """Hand the next message to the next servable consumer, if both exist."""
    expire_head(meta, s, effects)
    sq = s.service_queue
    while True:
        key = sq.peek()
        if key is None:
            return None
        c = s.consumers.get(key)
        if c is None:
            sq.out()
            continue
        if not s.returns and not len(s.messages):
            return None  # the key stays queued: nothing was taken
        sq.out()
        if c.credit == 0 or c.status != "up":
            continue
        msg = take_next_msg(s)
        assert msg is not None
        msg_id = _check_out(meta, c, msg, s)
        update_or_remove_con(meta, key, c, s)
        return (key, msg_id, msg)


# --- delivery effects ------------------------------------------------------------------------


def chunk_disk_msgs(msgs: list[tuple[int, Msg]]) -> list[list[tuple[int, Msg]]]:
    """Split deliveries (oldest first) into chunks of about 128 kB of payload.

    The walk goes newest to oldest and opens a new chunk once the running total
    has reached the limit, so the *oldest* chunk is the short one.
    """
    chunks: list[list[tuple[int, Msg]]] = [[]]
    total = 0
    for item in reversed(msgs):
        size = msg_size(item[1])
        if total >= DELIVERY_CHUNK_LIMIT_B:
            chunks.append([item])
            total = size
        else:
            chunks[-1].append(item)
            total += size
    out = [list(reversed(c)) for c in reversed(chunks) if c]
    return out


def _delivery_effect(key: Hashable, msgs: list[tuple[int, Msg]], s: RabbitFifoState) -> Any:
    if key in s.consumers:
        tag, pid = consumer_id(s.consumers[key])
    else:
        assert isinstance(key, tuple)  # a consumer gone from the map is named by its id
        tag, pid = key
    cache = s.msg_cache
    if len(msgs) == 1 and cache is not None and msg_idx(msgs[0][1]) == cache[0]:
        msg_id, m = msgs[0]
        return send_msg(pid, ("delivery", tag, [(msg_id, (msg_header(m), cache[1]))]),
                        DELIVERY_SEND_MSG_OPTS)
    plain = [(msg_id, unpack(m)) for msg_id, m in msgs]
    idxs = [i for _, (i, _) in plain]
    # machine 8 hands the session its references as they are (packed when small)
    sent = list(msgs) if rules_of_state(s).packed_on_wire else plain

    def deliver(read_plan: Any) -> list[Any]:
        # On the consumer's node the session reads the bodies itself; elsewhere the
        # executing member reads them now (``delivery_effect``).
        if getattr(read_plan, "node", None) == pid.node:
            return [send_msg(pid, ("delivery", tag, read_plan, sent), DELIVERY_SEND_MSG_OPTS)]
        entries = read_plan.execute()
        bodies = [(msg_id, (h, get_msg(entries[i]))) for msg_id, (i, h) in plain]
        return [send_msg(pid, ("delivery", tag, bodies), DELIVERY_SEND_MSG_OPTS)]

    return ("log_ext", idxs, deliver, ("local", pid.node))


def add_delivery_effects(effects: list[Effect], acc: dict[Hashable, list[tuple[int, Msg]]],
                         s: RabbitFifoState) -> None:
    for key in erl_sorted(acc):
        for chunk in chunk_disk_msgs(acc[key]):
            effects.append(_delivery_effect(key, chunk, s))


def _check_out(meta: Meta, c: Consumer, msg: Msg, s: RabbitFifoState) -> int:
    """Hand `msg` to `c`: next msg id, one credit, the lock (v8) and the byte counters."""
    msg_id = c.next_msg_id
    c.checked_out[msg_id] = msg
    if c.cfg.timeout is not None:
        # v8: the consumer timeout releases the message after this time
        lock = meta["system_time"] + c.cfg.timeout
        c.lock_expirations[msg_id] = lock
        nct = s.next_consumer_timeout
        s.next_consumer_timeout = lock if nct is None else min(nct, lock)
    c.next_msg_id = msg_id + 1
    c.credit -= 1
    mode = c.cfg.credit_mode
    if isinstance(mode, tuple) and mode[0] == "credited":
        c.delivery_count = serial_add(c.delivery_count, 1)
    else:
        c.delivery_count += 1
    size = msg_size(msg)
    s.msg_bytes_checkout += size
    s.msg_bytes_enqueue -= size
    return msg_id


def assign_to_consumer(meta: Meta, key: Hashable, c: Consumer, msgs: list[Msg],
                       s: RabbitFifoState) -> list[Effect]:
    """v8 ``assign_deferred``: check `msgs` out to one consumer in one delivery effect."""
    if not msgs:
        return []
    delivered = [(_check_out(meta, c, m, s), m) for m in msgs]
    update_or_remove_con(meta, key, c, s)
    return [_delivery_effect(key, delivered, s)]


def checkout(meta: Meta, before: LimitView, s: RabbitFifoState, effects: list[Effect],
             reply: Any = "ok") -> tuple[RabbitFifoState, Any, list[Any]]:
    """Deliver what can be delivered, then feed the dlx worker and apply limits."""
    acc: dict[Hashable, list[tuple[int, Msg]]] = {}
    while (res := checkout_one(meta, s, effects)) is not None:
        key, msg_id, msg = res
        acc.setdefault(key, []).append((msg_id, msg))
    if acc:
        add_delivery_effects(effects, acc, s)
    dlx_effects = dlx.checkout(s.cfg.dead_letter_handler, s.dlx)
    s.msg_cache = None
    if dlx_effects:
        effects[:0] = dlx_effects
    evaluate_limit(meta["index"], before, s, effects)
    return (s, reply, effects)


# --- length limits ---------------------------------------------------------------------------


class LimitView(NamedTuple):
    """What `evaluate_limit` needs to know about the state before a command."""

    undefined: bool
    below_soft: bool


def limit_view(s: RabbitFifoState) -> LimitView:
    cfg = s.cfg
    return LimitView(cfg.max_length is None and cfg.max_bytes is None, is_below_soft_limit(s))


def _counts(s: RabbitFifoState) -> tuple[int, int]:
    # delayed messages (v8) count against the limits; their bytes are in msg_bytes_enqueue
    num_dlx, bytes_dlx = dlx.stat(s.dlx)
    return (messages_ready(s) + len(s.delayed) + num_dlx, s.msg_bytes_enqueue + bytes_dlx)


def is_over_limit(s: RabbitFifoState) -> bool:
    cfg = s.cfg
    if cfg.max_length is None and cfg.max_bytes is None:
        return False
    count, size = _counts(s)
    return (cfg.max_length is not None and count > cfg.max_length) or (
        cfg.max_bytes is not None and size > cfg.max_bytes
    )


def _is_below(limit: int | None, n: int) -> bool:
    return limit is None or n <= int(limit * LOW_LIMIT)


def is_below_soft_limit(s: RabbitFifoState) -> bool:
    cfg = s.cfg
    if cfg.max_length is None and cfg.max_bytes is None:
        return False
    count, size = _counts(s)
    return _is_below(cfg.max_length, count) and _is_below(cfg.max_bytes, size)


def _unblock_enqueuers(s: RabbitFifoState, effects: list[Effect]) -> None:
    for pid in erl_sorted(s.enqueuers):
        s.enqueuers[pid].blocked = None
        effects.append(send_msg(pid, ("queue_status", "go"), ["ra_event"]))


def _append_combined(effects: list[Effect], new: list[Effect]) -> None:
    """Merge consecutive dead-letter counter effects (mass drops on a policy change)."""
    if len(new) == 1 and effects:
        match effects[-1], new[0]:
            case (("mod_call", "rabbit_global_counters", "messages_dead_lettered",
                   [reason, qtype, kind, n]),
                  ("mod_call", "rabbit_global_counters", "messages_dead_lettered",
                   [reason2, qtype2, kind2, more])) if (reason, qtype, kind) == (
                       reason2, qtype2, kind2):
                effects[-1] = dead_lettered(reason, kind, n + more)
                return
    effects.extend(new)


def drop_head(s: RabbitFifoState, effects: list[Effect]) -> bool:
    m = take_next_msg(s)
    if m is None:
        return False
    s.ra_indexes.delete(msg_idx(m))
    s.msg_bytes_enqueue -= msg_size(m)
    s.messages_total -= 1
    _append_combined(effects, dlx.discard([m], "maxlen", s.cfg.dead_letter_handler, s.dlx,
                                          rules_of_state(s).annotate_acquired_count))
    return True


def evaluate_limit(index: int, before: LimitView, s: RabbitFifoState,
                   effects: list[Effect]) -> None:
    """Enforce max-length / max-length-bytes after a command (``evaluate_limit``)."""
    cfg = s.cfg
    after_undefined = cfg.max_length is None and cfg.max_bytes is None
    if after_undefined:
        if not before.undefined:
            _unblock_enqueuers(s, effects)
        return
    limit_effects: list[Effect] = []
    if cfg.overflow_strategy == "drop_head":
        # Upstream recurses while over the limit even when nothing is droppable
        # (only dead-lettered messages left): stop instead of spinning forever.
        while is_over_limit(s) and drop_head(s, limit_effects):
            pass
    elif is_over_limit(s):
        for pid in erl_sorted(s.enqueuers):
            enq = s.enqueuers[pid]
            if enq.blocked is None:
                enq.blocked = index
                limit_effects.append(send_msg(pid, ("queue_status", "reject_publish"),
                                              ["ra_event"]))
    elif not before.below_soft and is_below_soft_limit(s):
        _unblock_enqueuers(s, limit_effects)
    effects.extend(limit_effects)
