"""``rabbit_fifo`` machine version 2 (RabbitMQ 3.10): the commands it applies its own way.

Upstream hands every log entry to the module of the version it is applied with
(``which_module``); 3.10's module differs from 4.x's in the places below, so
`fifo.machine` gives these commands to `apply` and keeps everything else
(register_enqueuer, dequeue, update_config's dead-letter switch, dlx commands,
garbage collection) common.

What a 3.10 queue does differently:

* consumers are keyed by ``{Tag, Pid}`` and commands name them exactly; a
  checkout (``{auto, N, simple_prefetch | credited}``) and a cancel reply plain
  ``ok``; ``cancel`` is the only way to detach (there is no ``remove``);
* every give-back — a requeue, a consumer's process going down, its node
  disconnecting — adds one to the message's ``delivery_count``, which is what
  the delivery limit tests (``delivery_count > delivery_limit``) and what a
  redelivery's ``x-delivery-count`` says; a ``reject`` without requeue
  dead-letters the message as it is;
* a ``return`` gives the messages back in ascending id order and gives the
  consumer its credit back once per message, uncapped (3.10 never capped a
  prefetch consumer's credit), after the returns;
* one plain FIFO, no message priorities; a single active consumer queue hands
  over to the first waiting consumer that is up, in arrival order, and never
  to a higher-priority one while the active one lives;
* credit arithmetic on plain integers, answered with ``send_credit_reply``;
* no aux ``bytes_in`` per enqueue, no checkpoints: the state stores release
  cursors (`fifo.v2_release_cursors`), emitted as the queue drains;
* the tick hands ``rabbit_quorum_queue:handle_tick`` a metrics tuple, and the
  state changes reserve and release file handles.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import replace
from typing import Any

from fifo import dlx, mc
from fifo import queries as q
from fifo import v2_release_cursors as rc
from fifo.consumers import cancel_consumer as cancel_consumer0
from fifo.consumers import (
    complete,
    consumer_id,
    consumers_up_on,
    get_priority,
    increase_credit,
    mark_enqueuers,
    maybe_queue_consumer,
    return_all,
    return_one,
    update_consumer_active_effect,
    update_or_remove_con,
)
from fifo.delivery import LimitView, checkout, messages_ready, messages_total
from fifo.effects import cancel_consumer_handler, mod_call, monitor_node, monitor_process, send_msg
from fifo.msg import Header, get_header, make_msg, update_header
from fifo.records import (
    Consumer,
    ConsumerCfg,
    Enqueuer,
    RabbitFifoState,
    erl_sorted,
)
from fifo.versions import V2
from ra.effect_types import Effect

__all__ = ["apply", "state_enter", "tick"]

Meta = Mapping[str, Any]
Result = tuple[RabbitFifoState, Any] | tuple[RabbitFifoState, Any, list[Any]]


def apply(machine: Any, meta: Meta, cmd: Any, s: RabbitFifoState,
          before: LimitView) -> Result | None:
    """Apply `cmd` as machine 2 does, or None for a command handled in common
    (`machine` is the `fifo.machine.RabbitFifo` applying it)."""
    idx = meta["index"]
    match cmd:
        case ("enqueue", pid, seq, raw):
            return _enqueue(machine, meta, before, pid, seq, raw, s)
        case ("e", *_) | ("modify", *_) | ("delayed_cmd", _):
            return (s, "ok", [])  # 4.x commands: unknown to 3.10, applied as no-ops
        case ("settle", cid, msg_ids):
            c = s.consumers.get(cid)
            if c is None:
                return (s, "ok")
            return _complete_and_checkout(meta, before, cid, c, msg_ids, [], s)
        case ("discard", cid, msg_ids):
            c = s.consumers.get(cid)
            if c is None:
                return (s, "ok")
            # dead-lettered as they are: a reject does not count as a delivery
            msgs = [c.checked_out[i] for i in msg_ids if i in c.checked_out]
            effects = dlx.discard(msgs, "rejected", s.cfg.dead_letter_handler, s.dlx)
            return _complete_and_checkout(meta, before, cid, c, msg_ids, effects, s)
        case ("return", cid, msg_ids):
            if cid not in s.consumers:
                return (s, "ok")
            return _return(meta, before, cid, msg_ids, s)
        case ("requeue", cid, msg_id, old_idx, header, _raw):
            return _requeue(meta, before, cid, msg_id, old_idx, header, s)
        case ("credit", cid, _credit, _dc, _drain) if cid not in s.consumers:
            return _credit_waiting(cmd, s)
        case ("checkout", _cid, ("dequeue", _), _cmeta):
            return _released(idx, machine.apply_common(meta, cmd, s, before))
        case ("checkout", cid, "cancel", _):
            cancelled: list[Effect] = []
            cancel_consumer(meta, cid, s, cancelled)
            return _released(idx, checkout(meta, before, s, cancelled))
        case ("checkout", cid, (life, credit, mode), cmeta):
            return _consume(meta, before, cid, (life, credit, mode), cmeta, s)
        case ("checkout", *_):
            return (s, "ok", [])  # `remove` and the 4.x spec shapes came after 3.10
        case ("purge",):
            s, reply, effects = machine.apply_common(meta, cmd, s, before)
            # 3.10 only collects garbage; checkpoints did not exist
            effects = [e for e in effects if e != ("aux", "force_checkpoint")]
            return _released(idx, (s, reply, effects))
        case ("down", pid, "noconnection"):
            if s.cfg.consumer_strategy == "single_active":
                return _noconnection_sac(meta, before, pid, s)
            return _noconnection(meta, before, pid, s)
        case ("down", pid, _reason):
            effects = handle_down(meta, pid, s)
            return _checkout_released(meta, before, s, effects)
        case ("nodeup", node):
            return _nodeup(machine, meta, before, node, s)
        case ("timeout", "expire_msgs"):
            return _checkout_released(meta, before, s, [])
        case ("timeout", _):
            return (s, "ok", [])
        case ("purge_nodes", nodes):
            effects = []
            for node in nodes:
                for pid in machine._all_pids_for(node, s):
                    effects.extend(handle_down(meta, pid, s))
            return _released(idx, (s, "ok", effects))
        case ("update_config", conf):
            rc.configure(conf, s)
            return _released(idx, machine.apply_common(meta, cmd, s, before))
        case ("garbage_collection",) | ("dlx", _):
            return _released(idx, machine.apply_common(meta, cmd, s, before))
    return None


# --- release cursors -------------------------------------------------------------------------


def _released(idx: int, result: Any) -> Result:
    """``update_smallest_raft_index`` after a command that may have let messages go."""
    s, reply, *rest = result
    effects = rest[0] if rest else []
    rc.update_smallest(idx, s, effects)
    return (s, reply, effects)


def _checkout_released(meta: Meta, before: LimitView, s: RabbitFifoState,
                       effects: list[Effect]) -> Result:
    """*checkout*; a cursor may go once expiry or a length limit removed messages."""
    total = messages_total(s)
    result = checkout(meta, before, s, effects)
    if messages_total(s) < total:
        return _released(meta["index"], result)
    return result


# --- enqueue ---------------------------------------------------------------------------------


def _enqueue(machine: Any, meta: Meta, before: LimitView, pid: Any, seq: Any, raw: Any,
             s: RabbitFifoState) -> Result:
    size = mc.message_size(raw)
    body_size = size if isinstance(size, int) else size[1]
    effects: list[Effect] = []
    if pid is not None or seq is not None:
        enq = s.enqueuers.get(pid)
        if enq is None:
            enq = s.enqueuers[pid] = Enqueuer()
            effects.append(monitor_process(pid))
        if seq > enq.next_seqno:
            return (s, "not_enqueued", effects)
        if seq < enq.next_seqno:
            return (s, "ok", effects)
        enq.next_seqno = seq + 1
        cache = (meta["index"], raw) if machine._can_immediately_deliver(s) else None
        machine._enqueue_msg(meta, raw, body_size, s)
        s.msg_cache = cache
    else:
        machine._enqueue_msg(meta, raw, body_size, s)
    result = _checkout_released(meta, before, s, effects)
    rc.maybe_store(meta["index"], s)
    return result


# --- settlement ------------------------------------------------------------------------------


def _complete_and_checkout(meta: Meta, before: LimitView, cid: Hashable, c: Consumer,
                           msg_ids: Any, effects: list[Effect], s: RabbitFifoState) -> Result:
    # no hand-over here: a 3.10 single active consumer only changes when one goes
    complete(meta, cid, msg_ids, c, s)
    return _released(meta["index"], checkout(meta, before, s, effects))


def _return(meta: Meta, before: LimitView, cid: Hashable, msg_ids: Any,
            s: RabbitFifoState) -> Result:
    c = s.consumers[cid]
    returned = sorted(i for i in set(msg_ids) if i in c.checked_out)
    effects: list[Effect] = []
    for msg_id in returned:
        c = s.consumers[cid]
        return_one(meta, msg_id, c.checked_out[msg_id], True, {}, s, effects, cid)
    c2 = s.consumers.get(cid)
    if c2 is not None:
        c2.credit = increase_credit(c2, len(returned))
        update_or_remove_con(meta, cid, c2, s)
    return _released(meta["index"], checkout(meta, before, s, effects))


def _requeue(meta: Meta, before: LimitView, cid: Hashable, msg_id: int, old_idx: int,
             header0: Header, s: RabbitFifoState) -> Result:
    """A give-back re-appended by the leader's aux (no delivery limit): the message
    goes to the back of the queue at this entry's index, its count one higher."""
    c = s.consumers.get(cid)
    if c is None or msg_id not in c.checked_out:
        return (s, "ok", [])
    header = update_header("delivery_count", lambda n: n + 1, 1, header0)
    size = get_header("size", header)
    s.msg_bytes_checkout -= size
    s.msg_bytes_enqueue += size
    del c.checked_out[msg_id]
    c.credit = increase_credit(c, 1)
    s.ra_indexes.delete(old_idx)
    s.messages.in_(V2.requeue_priority, make_msg(meta["index"], header))
    s.enqueue_count += 1
    update_or_remove_con(meta, cid, c, s)
    result = checkout(meta, before, s, [])
    rc.maybe_store(meta["index"], s)
    return _released(meta["index"], result)


# --- consumers -------------------------------------------------------------------------------


def _new_consumer(cid: tuple[Any, Any], cmeta: Mapping[str, Any], life: Any, credit: int,
                  mode: str, priority: int) -> Consumer:
    tag, pid = cid
    return Consumer(cfg=ConsumerCfg(meta=cmeta, pid=pid, tag=tag, credit_mode=mode,
                                    lifetime=life, priority=priority),
                    credit=credit)


def _merge(c: Consumer, cmeta: Mapping[str, Any], life: Any, credit: int, mode: str,
           priority: int) -> Consumer:
    c.cfg = replace(c.cfg, priority=priority, meta=cmeta, credit_mode=mode, lifetime=life)
    c.status = "up"
    c.credit = max(0, credit - len(c.checked_out))
    return c


def active_consumer(s: RabbitFifoState) -> tuple[Hashable, Consumer] | None:
    """3.10's active consumer: the first one that is up (no quiescing state)."""
    for cid in erl_sorted(s.consumers):
        if s.consumers[cid].status == "up":
            return (cid, s.consumers[cid])
    return None


def _consume(meta: Meta, before: LimitView, cid: tuple[Any, Any], spec: tuple[Any, int, str],
             cmeta: Mapping[str, Any], s: RabbitFifoState) -> Result:
    life, credit, mode = spec
    priority = get_priority(cmeta)
    existing = s.consumers.get(cid)
    if s.cfg.consumer_strategy == "competing":
        c = (_merge(existing, cmeta, life, credit, mode, priority) if existing is not None
             else _new_consumer(cid, cmeta, life, credit, mode, priority))
        update_or_remove_con(meta, cid, c, s)
    else:
        active = active_consumer(s)
        if (active is not None and active[0] == cid) or (active is None and existing):
            assert existing is not None
            update_or_remove_con(meta, cid, _merge(existing, cmeta, life, credit, mode,
                                                   priority), s)
        else:  # waits its turn in arrival order, whatever its priority
            s.waiting_consumers.append((cid, _new_consumer(cid, cmeta, life, credit, mode,
                                                           priority)))
    effects: list[Effect] = [monitor_process(cid[1])]
    activate_next_consumer(s, effects)
    return checkout(meta, before, s, effects)


def activate_next_consumer(s: RabbitFifoState, effects: list[Effect]) -> None:
    """Single active consumer: with none up, the first waiting consumer that is up
    becomes active (a cancelled record of it keeps its messages)."""
    if s.cfg.consumer_strategy == "competing" or active_consumer(s) is not None:
        return
    for i, (cid, nxt) in enumerate(s.waiting_consumers):
        if nxt.status != "up":
            continue
        del s.waiting_consumers[i]
        existing = s.consumers.get(cid)
        con = nxt if existing is None else replace(existing, cfg=nxt.cfg)
        maybe_queue_consumer(cid, con, s)
        s.consumers[cid] = con
        effects.append(update_consumer_active_effect(s, con, True, "single_active"))
        return


def cancel_consumer(meta: Meta, cid: Any, s: RabbitFifoState, effects: list[Effect]) -> None:
    """``basic.cancel``: the consumer keeps what it holds until it settles; an unknown
    one is ignored (3.10 answers ``ok`` either way)."""
    was_active = cid in s.consumers
    cancel_consumer0(meta, cid, s, effects, "cancel")
    if was_active:
        activate_next_consumer(s, effects)


def handle_down(meta: Meta, pid: Any, s: RabbitFifoState) -> list[Effect]:
    """A consumer's or publisher's process is gone: its messages come back, each
    counted as a delivery."""
    s.enqueuers.pop(pid, None)
    effects: list[Effect] = []
    if s.cfg.consumer_strategy == "single_active":
        for _cid, c in [e for e in s.waiting_consumers if e[1].cfg.pid == pid]:
            effects.append(cancel_consumer_handler(s.cfg.resource, consumer_id(c)))
        s.waiting_consumers = [e for e in s.waiting_consumers if e[1].cfg.pid != pid]
    for cid in [k for k in erl_sorted(s.consumers) if s.consumers[k].cfg.pid == pid]:
        cancel_consumer0(meta, cid, s, effects, "down")
        activate_next_consumer(s, effects)
    return effects


def _waiting_with_status(node: Any, s: RabbitFifoState, status: str) -> None:
    """Waiting consumers on `node` take `status`; cancelled ones are dropped; the
    order stays the order of arrival."""
    out = []
    for cid, c in s.waiting_consumers:
        if c.status == "cancelled":
            continue
        if c.cfg.pid.node == node:
            c.status = status  # type: ignore[assignment]
        out.append((cid, c))
    s.waiting_consumers = out


def _noconnection(meta: Meta, before: LimitView, pid: Any, s: RabbitFifoState) -> Result:
    """Every consumer on the node is suspected; its messages come back now (each
    counted) and it gets their credit back first, uncapped."""
    node = pid.node
    effects: list[Effect] = []
    for cid in erl_sorted(s.consumers):
        c = s.consumers.get(cid)
        if c is None or c.cfg.pid.node != node or c.status != "up":
            continue
        c.credit = increase_credit(c, len(c.checked_out))
        c.status = "suspected_down"
        return_all(meta, s, effects, cid, c, True)
        effects.append(update_consumer_active_effect(s, c, False, "suspected_down"))
    mark_enqueuers(node, s, "suspected_down")
    effects.insert(0, monitor_node(node))
    s.last_active = meta["system_time"]
    return _checkout_released(meta, before, s, effects)


def _noconnection_sac(meta: Meta, before: LimitView, pid: Any, s: RabbitFifoState) -> Result:
    """Single active consumer: consumers on the node go back to the end of the
    waiting list with their messages returned, and the next one that is up takes over."""
    node = pid.node
    effects: list[Effect] = []
    waiting0 = list(s.waiting_consumers)
    for cid in erl_sorted(s.consumers):
        c = s.consumers.get(cid)
        if c is None or c.cfg.pid.node != node:
            continue
        effects.append(update_consumer_active_effect(s, c, False, "suspected_down"))
        c.credit = increase_credit(c, len(c.checked_out))
        return_all(meta, s, effects, cid, c, True)
        # as upstream: rebuilt from the list as it was before the fold
        if cid in s.consumers:
            s.waiting_consumers = [*waiting0, (cid, s.consumers[cid])]
        else:
            s.waiting_consumers = waiting0
        s.consumers.pop(cid, None)
        s.last_active = meta["system_time"]
    _waiting_with_status(node, s, "suspected_down")
    activate_next_consumer(s, effects)
    mark_enqueuers(node, s, "suspected_down")
    effects.insert(0, monitor_node(node))
    return _checkout_released(meta, before, s, effects)


def _nodeup(machine: Any, meta: Meta, before: LimitView, node: Any,
            s: RabbitFifoState) -> Result:
    """The node is back: its suspected processes are monitored again (which tells
    their true fate) and its consumers are up again; publishers get no prompt."""
    effects: list[Effect] = [monitor_process(p) for p in machine._suspected_pids_for(node, s)]
    mark_enqueuers(node, s, "up")
    consumers_up_on(meta, node, s, effects)
    _waiting_with_status(node, s, "up")
    activate_next_consumer(s, effects)
    return checkout(meta, before, s, effects)


def _credit_waiting(cmd: tuple[Any, ...], s: RabbitFifoState) -> Result:
    """Credit for a waiting consumer: recorded, the consumer moves to the head of
    the waiting list (as 3.10 does), nothing is delivered."""
    _, cid, credit, dc_rcv, _drain = cmd
    for i, (k, c) in enumerate(s.waiting_consumers):
        if k == cid:
            del s.waiting_consumers[i]
            c.credit = max(0, dc_rcv + credit - c.delivery_count)
            s.waiting_consumers.insert(0, (k, c))
            return (s, ("send_credit_reply", messages_ready(s)))
    return (s, "ok")


# --- tick and state changes ------------------------------------------------------------------


def tick(ts: int, s: RabbitFifoState) -> list[Effect]:
    """Queue TTL as in every version; otherwise the metrics go to the broker as
    3.10's tuple ``{Name, Ready, CheckedOut, Total, Consumers, EnqueueBytes,
    CheckoutBytes, DiscardBytes}``."""
    qname = s.cfg.resource
    if q.is_expired(ts, s):
        return [mod_call("rabbit_quorum_queue", "spawn_deleter", [qname])]
    checked_out = sum(len(c.checked_out) for c in s.consumers.values())
    consumers = sum(1 for c in s.consumers.values() if c.status != "suspected_down")
    metrics = (s.cfg.name, messages_ready(s), checked_out, messages_total(s),
               consumers + len(s.waiting_consumers), s.msg_bytes_enqueue,
               s.msg_bytes_checkout, s.dlx.msg_bytes)
    return [mod_call("rabbit_quorum_queue", "handle_tick", [qname, metrics, q.all_nodes(s)])]


def state_enter(ra_state: str, s: RabbitFifoState, timer: Effect,
                dlx_effects: list[Effect]) -> list[Effect]:
    """3.10's leader monitors and prompts every known process and reserves file
    handles for the log; other states release or take a follower's share."""
    pids = dict.fromkeys(s.enqueuers)
    pids.update(dict.fromkeys(c.cfg.pid for c in s.consumers.values()))
    pids.update(dict.fromkeys(c.cfg.pid for _, c in s.waiting_consumers))
    ordered = erl_sorted(pids)
    if ra_state == "leader":
        nodes = erl_sorted(dict.fromkeys(p.node for p in ordered))
        effects: list[Effect] = [
            timer, *dlx_effects,
            *(monitor_process(p) for p in ordered),
            *(send_msg(p, "leader_change", "ra_event") for p in ordered),
            *(monitor_node(n) for n in nodes),
            mod_call("rabbit_quorum_queue", "file_handle_leader_reservation",
                     [s.cfg.resource]),
        ]
        blh = s.cfg.become_leader_handler
        if blh is not None:
            mod, fun, args = blh
            effects.insert(0, mod_call(mod, fun, [*args, s.cfg.name]))
        return effects
    if ra_state == "eol":
        return [*(send_msg(p, "eol", "ra_event") for p in ordered), ("aux", "eol"),
                mod_call("rabbit_quorum_queue", "file_handle_release_reservation", []),
                *dlx_effects]
    return [mod_call("rabbit_quorum_queue", "file_handle_other_reservation", []),
            *dlx_effects]
