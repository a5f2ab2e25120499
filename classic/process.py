"""The classic queue process (``rabbit_amqqueue_process``): a gen_server around the core.

`ClassicQueue` decides; this process does what it decides. It owns one core,
feeds it every input with the node clock's time, and executes the effects the
core returns, every kind of them (an effect it does not know is a bug and
crashes the process rather than being skipped):

* publisher confirms, refused publishes, deliveries and server-side cancels go
  to the channel they concern as a ``(CLASSIC_EVENT, vhost, name, pid, effect)``
  message (the effect record itself, and which queue process sent it), for the
  channel-side glue to translate;
* ``Monitor`` / ``Demonitor`` become monitors of channel processes, and a
  channel's ``DOWN`` becomes the core's `NotifyDown`; the exclusive owner (a
  connection process) is monitored from the start and its ``DOWN`` is
  `OwnerDown`, so an exclusive queue goes whatever way its connection goes;
* message TTL and ``x-expires`` are one timer, armed after every command for
  the earlier of the core's two deadlines, on the node's clock, so a test
  clock drives them;
* dead letters and store writes go to the hooks in `QueueEnv`: the classic
  package routes nothing and writes no file itself;
* ``Deleted`` stops the process with reason ``normal`` once the caller has its
  reply, after telling every channel it was watching that the queue is gone.
* it traps exits: an EXIT from a linked process other than its supervisor stops
  it with that process's reason (``normal`` as a deletion, ``shutdown`` for good,
  anything else as a crash its supervisor restarts), as upstream's does.

A process started again by its supervisor after a crash (upstream's crash
restart) gets no messages with its arguments: it first asks the node, through
`QueueEnv.on_restart`, to take over the queue's record and to read what the
store holds for it. A durable queue thus comes back with its persistent
messages in order, flagged redelivered as after an unclean stop; a non-durable
one comes back empty. One whose record went meanwhile stops.

Time: RabbitMQ stamps message expiry and ``x-death`` with the system clock, so
``now`` is the node clock's system time in milliseconds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

import actors
from actors import gen_server, trace
from actors.gen_server import GenServer
from actors.pid import CallExit, Pid, Ref
from actors.ranked_mailbox import RankedMailbox
from classic import commands as c
from classic import effects as e
from classic import history
from classic.config import QueueConfig
from classic.msg_store import MSG_STORE_CREDIT, STORE_CREDIT, STORE_WRITTEN, QueueStore
from classic.queue import ClassicQueue

__all__ = ["BUMP_CREDIT", "CLASSIC_EVENT", "CREDIT", "EOL", "FLOW", "LIMITED", "QueueEnv",
           "QueueProcess", "QueueState", "consumer_rows", "info"]

log = logging.getLogger("warren.classic")

CLASSIC_EVENT = "classic_queue_event"
"""First element of every message a queue process sends to a channel."""

EOL = "eol"
"""The event a watched channel gets when the queue is deleted (upstream ``queue_down``
via the channel's monitor: forget this queue's pending confirms and unacked messages)."""

TICK = "classic_tick"

CRASH_RESTART = "crash_restart"
"""What a restarted queue process sends itself, to recover outside its ``init``
(upstream's ``gen_server2:cast(self(), init)``): the supervisor is not held up
by the store and the metadata store."""

LIMITED = "limited"
"""A call ``(LIMITED, limiter, BasicConsume)``: a consumer whose channel has a global
qos; before each ack-required delivery to that channel the queue asks the channel's
limiter process (``rabbit_limiter:can_send``) with ``("can_send", want)``, which
grants up to `want` deliveries, and waits for its ``("resume", limiter)`` after a
refusal. What it was granted and could not deliver it gives back (``("ack", n)``).
"""

LIMITER_TIMEOUT = 30_000
"""How long the queue waits for a limiter's answer (the channel's own process)."""

FLOW = "flow"
"""A channel's publish sent with credit: ``(FLOW, Deliver)`` (a ``deliver`` with
``Flow = flow``); the queue acknowledges the credit as it handles it."""

BUMP_CREDIT = "bump_credit"
"""The event granting a channel more credit: ``(BUMP_CREDIT, quantity)``."""

RANKS = 2
"""Ranked lanes of the queue process's mailbox (`actors.ranked_mailbox`): acks
(``prioritise_cast`` 4), then ``notify_sent`` (2 while its consumers lag, which is
when a backlog of publishes can hold them back), ahead of everything else (0)."""

CREDIT: tuple[int, int] = (400, 200)
"""``credit_flow_default_credit``: a channel may send this many flow publishes to a
queue before it blocks, and the queue grants the second number more after handling
that many."""


def _no_store_write(messages: tuple[e.Delivery, ...]) -> tuple[int, ...]:
    """Without a message store, a write is done at once (nothing reaches a disk)."""
    return tuple(m.msg_id for m in messages)


@dataclass(frozen=True)
class QueueEnv:
    """What the node lends a queue process: the hooks for effects outside the queue.

    ``dead_letter`` publishes an at-most-once dead letter (routing belongs to the
    broker); ``store_write`` persists messages and returns the ids already
    written, which the process reports back as `Written` (no store yet: at
    once); ``on_deleted`` removes the queue's record and bindings.
    ``on_restart`` runs in a queue process restarted after a crash: it points the
    record at the new process and returns the messages the store holds for the
    queue (none for a non-durable queue), or ``None`` when the queue was deleted
    meanwhile. ``on_crash`` runs in a queue process ending with an error (not a
    deletion, not a shutdown; a process killed outright runs nothing), to mark the
    queue's record crashed until a restart takes it back. ``message_id`` finds a
    stored message's workload id for the history rows the process records while a
    trace sink is installed (`classic.history`).
    """

    dead_letter: Callable[[e.DeadLetter], None] | None = None
    store_write: Callable[[tuple[e.Delivery, ...]], tuple[int, ...]] = _no_store_write
    store_remove: Callable[[tuple[int, ...]], None] | None = None
    on_deleted: Callable[[QueueConfig, e.Deleted], None] | None = None
    on_restart: Callable[[QueueConfig, QueueStore | None],
                         tuple[e.Delivery, ...] | None] | None = None
    on_crash: Callable[[QueueConfig, Any], None] | None = None
    message_id: history.MessageId = lambda _content: None


@dataclass
class QueueState:
    """The process's state: the core plus what only a process has (monitors, a timer)."""

    core: ClassicQueue
    env: QueueEnv
    monitors: dict[Hashable, Ref]
    owner_ref: Ref | None = None
    credit_to: dict[Hashable, int] = field(default_factory=dict)
    """Flow publishes still to handle, per channel, before it is granted more credit."""
    senders: dict[Hashable, Ref] = field(default_factory=dict)
    """Monitors of the channels that publish with credit, so a dead one is forgotten."""
    store_credit: int = MSG_STORE_CREDIT[0]
    """Large bodies the store will still take before this queue is blocked by it."""
    deferred_grants: list[Hashable] = field(default_factory=list)
    """Channels owed credit while the store blocks the queue."""
    store: QueueStore | None = None
    """The queue's files in the node's message store (a durable queue on a node with a
    data dir); without it a store write counts as done at once."""
    timer: Ref | None = None
    timer_at: int | None = None
    deleted: bool = False
    limiters: dict[Hashable, Any] = field(default_factory=dict)
    """The limiter process of each channel whose consumers are under a global qos."""
    awaiting_resume: set[Hashable] = field(default_factory=set)
    """Channels whose limiter refused a delivery and will say when to ask again."""


def _now() -> int:
    return int(actors.get_node().clock.system_time_ms())


class QueueProcess(GenServer):
    """``rabbit_amqqueue_process``: calls and casts are the core's commands.

    A call ``command`` replies with the core's reply; a cast ``command`` runs
    it for its effects only. ``("info",)`` answers the introspection counts,
    ``("consumers",)`` the consumers as ``rabbit_amqqueue:consumers/1`` lists them.
    """

    def init(self, args: tuple[QueueConfig, QueueEnv, QueueStore | None,
                               tuple[e.Delivery, ...] | None]) -> Any:
        """`recovered` is ``None`` for a restart after a crash: the process recovers
        in its first message, `CRASH_RESTART`."""
        config, env, store, recovered = args
        actors.process_flag("trap_exit", True)
        proc = actors.current()
        proc.actor_inbox = RankedMailbox.replacing(proc.actor_inbox, _rank, RANKS)
        core = ClassicQueue(config, _now(), deep_checks=False)
        if recovered:
            core.restore(recovered, _now())
        state = QueueState(core, env, {}, store=store)
        if recovered is None:
            actors.send(actors.self(), (CRASH_RESTART,))
            return ("ok", state)
        owner = config.exclusive_owner
        if owner is not None:
            state.owner_ref = actors.monitor(owner)
        if trace.enabled():
            history.declared(config, len(recovered))
        self._arm(state)
        return ("ok", state)

    def _crash_restart(self, state: QueueState) -> Any:
        config = state.core.config
        log.error("Restarting crashed %s.", config.rs)
        recovered = (None if state.env.on_restart is None
                     else state.env.on_restart(config, state.store))
        if recovered is None:
            return ("stop", "normal", state)
        state.core = ClassicQueue(config, _now(), deep_checks=False)
        if recovered:
            state.core.restore(recovered, _now())
        if config.exclusive_owner is not None:  # an owner already gone deletes it
            state.owner_ref = actors.monitor(config.exclusive_owner)
        if trace.enabled():
            history.declared(config, len(recovered))
        self._arm(state)
        return ("noreply", state)

    def terminate(self, reason: Any, state: QueueState) -> None:
        """``rabbit_amqqueue_process:terminate/2``: a process that ends with an error
        leaves its messages where they are and marks its queue crashed."""
        if state.deleted or reason in ("normal", "shutdown") or state.env.on_crash is None:
            return
        if type(reason) is tuple and reason and reason[0] == "shutdown":
            return
        try:
            state.env.on_crash(state.core.config, reason)
        except Exception:  # the exit reason must stay the crash's own
            log.exception("crashed %s not marked crashed", state.core.config.rs)

    def handle_call(self, request: Any, from_: tuple[Pid, Ref], state: QueueState) -> Any:
        if request == ("info",):
            return ("reply", info(state.core), state)
        if request == ("consumers",):
            return ("reply", consumer_rows(state.core), state)
        if type(request) is tuple and request[0] == LIMITED:
            _, limiter, request = request
            state.limiters[request.channel] = limiter
            self._apply_core(state, c.LimiterCredit(request.channel, 0))
        reply = self._apply(state, request)
        if state.deleted:
            return ("stop", "normal", reply, state)
        return ("reply", reply, state)

    def handle_cast(self, msg: Any, state: QueueState) -> Any:
        if type(msg) is tuple and msg[0] == FLOW:
            msg = msg[1]
            self._credit_ack(state, msg.channel)
        self._apply(state, msg)
        return ("stop", "normal", state) if state.deleted else ("noreply", state)

    def handle_info(self, msg: Any, state: QueueState) -> Any:
        match msg:
            case (tag,) if tag == CRASH_RESTART:
                return self._crash_restart(state)
            case ("DOWN", ref, "process", _pid, _reason) if ref == state.owner_ref:
                state.owner_ref = None
                self._apply(state, c.OwnerDown())
            case ("DOWN", ref, "process", pid, _reason):
                if state.senders.get(pid) == ref:
                    del state.senders[pid]  # credit_flow's peer_down
                    state.credit_to.pop(pid, None)
                elif state.monitors.get(pid) == ref:
                    del state.monitors[pid]
                    state.limiters.pop(pid, None)
                    state.awaiting_resume.discard(pid)
                    self._apply(state, c.NotifyDown(pid))
            case ("resume", limiter):
                for channel, its in state.limiters.items():
                    if its == limiter:
                        state.awaiting_resume.discard(channel)
                self._apply_limits(state)
            case (tag, ids) if tag == STORE_WRITTEN:
                self._apply(state, c.Written(ids))
            case (tag, quantity) if tag == STORE_CREDIT:
                state.store_credit += quantity
                if state.store_credit > 0:
                    deferred, state.deferred_grants = state.deferred_grants, []
                    for channel in deferred:
                        self._grant(state, channel)
            case ("timeout", tref, msg_) if msg_ == TICK:
                if tref == state.timer:
                    state.timer = state.timer_at = None
                    self._apply(state, c.Tick())
            case ("EXIT", _pid, reason):
                return self._linked_exit(state, reason)
            case _:
                log.warning("classic queue %s: unexpected message %r",
                            state.core.config.rs, msg)
        return ("stop", "normal", state) if state.deleted else ("noreply", state)

    def _linked_exit(self, state: QueueState, reason: Any) -> Any:
        """A linked process other than the supervisor (whose EXIT the loop handles)
        ended: the queue stops with its reason, as ``rabbit_amqqueue_process`` does.

        What follows is the reason's, as in upstream's ``terminate/2`` and its
        ``intrinsic`` child spec: ``normal`` ends the queue as a deletion does
        (consumers cancelled, record and messages gone); ``shutdown`` or ``{shutdown,
        _}`` stops it, and its supervisor with it, without a restart; any other
        reason is a crash: the queue is marked crashed and its supervisor starts it
        again, recovering what the store holds (its consumers are gone, their
        channels see the old process go down)."""
        log.warning("classic queue %s: a linked process exited (%r); the queue stops",
                    state.core.config.rs, reason)
        if reason == "normal":
            self._apply(state, c.Delete())
            return ("stop", "normal", state)
        return ("stop", reason, state)

    # --- the shell ---------------------------------------------------------------------------

    def _apply(self, state: QueueState, command: c.Command) -> e.Reply:
        reply = self._apply_core(state, command)
        self._apply_limits(state)
        return reply

    def _apply_limits(self, state: QueueState) -> None:
        """Ask the limiters of channels held back only by their global qos for more
        (``rabbit_limiter:can_send``), hand what they grant to the core, and give
        back what it could not deliver at once, so no grant sits unused here while
        another queue of the channel waits."""
        if state.limiters and not state.deleted:
            for channel in state.core.limiter_starved():
                limiter = state.limiters.get(channel)
                if limiter is None or channel in state.awaiting_resume:
                    continue
                want = state.core.messages_ready
                try:
                    granted = gen_server.call(limiter, ("can_send", want), LIMITER_TIMEOUT)
                except CallExit:
                    continue  # the channel is going: its DOWN follows
                if granted < want:
                    state.awaiting_resume.add(channel)
                if granted:
                    self._apply_core(state, c.LimiterCredit(channel, granted))
                    left = state.core.limiter_credit(channel) or 0
                    if left:
                        gen_server.cast(limiter, ("ack", left))
                        self._apply_core(state, c.LimiterCredit(channel, 0))
        if not state.deleted:
            self._arm(state)

    def _apply_core(self, state: QueueState, command: c.Command) -> e.Reply:
        now = _now()
        if trace.enabled():
            seen = history.before(state.core, command)
            reply, effects = state.core.apply(command, now)
            history.record(state.core, command, reply, effects, seen, state.env.message_id, now)
        else:
            reply, effects = state.core.apply(command, now)
        self._execute(state, effects)
        return reply

    def _credit_ack(self, state: QueueState, channel: Hashable) -> None:
        """``credit_flow:ack``: one flow publish of `channel` handled; after every
        `CREDIT`[1] of them the channel may send that many more."""
        more = CREDIT[1]
        if channel not in state.senders:
            state.senders[channel] = actors.monitor(channel)
        left = state.credit_to.get(channel, more) - 1
        if left == 0:
            if state.store_credit > 0:
                self._grant(state, channel)
            else:  # blocked by the store: the channel waits with us
                state.deferred_grants.append(channel)
            left = more
        state.credit_to[channel] = left

    def _grant(self, state: QueueState, channel: Hashable) -> None:
        cfg = state.core.config
        actors.send(channel, (CLASSIC_EVENT, cfg.vhost, cfg.name, actors.self(),
                              (BUMP_CREDIT, CREDIT[1])))

    def _execute(self, state: QueueState, effects: list[e.Effect]) -> None:
        cfg = state.core.config
        for effect in effects:
            match effect:
                case e.Confirm(channel) | e.RejectPublish(channel) | e.Deliver(channel) | \
                        e.CancelConsumer(channel):
                    actors.send(channel, (CLASSIC_EVENT, cfg.vhost, cfg.name, actors.self(),
                                          effect))
                case e.Monitor(channel):
                    if channel not in state.monitors:
                        state.monitors[channel] = actors.monitor(channel)
                case e.Demonitor(channel):
                    ref = state.monitors.pop(channel, None)
                    if ref is not None:
                        actors.demonitor(ref, flush=True)
                case e.DeadLetter():
                    if state.env.dead_letter is not None:
                        state.env.dead_letter(effect)
                case e.StoreWrite(messages):
                    if state.store is not None:
                        # STORE_WRITTEN comes back, and STORE_CREDIT as it writes
                        state.store_credit -= state.store.write(messages)
                        continue
                    written = state.env.store_write(messages)
                    if written:
                        self._execute(state, state.core.apply(c.Written(written), _now())[1])
                case e.StoreRemove(msg_ids):
                    if state.store is not None:
                        state.store.remove(msg_ids)
                    elif state.env.store_remove is not None:
                        state.env.store_remove(msg_ids)
                case e.Deleted():
                    self._deleted(state, effect)
                case _:
                    raise TypeError(f"classic queue: unknown effect {effect!r}")

    def _deleted(self, state: QueueState, effect: e.Deleted) -> None:
        cfg = state.core.config
        state.deleted = True
        if state.store is not None:
            state.store.delete()
        for channel, ref in state.monitors.items():
            actors.demonitor(ref, flush=True)
            actors.send(channel, (CLASSIC_EVENT, cfg.vhost, cfg.name, actors.self(), EOL))
        state.monitors.clear()
        for ref in state.senders.values():
            actors.demonitor(ref, flush=True)
        state.senders.clear()
        if state.owner_ref is not None:
            actors.demonitor(state.owner_ref, flush=True)
            state.owner_ref = None
        if state.timer is not None:
            actors.cancel_timer(state.timer)
            state.timer = None
        if state.env.on_deleted is not None:
            state.env.on_deleted(cfg, effect)

    def _arm(self, state: QueueState) -> None:
        """One timer for the earlier of message expiry and queue expiry."""
        core = state.core
        due = core.message_expiry_deadline()
        queue_due = core.queue_expiry_deadline()
        if queue_due is not None and (due is None or queue_due < due):
            due = queue_due
        if due == state.timer_at:
            return
        if state.timer is not None:
            actors.cancel_timer(state.timer)
            state.timer = state.timer_at = None
        if due is not None:
            state.timer = actors.start_timer(max(0, due - _now()), actors.self(), TICK)
            state.timer_at = due


def _rank(msg: Any) -> int:
    """A message's lane in the mailbox (`RANKS`): 2 for an ack cast, 1 for a
    ``notify_sent`` cast, 0 for the rest."""
    if type(msg) is tuple and len(msg) == 2 and msg[0] == "$gen_cast":
        kind = type(msg[1])
        if kind is c.Ack:
            return 2
        if kind is c.NotifySent:
            return 1
    return 0


def info(core: ClassicQueue) -> dict[str, Any]:
    """The counts ``list_queues`` and a declare report."""
    return {"messages_ready": core.messages_ready,
            "messages_unacknowledged": core.messages_unacknowledged,
            "messages": core.messages,
            "consumers": core.consumer_count,
            "message_bytes": core.message_bytes}


def consumer_rows(core: ClassicQueue) -> list[dict[str, Any]]:
    """Each consumer with its channel, as the management API's ``/api/consumers``
    shows it; ``active`` is false for a single-active-consumer queue's waiting ones."""
    single = core.config.single_active_consumer
    return [{"tag": c.tag, "channel": str(c.channel), "ack_required": c.ack_required,
             "prefetch": c.prefetch, "priority": c.priority, "exclusive": c.exclusive,
             "active": not single or core.active == c.key, "arguments": dict(c.args)}
            for c in core.consumers]
