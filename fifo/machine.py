"""``rabbit_fifo`` machine version 7 (RabbitMQ 4.0-4.2) as a pure Ra machine.

`RabbitFifo` is duck-typed against Ra's machine behaviour (``ra_machine``): ``init``,
``apply``, ``state_enter``, ``tick``, ``overview``, ``version``,
``which_module`` and the aux callbacks. ``apply`` is deterministic: time comes
only from ``meta["system_time"]`` and nothing is read from the outside world,
so every member that applies the same log reaches the same state and emits
the same effects (which Ra then executes or drops per member).

The state is updated in place and returned; callers that need an earlier
state keep a `fifo.records.copy_state` copy.

Effect order follows upstream's observable order (monitor first, incoming effects, expiry,
deliveries, then length-limit effects; credit replies after deliveries).
Upstream v7 accumulates effects by prepending and reverses them, so its raw
order differs only where no client can tell the difference.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any

from fifo import consumer_timeout, disconnect, dlx, mc, v2_commands
from fifo import queries as q
from fifo import v2_release_cursors as v2_cursors
from fifo.aux import AuxState, handle_aux, init_aux
from fifo.commands import get_msg, make_settle
from fifo.consumers import (
    activate_next_consumer,
    active_consumer,
    active_effects,
    cancel_consumer,
    complete,
    consumer_id,
    consumer_key_from_id,
    consumers_up_on,
    credit_api_v2,
    find_consumer,
    get_priority,
    increase_credit,
    mark_enqueuers,
    maybe_queue_consumer,
    return_all,
    return_one,
    sort_waiting,
    update_consumer,
    update_consumer_active_effect,
    update_or_remove_con,
)
from fifo.convert import convert_v7_to_v8
from fifo.delivery import (
    LimitView,
    add_delivery_effects,
    assign_to_consumer,
    checkout,
    checkout_one,
    evaluate_limit,
    expire_batch,
    get_next_msg,
    is_over_limit,
    limit_view,
    messages_ready,
    promote_delayed,
)
from fifo.effects import (
    DELIVERY_SEND_MSG_OPTS,
    cancel_consumer_handler,
    mod_call,
    monitor_node,
    monitor_process,
    send_msg,
)
from fifo.msg import (
    Header,
    get_header,
    incr_msg,
    make_msg,
    msg_header,
    msg_idx,
    update_header,
)
from fifo.records import (
    Cfg,
    Consumer,
    Enqueuer,
    RabbitFifoState,
    erl_key,
    erl_sorted,
)
from fifo.serial_number import add as serial_add
from fifo.serial_number import diff as serial_diff
from fifo.versions import Rules, rules_for, rules_of
from ra.effect_types import Effect

__all__ = ["MACHINE_VERSION", "RabbitFifo"]

MACHINE_VERSION = 7
#: versions a release may select (``releases.lookup`` accepts only these): 3.10
#: runs 2, 4.0-4.2 run 5 to 7, 4.3 runs 8
SUPPORTED_VERSIONS = (2, 4, 5, 6, 7, 8)
#: versions the machine runs whose behaviour is not complete yet: usable by a
#: machine built with them explicitly, never offered as a RabbitMQ release
PARTIAL_VERSIONS: tuple[int, ...] = ()
RUNNABLE_VERSIONS = SUPPORTED_VERSIONS + PARTIAL_VERSIONS
#: aux commands whose handling reads the clock (`fifo.aux.handle_aux`)
_TIMED_AUX = ("eval", "force_checkpoint")

Meta = Mapping[str, Any]
Result = tuple[RabbitFifoState, Any] | tuple[RabbitFifoState, Any, list[Any]]


def _apply_config(conf: Mapping[str, Any], s: RabbitFifoState, rules: Rules) -> None:
    """Replace every cfg field from `conf`, defaults for absent keys (``update_config``)."""
    limit = conf.get("delivery_limit")
    if isinstance(limit, int | float) and limit < 0:
        limit = None
    sac = conf.get("single_active_consumer_on", False)
    if sac not in (True, False):
        raise ValueError(f"single_active_consumer_on must be a boolean: {sac!r}")
    s.cfg = Cfg(
        name=s.cfg.name,
        resource=s.cfg.resource,
        dead_letter_handler=conf.get("dead_letter_handler"),
        become_leader_handler=conf.get("become_leader_handler"),
        overflow_strategy=conf.get("overflow_strategy", "drop_head"),
        max_length=conf.get("max_length"),
        max_bytes=conf.get("max_bytes"),
        consumer_strategy="single_active" if sac else "competing",
        delivery_limit=limit,
        expires=conf.get("expires"),
        msg_ttl=conf.get("msg_ttl"),
        consumer_disconnected_timeout=conf.get("consumer_disconnected_timeout",
                                               rules.default_disconnected_timeout),
        delayed_retry=conf.get("delayed_retry", rules.default_delayed_retry),
    )
    # v7 resets last_active on every update, even to undefined (fixed in v8)
    if not rules.last_active_from_created_once or s.last_active is None:
        s.last_active = conf.get("created")


def _expiry_header(ts: int, raw: Any, size: int, cfg: Cfg, rules: Rules) -> Header:
    """Per-queue and per-message TTL; v7 gives raw (non-container) bodies none, v8
    gives them the queue's."""
    if not mc.is_mc(raw) and not rules.raw_bodies_get_queue_ttl:
        return size
    ttls = [t for t in (cfg.msg_ttl, mc.ttl(raw) if mc.is_mc(raw) else None)
            if t is not None]
    if not ttls:
        return size
    ttl = min(ttls)
    expiry = ts + 1 if ttl == 0 else ts + ttl
    return update_header("expiry", lambda e: e, expiry, size)


def _delivery_count_header(raw: Any, header: Header) -> Header:
    count = mc.get_annotation("delivery_count", raw)
    if count is None:
        return header
    return update_header("delivery_count", lambda _: count, count, header)


def _normalise_size(size: Any) -> tuple[int, int]:
    if isinstance(size, int):
        return (0, size)
    return size


def _credit_reply(c: Consumer, available: int, drain: bool, active: bool,
                  rules: Rules) -> tuple[Any, ...]:
    """``#credit_reply{}``; with link-state properties (v8) it also says ``active``."""
    reply: tuple[Any, ...] = ("credit_reply", c.cfg.tag, c.delivery_count, c.credit,
                              available, drain)
    if rules.link_state_properties and c.cfg.meta.get("link_state_properties") is True:
        reply += ({"active": active},)
    return reply


def _link_credit_snd(dc_rcv: int, credit_rcv: int, dc_snd: int, c: Consumer) -> int:
    if credit_api_v2(c.cfg):
        return max(0, serial_diff(serial_add(dc_rcv, credit_rcv), dc_snd))
    return max(0, dc_rcv + credit_rcv - dc_snd)


class RabbitFifo:
    """The quorum-queue machine; one instance serves any number of queues."""

    def __init__(self, machine_version: int = MACHINE_VERSION,
                 clock: Callable[[], int] | None = None) -> None:
        if machine_version not in RUNNABLE_VERSIONS:
            raise ValueError(f"unsupported rabbit_fifo machine version {machine_version}")
        self.machine_version = machine_version
        self.rules = rules_for(machine_version)
        # Aux decisions (checkpoint intervals, expiry timers) need wall-clock
        # time; it is injected so the machine itself never reads a clock.
        self.clock = clock

    # --- ra_machine callbacks ----------------------------------------------------------------

    def version(self) -> int:
        return self.machine_version

    def which_module(self, version: int) -> RabbitFifo:
        if version in RUNNABLE_VERSIONS:
            return self if version == self.machine_version else RabbitFifo(version, self.clock)
        raise ValueError(f"no rabbit_fifo module for machine version {version}")

    def init(self, config: Mapping[str, Any]) -> RabbitFifoState:
        s = RabbitFifoState(cfg=Cfg(name=config["name"], resource=config["queue_resource"]),
                            messages=self.rules.new_messages())
        _apply_config(config, s, self.rules)
        if self.rules.v2_commands:
            v2_cursors.configure(config, s)
        return s

    def overview(self, s: RabbitFifoState) -> dict[str, Any]:
        return q.overview(s)

    def live_indexes(self, s: RabbitFifoState) -> list[int]:
        """v8: raft indexes below a snapshot that must stay (every message still held)."""
        return q.live_indexes(s)

    def snapshot_installed(self, meta: Meta, s: RabbitFifoState, old_meta: Any,
                           old_state: Any, node: Any = None) -> list[Effect]:
        """v8: a member that installed a snapshot may have missed effects: it resends the
        messages held by consumers on its `node` and a credit reply to every credited
        consumer (sessions drop duplicates). Earlier versions do nothing."""
        if not self.rules.consumer_timeout_in_machine:
            return []
        acc = {key: sorted(c.checked_out.items()) for key, c in s.consumers.items()
               if c.checked_out and (node is None or c.cfg.pid.node == node)}
        effects: list[Effect] = []
        add_delivery_effects(effects, acc, s)
        ready = messages_ready(s)
        credited = [(c, ready, True) for _k, c in sorted(s.consumers.items(),
                                                         key=lambda kc: erl_key(kc[0]))]
        credited += [(c, 0, False) for _k, c in s.waiting_consumers]
        for c, available, active in credited:
            if credit_api_v2(c.cfg):
                reply = _credit_reply(c, available, c.drain, active, self.rules)
                effects.append(send_msg(c.cfg.pid, reply, DELIVERY_SEND_MSG_OPTS))
        return effects

    def init_aux(self, name: Any) -> AuxState:
        return init_aux(name, self._now())

    def handle_aux(self, ra_state: str, kind: Any, cmd: Any, aux: AuxState,
                   ra_aux: Any) -> tuple[Any, ...]:
        # only the checkpoint evaluations read the clock; ``bytes_in`` comes once
        # per enqueue on every replica and needs no time
        now = self._now() if cmd in _TIMED_AUX else 0
        return handle_aux(ra_state, kind, cmd, aux, ra_aux, now)

    def _now(self) -> int:
        return self.clock() if self.clock is not None else 0

    def tick(self, ts: int, s: RabbitFifoState) -> list[Any]:
        if self.rules.v2_commands:
            return v2_commands.tick(ts, s)
        qname = s.cfg.resource
        if q.is_expired(ts, s):
            return [mod_call("rabbit_quorum_queue", "spawn_deleter", [qname])]
        return [("aux", ("handle_tick", [qname, q.overview(s), q.all_nodes(s)]))]

    def state_enter(self, ra_state: str, s: RabbitFifoState) -> list[Any]:
        dlx_effects = dlx.state_enter(ra_state, s.cfg.dead_letter_handler, s.dlx)
        if self.rules.v2_commands:
            return v2_commands.state_enter(ra_state, s, expiry_timer_on_election(s), dlx_effects)
        if ra_state == "leader":
            return self._enter_leader(s, dlx_effects)
        if ra_state == "eol":
            pids = dict.fromkeys(s.enqueuers)
            pids.update(dict.fromkeys(c.cfg.pid for c in s.consumers.values()))
            pids.update(dict.fromkeys(c.cfg.pid for _, c in s.waiting_consumers))
            return [*(send_msg(p, "eol", "ra_event") for p in erl_sorted(pids)), ("aux", "eol"),
                    *dlx_effects]
        return dlx_effects

    def _enter_leader(self, s: RabbitFifoState, dlx_effects: list[Effect]) -> list[Effect]:
        pids = dict.fromkeys(s.enqueuers)
        pids.update(dict.fromkeys(c.cfg.pid for c in s.consumers.values()))
        pids.update(dict.fromkeys(c.cfg.pid for _, c in s.waiting_consumers))
        ordered = erl_sorted(pids)
        nodes = erl_sorted(dict.fromkeys(p.node for p in ordered))
        if self.rules.checkout_reply_names_strategy:
            # v8: no expiry timer (the aux arms absolute ones), no become-leader handler
            return [*(monitor_process(p) for p in ordered),
                    *(send_msg(p, "leader_change", "ra_event") for p in ordered),
                    *(monitor_node(n) for n in nodes),
                    mod_call("rabbit_quorum_queue", "spawn_notify_decorators",
                             [s.cfg.resource, "startup", []]),
                    *dlx_effects]
        effects: list[Effect] = [
            expiry_timer_on_election(s),
            *dlx_effects,
            *(monitor_process(p) for p in ordered),
            *(send_msg(p, "leader_change", "ra_event") for p in ordered),
            *(monitor_node(n) for n in nodes),
            mod_call("rabbit_quorum_queue", "spawn_notify_decorators",
                     [s.cfg.resource, "startup", []]),
        ]
        blh = s.cfg.become_leader_handler
        if blh is not None:
            mod, fun, args = blh
            effects.insert(0, mod_call(mod, fun, [*args, s.cfg.name]))
        return effects

    # --- apply -------------------------------------------------------------------------------

    def apply(self, meta: Meta, cmd: Any, s: RabbitFifoState) -> Result:
        if rules_of(meta).records_command_time:
            s.last_command_time = meta["system_time"]
        before = limit_view(s)
        if rules_of(meta).v2_commands:
            result = v2_commands.apply(self, meta, cmd, s, before)
            if result is not None:
                return result
        return self.apply_common(meta, cmd, s, before)

    def apply_common(self, meta: Meta, cmd: Any, s: RabbitFifoState,
                     before: LimitView) -> Result:
        """The commands every version applies alike (machine 2 hands some here)."""
        match cmd:
            case ("enqueue", pid, seq, raw):
                size = _normalise_size(mc.message_size(raw))
                return self._apply_enqueue(meta, before, pid, seq, raw, size, s)
            case ("e", seq, raw, size):
                mode = meta.get("reply_mode")
                if isinstance(mode, tuple) and len(mode) == 3 and mode[0] == "notify":
                    return self._apply_enqueue(meta, before, mode[2], seq, raw, size, s)
                if self.rules.checkout_reply_names_strategy:  # v8: an untracked enqueue
                    return self._apply_enqueue(meta, before, None, None, raw, size, s)
                return (s, "ok", [])  # v7 has no clause for it: unhandled command
            case ("register_enqueuer", pid):
                if pid not in s.enqueuers:
                    s.enqueuers[pid] = Enqueuer()
                reply = ("reject_publish" if is_over_limit(s)
                         and s.cfg.overflow_strategy == "reject_publish" else "ok")
                return (s, reply, [monitor_process(pid)])
            case ("settle", key, msg_ids):
                found = find_consumer(key, s)
                if found is None:
                    return self._settle_waiting(meta, before, key, msg_ids, s)
                return self._complete_and_checkout(meta, before, msg_ids, found[0], found[1],
                                                   [], s)
            case ("discard", key, msg_ids):
                found = find_consumer(key, s)
                if found is None:
                    return self._settle_waiting(meta, before, key, msg_ids, s)
                if meta["machine_version"] == 4 and found[0] != key:
                    return (s, "ok")
                return self._discard(meta, before, msg_ids, found[0], found[1], True, {}, s)
            case ("return", key, msg_ids):
                found = find_consumer(key, s)
                if found is None:
                    return self._settle_waiting(meta, before, key, msg_ids, s)
                return self._return(meta, before, found[0], msg_ids, False, {}, s)
            case ("modify", key, msg_ids, failed, undeliverable, anns):
                found = find_consumer(key, s)
                if found is None:
                    return self._settle_waiting(meta, before, key, msg_ids, s)
                if undeliverable:
                    return self._discard(meta, before, msg_ids, found[0], found[1], failed,
                                         anns, s)
                return self._return(meta, before, found[0], msg_ids, failed, anns, s)
            case ("requeue", key, msg_id, old_idx, header, _raw):
                return self._requeue(meta, before, key, msg_id, old_idx, header, s)
            case ("credit", key, credit, delivery_count, drain):
                return self._credit(meta, before, key, credit, delivery_count, drain, s)
            case ("checkout", cid, ("dequeue", settlement), cmeta):
                return self._dequeue(meta, before, cid, settlement, cmeta, s)
            case ("checkout", cid, "cancel" | "remove" as spec, _):
                return self._cancel(meta, before, cid, spec, s)
            case ("checkout", cid, spec, cmeta):
                return self._checkout(meta, before, cid, spec, cmeta, s)
            case ("purge",):
                return self._purge(meta, before, s)
            case ("garbage_collection",):
                return (s, "ok", [("aux", "garbage_collection")])
            case ("timeout", "expire_msgs" | ("expire_msgs", "shallow") as name):
                rules = rules_of(meta)
                if not rules.batch_expiry:
                    if name != "expire_msgs":
                        return (s, "ok", [])
                    return checkout(meta, before, s, [])
                # v8 expires the heads of returns and of every level, dead-lettering
                # even an empty batch (a zero counter effect), as upstream does
                effects: list[Effect] = []
                promote_delayed(meta["system_time"], s)
                expire_batch(meta["system_time"], s, effects)
                return checkout(meta, before, s, effects)
            case ("delayed_cmd", op) if rules_of(meta).delayed_retry:
                return self._delayed_cmd(meta, before, op, s)
            case ("down", pid, "noconnection"):
                if rules_of(meta).suspects_keep_messages:
                    return checkout(meta, before, s, disconnect.noconnection(meta, pid, s))
                if s.cfg.consumer_strategy == "single_active":
                    return self._noconnection_sac(meta, before, pid, s)
                return self._noconnection(meta, before, pid, s)
            case ("down", pid, _reason):
                effects = self._handle_down(meta, pid, s)
                activate_next_consumer(s, effects)
                return checkout(meta, before, s, effects)
            case ("nodeup", node):
                if rules_of(meta).suspects_keep_messages:
                    return checkout(meta, before, s, disconnect.nodeup(meta, node, s))
                return self._nodeup(meta, before, node, s)
            case ("timeout", "evaluate_consumer_timeout") if rules_of(
                    meta).consumer_timeout_in_machine:
                return checkout(meta, before, s, consumer_timeout.evaluate(meta, s))
            case ("timeout", ("consumer_disconnected_timeout", key)) if rules_of(
                    meta).suspects_keep_messages:
                timed_out = disconnect.disconnected_timeout(meta, key, s)
                if timed_out is None:
                    return (s, [])
                return checkout(meta, before, s, timed_out)
            case ("nodedown", _node):
                return (s, "ok")
            case ("purge_nodes", nodes):
                effects = []
                for node in nodes:
                    for pid in self._all_pids_for(node, s):
                        effects.extend(self._handle_down(meta, pid, s))
                return (s, "ok", effects)
            case ("update_config", conf):
                old = s.cfg.dead_letter_handler
                new = conf.get("dead_letter_handler", old)
                s.dlx, effects = dlx.update_config(old, new, s.cfg.resource, s.dlx)
                _apply_config(conf, s, rules_of(meta))
                return checkout(meta, before, s, effects)
            case ("machine_version", from_v, to_v):
                if from_v not in RUNNABLE_VERSIONS or (from_v <= 2 < to_v):
                    raise NotImplementedError(
                        f"converting a machine version {from_v} state is not supported")
                if from_v <= 7 < to_v:
                    s = convert_v7_to_v8(meta, s)
                return (s, "ok", [("aux", ("dlx", "setup"))])
            case ("dlx", sub):
                effects = dlx.apply(sub, s.cfg.dead_letter_handler, s.dlx)
                return checkout(meta, before, s, effects)
        return (s, "ok", [])

    # --- enqueue -----------------------------------------------------------------------------

    def _apply_enqueue(self, meta: Meta, before: LimitView, pid: Any, seq: Any, raw: Any,
                       size: tuple[int, int], s: RabbitFifoState) -> Result:
        effects: list[Effect] = [("aux", ("bytes_in", size))]
        if pid is None and seq is None:
            self._enqueue_msg(meta, raw, self.rules.message_size(size), s)
            return checkout(meta, before, s, effects)
        enq = s.enqueuers.get(pid)
        if enq is None:
            enq = s.enqueuers[pid] = Enqueuer()
            effects.insert(0, monitor_process(pid))
        if seq == enq.next_seqno:
            cache = (meta["index"], raw) if self._can_immediately_deliver(s) else None
            self._enqueue_msg(meta, raw, self.rules.message_size(size), s)
            s.msg_cache = cache
            enq.next_seqno = seq + 1
            return checkout(meta, before, s, effects)
        if seq > enq.next_seqno:
            return (s, "not_enqueued", effects)
        return (s, "ok", effects)

    @staticmethod
    def _enqueue_msg(meta: Meta, raw: Any, body_size: int, s: RabbitFifoState) -> None:
        rules = rules_of(meta)
        header = _expiry_header(meta["system_time"], raw, body_size, s.cfg, rules)
        if rules.enqueue_takes_delivery_count:
            header = _delivery_count_header(raw, header)
        s.messages.in_(rules.message_priority(raw),
                       make_msg(meta["index"], header, rules.packed_size_max))
        s.msg_bytes_enqueue += body_size
        s.enqueue_count += 1
        s.messages_total += 1

    @staticmethod
    def _can_immediately_deliver(s: RabbitFifoState) -> bool:
        return messages_ready(s) == 0 and bool(s.consumers) and not s.service_queue.is_empty()

    # --- settle / return / discard ------------------------------------------------------------

    def _complete_and_checkout(self, meta: Meta, before: LimitView, msg_ids: Any,
                               key: Hashable, c: Consumer, effects: list[Effect],
                               s: RabbitFifoState) -> Result:
        consumer_timeout.maybe_untimeout(c, msg_ids)
        was_quiescing = c.status == "quiescing"
        complete(meta, key, msg_ids, c, s)
        # a completion may have moved a quiescing active consumer to the waiting list
        if (was_quiescing and s.cfg.consumer_strategy == "single_active"
                and active_consumer(s.consumers) is None):
            effects.extend(active_effects(s, c, False, "waiting"))
        activate_next_consumer(s, effects)
        return checkout(meta, before, s, effects)

    def _discard(self, meta: Meta, before: LimitView, msg_ids: Any, key: Hashable,
                 c: Consumer, failed: bool, anns: Mapping[str, Any],
                 s: RabbitFifoState) -> Result:
        msgs = [incr_msg(c.checked_out[i], failed, anns) for i in msg_ids if i in c.checked_out]
        effects = dlx.discard(msgs, "rejected", s.cfg.dead_letter_handler, s.dlx,
                              rules_of(meta).annotate_acquired_count)
        return self._complete_and_checkout(meta, before, msg_ids, key, c, effects, s)

    def _return(self, meta: Meta, before: LimitView, key: Hashable, msg_ids: Any,
                failed: bool, anns: Mapping[str, Any], s: RabbitFifoState) -> Result:
        effects: list[Effect] = []
        consumer_timeout.maybe_untimeout(s.consumers[key], msg_ids)
        for msg_id in msg_ids:  # requeued in the order the client gave them back
            c = s.consumers.get(key)
            if c is not None and msg_id in c.checked_out:
                return_one(meta, msg_id, c.checked_out[msg_id], failed, anns, s, effects, key)
        c = s.consumers.get(key)
        if c is not None:
            update_or_remove_con(meta, key, c, s)
        if meta["machine_version"] >= 7:
            activate_next_consumer(s, effects)
        return checkout(meta, before, s, effects)

    def _delayed_cmd(self, meta: Meta, before: LimitView, op: Any,
                     s: RabbitFifoState) -> Result:
        """``{delayed_cmd, {retry, all | N}}`` and ``{delayed_cmd, {assign_deferred, ...}}``."""
        match op:
            case ("retry", n):
                msgs = s.delayed.take_for_retry(n)
                s.returns.extend(msgs)
                return checkout(meta, before, s, [], ("ok", len(msgs)))
            case ("assign_deferred", key, tokens):
                c = s.consumers.get(key)
                if c is None:
                    return (s, ("error", "consumer_not_found"), [])
                if c.status != "up":
                    return (s, ("error", "consumer_not_active"), [])
                trial = s.delayed.copy()
                msgs, missing = trial.take_deferred(list(tokens))
                if len(msgs) > c.credit:
                    return (s, ("error", ("insufficient_credit", c.credit, len(msgs))), [])
                s.delayed = trial
                effects = assign_to_consumer(meta, key, c, msgs, s)
                reply = ("ok", len(msgs)) if not missing else ("partial", len(msgs), missing)
                return (s, reply, effects)
        return (s, "ok", [])

    def _settle_waiting(self, meta: Meta, before: LimitView, key: Any, msg_ids: Any,
                        s: RabbitFifoState) -> Result:
        """An unknown key: in v8 maybe a waiting consumer answering for timed-out ids."""
        if not rules_of(meta).consumer_timeout_in_machine:
            return (s, "ok")
        answered = consumer_timeout.settle_waiting(key, msg_ids, s)
        if not answered:
            return (s, "ok")
        effects: list[Effect] = []
        activate_next_consumer(s, effects)
        return checkout(meta, before, s, effects)

    def _requeue(self, meta: Meta, before: LimitView, key: Any, msg_id: int, old_idx: int,
                 header0: Header, s: RabbitFifoState) -> Result:
        c = s.consumers.get(key)
        if c is None or msg_id not in c.checked_out:
            return (s, "ok", [])
        header = update_header("acquired_count", lambda n: n + 1, 1, header0)
        size = get_header("size", header)
        s.msg_bytes_checkout -= size
        s.msg_bytes_enqueue += size
        del c.checked_out[msg_id]
        c.lock_expirations.pop(msg_id, None)
        c.credit = increase_credit(c, 1)
        s.ra_indexes.delete(old_idx)
        rules = rules_of(meta)
        s.messages.in_(rules.requeue_priority,
                       make_msg(meta["index"], header, rules.packed_size_max))
        s.enqueue_count += 1
        update_or_remove_con(meta, key, c, s)
        effects: list[Effect] = []
        if meta["machine_version"] >= 7:
            activate_next_consumer(s, effects)
        return checkout(meta, before, s, effects)

    # --- credit --------------------------------------------------------------------------------

    def _credit(self, meta: Meta, before: LimitView, key: Any, credit: int, dc_rcv: int,
                drain: bool, s: RabbitFifoState) -> Result:
        c = s.consumers.get(key)
        if c is not None:
            return self._credit_active(meta, before, key, c, credit, dc_rcv, drain, s)
        for i, (k, wc) in enumerate(s.waiting_consumers):
            if k == key:
                del s.waiting_consumers[i]
                return self._credit_inactive(key, wc, credit, dc_rcv, drain, s)
        return (s, "ok")

    def _credit_active(self, meta: Meta, before: LimitView, key: Hashable, c: Consumer,
                       credit: int, dc_rcv: int, drain: bool, s: RabbitFifoState) -> Result:
        c.credit = _link_credit_snd(dc_rcv, credit, c.delivery_count, c)
        if rules_of(meta).consumer_timeout_in_machine:
            c.drain = drain  # v8 remembers it for link-state and resent credit replies
        maybe_queue_consumer(key, c, s)
        s, _, effects = checkout(meta, before, s, [])
        c2 = s.consumers[key]
        tag, pid = consumer_id(c2)
        available = messages_ready(s)
        if credit_api_v2(c2.cfg):
            if drain and c2.credit > 0:
                c2.delivery_count = serial_add(c2.delivery_count, c2.credit)
                c2.credit = 0
            # deliveries must precede the credit reply (TRANSFERs before FLOW)
            effects.append(send_msg(pid, _credit_reply(c2, available, drain, True, self.rules),
                                    DELIVERY_SEND_MSG_OPTS))
            return (s, "ok", effects)
        reply: Any = ("send_credit_reply", available)
        if drain:
            remaining = c2.credit
            c2.delivery_count += remaining
            c2.credit = 0
            reply = ("multi", [reply, ("send_drained", (tag, remaining))])
        return (s, reply, effects)

    def _credit_inactive(self, key: Hashable, c: Consumer, credit: int, dc_rcv: int,
                         drain: bool, s: RabbitFifoState) -> Result:
        link_credit = _link_credit_snd(dc_rcv, credit, c.delivery_count, c)
        pid = c.cfg.pid
        if credit_api_v2(c.cfg):
            if drain:
                c.delivery_count = serial_add(c.delivery_count, link_credit)
                c.credit = 0
            else:
                c.credit = link_credit
            if self.rules.consumer_timeout_in_machine:
                c.drain = drain
            s.waiting_consumers = sort_waiting([*s.waiting_consumers, (key, c)])
            return (s, "ok", [send_msg(pid, _credit_reply(c, 0, drain, False, self.rules),
                                       DELIVERY_SEND_MSG_OPTS)])
        c.credit = link_credit
        s.waiting_consumers = sort_waiting([*s.waiting_consumers, (key, c)])
        return (s, ("send_credit_reply", 0))

    # --- checkout: consume, dequeue, cancel ----------------------------------------------------

    def _checkout(self, meta: Meta, before: LimitView, cid: tuple[Any, Any], spec0: Any,
                  cmeta: Mapping[str, Any], s: RabbitFifoState) -> Result:
        is_v4 = len(spec0) == 2
        match spec0:
            case (life, mode):
                spec = (life, mode)
            case (life, prefetch, "simple_prefetch"):
                spec = (life, ("simple_prefetch", prefetch))
            case (life, _, "credited"):
                spec = (life, "credited")
            case _:
                raise ValueError(f"invalid checkout spec {spec0!r}")
        priority = get_priority(cmeta)
        key = consumer_key_from_id(cid, s)
        if key is None:
            key = meta["index"] if is_v4 else cid
        c = update_consumer(meta, key, cid, cmeta, spec, priority, s)
        info = {
            "next_msg_id": c.next_msg_id,
            "credit": c.credit,
            "key": key,
            "delivery_count": c.delivery_count,
            "num_checked_out": len(c.checked_out),
        }
        effects: list[Effect] = [monitor_process(cid[1])]
        activate_next_consumer(s, effects)
        if self.rules.checkout_reply_names_strategy:
            active = active_consumer(s.consumers)
            info["is_active"] = (s.cfg.consumer_strategy == "competing"
                                 or (active is not None and active[0] == key))
            info["consumer_strategy"] = s.cfg.consumer_strategy
        else:
            # v7 quirk: is_active compares a key with a {Key, Consumer} pair, so it
            # is always false for single active consumer queues (fixed in v8)
            info["is_active"] = s.cfg.consumer_strategy == "competing"
        return checkout(meta, before, s, effects, ("ok", info))

    def _dequeue(self, meta: Meta, before: LimitView, cid: tuple[Any, Any], settlement: str,
                 cmeta: Mapping[str, Any], s: RabbitFifoState) -> Result:
        if s.cfg.consumer_strategy == "single_active":
            return (s, ("error", ("unsupported", "single_active_consumer")))
        s.last_active = meta["system_time"]
        exists = find_consumer(cid, s) is not None
        if messages_ready(s) == 0:
            return (s, ("dequeue", "empty"), [])
        if exists:
            return (s, ("dequeue", "empty"))
        update_consumer(meta, cid, cid, cmeta, ("once", ("simple_prefetch", 1)), 0, s)
        effects0: list[Effect] = []
        res = checkout_one(meta, s, effects0)
        if res is None:
            # every ready message had expired
            s.consumers.pop(cid, None)
            evaluate_limit(meta["index"], before, s, effects0)
            return (s, ("dequeue", "empty"), effects0)
        _key, msg_id, msg = res
        if settlement == "unsettled":
            effects = [monitor_process(cid[1]), *effects0]
        else:
            _, _, settle_effects = self.apply(meta, make_settle(cid, [msg_id]), s)  # type: ignore[misc]
            effects = [*settle_effects, *effects0]
        effects.insert(0, _reply_log_effect(msg_idx(msg), msg_id, msg_header(msg),
                                            messages_ready(s), meta.get("from")))
        evaluate_limit(meta["index"], before, s, effects)
        return (s, "$ra_no_reply", effects)

    def _cancel(self, meta: Meta, before: LimitView, cid: Any, spec: str,
                s: RabbitFifoState) -> Result:
        key = consumer_key_from_id(cid, s)
        if key is None:
            return (s, ("error", "consumer_not_found"), [])
        effects: list[Effect] = []
        cancel_consumer(meta, key, s, effects, spec)
        activate_next_consumer(s, effects)
        c = s.consumers.get(key)
        info = {} if c is None else {"key": key, "num_checked_out": len(c.checked_out)}
        return checkout(meta, before, s, effects, ("ok", info))

    # --- purge ---------------------------------------------------------------------------------

    def _purge(self, meta: Meta, before: LimitView, s: RabbitFifoState) -> Result:
        rules = rules_of(meta)
        ready = messages_ready(s)
        if s.messages_total == ready:
            s.ra_indexes = type(s.ra_indexes)()
        else:
            for m in s.returns:
                s.ra_indexes.delete(msg_idx(m))
        s.messages = rules.new_messages()
        s.returns.clear()
        s.messages_total -= ready
        s.msg_bytes_enqueue = 0
        purged = ready
        for m in s.delayed.clear():
            s.ra_indexes.delete(msg_idx(m))
            s.messages_total -= 1
            purged += 1
        if rules.purge_dead_letters:
            # 4.3 also drops the dead letters waiting for (or held by) the dlx worker
            purged += dlx.purge(s.dlx)
        effects: list[Effect] = [("aux", "force_checkpoint"), "garbage_collection"]
        evaluate_limit(meta["index"], before, s, effects)
        return (s, ("purge", purged), effects)

    # --- process and node failures -------------------------------------------------------------

    def _handle_down(self, meta: Meta, pid: Any, s: RabbitFifoState) -> list[Any]:
        """A monitored process is gone: forget it as publisher and consumer (``down``)."""
        s.enqueuers.pop(pid, None)
        effects: list[Effect] = []
        if s.cfg.consumer_strategy == "single_active" and s.waiting_consumers:
            still_up = []
            for k, c in s.waiting_consumers:
                if c.cfg.pid == pid:
                    effects.append(cancel_consumer_handler(s.cfg.resource, consumer_id(c)))
                else:
                    still_up.append((k, c))
            s.waiting_consumers = still_up
        down_keys = [k for k in erl_sorted(s.consumers) if s.consumers[k].cfg.pid == pid]
        for key in down_keys:
            cancel_consumer(meta, key, s, effects, "down")
        return effects

    def _noconnection(self, meta: Meta, before: LimitView, pid: Any,
                      s: RabbitFifoState) -> Result:
        """v7: every consumer on the node is suspected and its messages return now."""
        node = pid.node
        effects: list[Effect] = []
        for key in erl_sorted(s.consumers):
            c = s.consumers.get(key)
            if c is None or c.cfg.pid.node != node or c.status != "up":
                continue
            c.status = "suspected_down"
            return_all(meta, s, effects, key, c, True)
            effects.append(update_consumer_active_effect(s, c, False, "suspected_down"))
        mark_enqueuers(node, s, "suspected_down")
        effects.insert(0, monitor_node(node))
        s.last_active = meta["system_time"]
        return checkout(meta, before, s, effects)

    def _noconnection_sac(self, meta: Meta, before: LimitView, pid: Any,
                          s: RabbitFifoState) -> Result:
        """v7 SAC: consumers on the node are demoted to the end of the waiting list."""
        node = pid.node
        effects: list[Effect] = []
        waiting0 = list(s.waiting_consumers)
        for key in erl_sorted(s.consumers):
            c = s.consumers.get(key)
            if c is None or c.cfg.pid.node != node:
                continue
            effects.append(update_consumer_active_effect(s, c, False, "suspected_down"))
            return_all(meta, s, effects, key, c, True)
            # upstream rebuilds from the list as it was before the fold
            if key in s.consumers:
                s.waiting_consumers = [*waiting0, (key, s.consumers[key])]
            else:
                s.waiting_consumers = waiting0
            s.consumers.pop(key, None)
            s.last_active = meta["system_time"]
        s.waiting_consumers = self._waiting_with_status(node, s, "suspected_down")
        activate_next_consumer(s, effects)
        mark_enqueuers(node, s, "suspected_down")
        effects.insert(0, monitor_node(node))
        return checkout(meta, before, s, effects)

    @staticmethod
    def _waiting_with_status(node: Any, s: RabbitFifoState,
                             status: str) -> list[tuple[Hashable, Consumer]]:
        out = []
        for k, c in s.waiting_consumers:
            if c.status == "cancelled":
                continue
            if c.cfg.pid.node == node:
                c.status = status  # type: ignore[assignment]
            out.append((k, c))
        return sort_waiting(out)

    def _nodeup(self, meta: Meta, before: LimitView, node: Any, s: RabbitFifoState) -> Result:
        effects: list[Effect] = [monitor_process(p) for p in self._suspected_pids_for(node, s)]
        # prompt publishers on the node to resend whatever got stuck meanwhile
        effects.extend(send_msg(p, "leader_change", "ra_event")
                       for p in erl_sorted(s.enqueuers) if p.node == node)
        mark_enqueuers(node, s, "up")
        consumers_up_on(meta, node, s, effects)
        s.waiting_consumers = self._waiting_with_status(node, s, "up")
        activate_next_consumer(s, effects)
        return checkout(meta, before, s, effects)

    @staticmethod
    def _suspected_pids_for(node: Any, s: RabbitFifoState) -> list[Any]:
        pids = [s.consumers[k].cfg.pid for k in erl_sorted(s.consumers)
                if s.consumers[k].status == "suspected_down"
                and s.consumers[k].cfg.pid.node == node]
        pids += [p for p in erl_sorted(s.enqueuers)
                 if s.enqueuers[p].status == "suspected_down" and p.node == node]
        pids += [c.cfg.pid for _, c in s.waiting_consumers
                 if c.status == "suspected_down" and c.cfg.pid.node == node]
        return pids

    @staticmethod
    def _all_pids_for(node: Any, s: RabbitFifoState) -> list[Any]:
        # same order as upstream's prepending folds: waiting, enqueuers, consumers (reversed)
        cons = [s.consumers[k].cfg.pid for k in erl_sorted(s.consumers)
                if s.consumers[k].cfg.pid.node == node]
        enqs = [p for p in erl_sorted(s.enqueuers) if p.node == node]
        waiting = [c.cfg.pid for _, c in s.waiting_consumers if c.cfg.pid.node == node]
        return [*reversed(waiting), *reversed(enqs), *reversed(cons)]


def expiry_timer_on_election(s: RabbitFifoState) -> Effect:
    """Expiry timer for a new leader.

    Upstream computes ``Expiry - now`` from the wall clock here; the machine
    has no clock, so a due-able head arms a zero timer (the ``timeout`` command
    then expires by its own timestamp and the aux ``eval`` re-arms precisely).
    """
    m = get_next_msg(s)
    if m is not None and get_header("expiry", msg_header(m)) is not None:
        return ("timer", "expire_msgs", 0)
    return ("timer", "expire_msgs", "infinity")


def _reply_log_effect(idx: int, msg_id: int, header: Header, ready: int,
                      from_: Any) -> Effect:
    def reply(cmds: list[Any]) -> list[Effect]:
        if not cmds:
            return []
        return [("reply", from_, ("wrap_reply",
                                  ("dequeue", (msg_id, (header, get_msg(cmds[0]))), ready)))]

    return ("log", [idx], reply)

