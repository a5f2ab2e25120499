"""``rabbit_fifo_dlx_worker``: at-least-once forwarding of a quorum queue's dead letters.

With ``dead-letter-strategy = at-least-once`` the queue keeps its dead-lettered
messages (they still count against its limits) until a worker on the leader's
node has re-published each one through the dead-letter exchange and *every*
target queue has confirmed it. Only then does the worker settle it back to the
source queue. Anything not confirmed within ``settle_timeout`` is published
again to the targets that have not confirmed (skipping targets whose own
session resends by itself), so a target may see a message twice but never
zero times; a message with no route stays pending and is retried on the same
timer.

One worker per source queue runs under the node's ``rabbit_fifo_dlx_sup``
(simple-one-for-one, transient workers). The queue's leader starts it when it
takes office (`ensure_worker_started`, called by the Ra server itself) and
stops it when it steps down (`ensure_worker_terminated`); the worker also stops
when the local Ra server goes away. A new worker's checkout makes the machine
hand every unsettled dead letter of the previous worker to it again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any

import actors
from actors import gen_server, trace
from fifo import dlx_client, mc
from fifo.dlx_client import DlxClientState
from fifo.dlx_router import DeadLetterRouter, RouterFactory
from fifo.mc import BasicMessage
from supervision import supervisor

__all__ = [
    "DLX_SUP",
    "DlxWorker",
    "DlxWorkerEnv",
    "Pending",
    "detect_cycles",
    "ensure_worker_started",
    "ensure_worker_terminated",
    "record_death",
    "start_dlx_sup",
]

log = logging.getLogger("warren.fifo.dlx")

DLX_SUP = "rabbit_fifo_dlx_sup"
#: ``dead_letter_worker_consumer_prefetch``
DEFAULT_PREFETCH = 32
#: ``dead_letter_worker_publisher_confirm_timeout`` (ms)
DEFAULT_SETTLE_TIMEOUT = 180_000


@dataclass(frozen=True)
class DlxWorkerEnv:
    """The node-wide settings of dead-letter workers (RabbitMQ's app env) and
    the broker's routing layer, one router per worker."""

    router_factory: RouterFactory
    prefetch: int = DEFAULT_PREFETCH
    settle_timeout: int = DEFAULT_SETTLE_TIMEOUT


@dataclass
class Pending:
    """``#pending{}``: one consumed dead letter awaiting publisher confirms."""

    consumed_msg_id: int
    delivery: Any
    reason: str
    original_routing_keys: list[Any]
    consumed_at: int
    unsettled: list[Any] = field(default_factory=list)
    rejected: list[Any] = field(default_factory=list)
    settled: list[Any] = field(default_factory=list)
    publish_count: int = 0
    last_published_at: int | None = None


@dataclass
class _State:
    queue_ref: Any
    server_id: Any
    monitor_ref: Any
    router: DeadLetterRouter
    dlx_client: DlxClientState
    settle_timeout: int
    exchange: Any = None
    routing_key: Any = None
    pendings: dict[int, Pending] = field(default_factory=dict)
    settled_ids: list[int] = field(default_factory=list)
    next_out_seq: int = 1
    timer: Any = None
    logged: dict[str, Any] = field(default_factory=dict)


# --- messages ------------------------------------------------------------------------------


def record_death(reason: str, source_queue: Any, msg: Any) -> Any:
    """Note on the message that it died in `source_queue` (newest death first).

    A container that keeps its own death history (``mc_record_death``, as the
    channel's stored messages do) records it itself, with counts and times.
    """
    if hasattr(msg, "mc_record_death"):
        return msg.mc_record_death(reason, source_queue, _now())
    deaths = mc.get_annotation("deaths", msg) or ()
    return mc.set_annotation("deaths", ((source_queue, reason), *deaths), msg)


def _clear_ttl(msg: Any) -> Any:
    # a dead letter must not expire again in its target because of its old TTL
    return replace(msg, ttl=None) if isinstance(msg, BasicMessage) else msg


def detect_cycles(reason: str, msg: Any, queues: list[Any]) -> tuple[list[Any], list[Any]]:
    """``rabbit_dead_letter:detect_cycles``: ``(cyclic, routable)`` target queues.

    A target is cyclic when the message already died there and no death since
    then was a rejection (a consumer's reject breaks the loop); rejected
    messages never cycle.
    """
    if reason == "rejected":
        return ([], list(queues))
    deaths = mc.get_annotation("deaths", msg) or ()
    cyclic: list[Any] = []
    ok: list[Any] = []
    for q in queues:
        is_cycle = False
        for queue, why in deaths:
            if why == "rejected":
                break
            if queue == q:
                is_cycle = True
                break
        (cyclic if is_cycle else ok).append(q)
    return (cyclic, ok)


def _queue_name(queue_ref: Any) -> Any:
    return queue_ref[-1] if isinstance(queue_ref, tuple) else queue_ref


def _now() -> int:
    return int(actors.get_node().clock.system_time_ms())


# --- supervision -----------------------------------------------------------------------------


class _DlxSup:
    def __init__(self, env: DlxWorkerEnv) -> None:
        self.env = env

    def init(self, _args: Any) -> Any:
        child = {"id": "rabbit_fifo_dlx_worker", "restart": "transient",
                 "start": (_start_worker, [self.env])}
        return ("ok", (("simple_one_for_one", 100, 1), [child]))


def _start_worker(env: DlxWorkerEnv, queue_ref: Any, server_id: Any) -> Any:
    return gen_server.start_link(DlxWorker, (env, queue_ref, server_id))


def start_dlx_sup(env: DlxWorkerEnv) -> Any:
    """Start this node's ``rabbit_fifo_dlx_sup``; it outlives the calling process."""
    result = supervisor.start_link(_DlxSup(env), None, name=DLX_SUP)
    if result[0] == "ok":
        actors.unlink(result[1])
    return result


def ensure_worker_started(queue_ref: Any, pid: Any, server_id: Any) -> None:
    """Called by a member becoming leader: a worker must run on this node.

    A start failure raises, crashing the Ra server, so another member leads.
    """
    if pid is not None and getattr(pid, "node", None) == actors.node() \
            and actors.is_process_alive(pid):
        return
    result = supervisor.start_child(DLX_SUP, [queue_ref, server_id])
    if result[0] != "ok":
        raise RuntimeError(("dlx_worker_start_failed", queue_ref, result))


def ensure_worker_terminated(pid: Any) -> None:
    """Called by a member that stopped leading: stop the worker if it is ours."""
    if pid is not None and getattr(pid, "node", None) == actors.node() \
            and actors.is_process_alive(pid):
        supervisor.terminate_child(DLX_SUP, pid)


# --- the worker ------------------------------------------------------------------------------


class DlxWorker(gen_server.GenServer):
    """Consumes the source queue's dead letters and forwards them with confirms."""

    def init(self, args: Any) -> Any:
        # the checkout needs the Ra server that is starting us: do it after init
        return ("ok", None, ("continue", args))

    def handle_continue(self, args: Any, _st: Any) -> Any:
        env, queue_ref, server_id = args
        match dlx_client.checkout(queue_ref, server_id, env.prefetch):
            case ("ok", client_state):
                pass
            case ("error", "non_local_leader"):
                return ("stop", ("shutdown", "non_local_leader"), None)
            case err:
                return ("stop", err, None)
        if trace.enabled():  # ties this worker's pid to its queue in the history
            trace.emit("dlx_worker_checkout", queue=str(_queue_name(queue_ref)),
                       node=actors.node(), pid=actors.self())
        st = _State(queue_ref=queue_ref, server_id=server_id,
                    monitor_ref=actors.monitor(server_id),
                    router=env.router_factory(queue_ref), dlx_client=client_state,
                    settle_timeout=env.settle_timeout)
        self._lookup_topology(st)
        return ("noreply", st)

    def terminate(self, reason: Any, st: Any) -> None:
        if isinstance(st, _State):
            self._cancel_timer(st)

    def handle_call(self, request: Any, from_: Any, st: _State) -> Any:
        if request == "pendings":
            return ("reply", dict(st.pendings), st)
        log.info("dlx worker: unhandled call %r", request)
        return ("noreply", st)

    def handle_cast(self, msg: Any, st: _State) -> Any:
        match msg:
            case ("dlx_event", _leader, "lookup_topology"):
                self._lookup_topology(st)
                self._redeliver_and_ack(st)
            case ("dlx_event", leader_pid, evt):
                st.dlx_client, actions = dlx_client.handle_ra_event(leader_pid, evt,
                                                                    st.dlx_client)
                self._handle_actions(actions, st)
            case ("queue_event", queue, evt):
                self._handle_actions(st.router.handle_event(queue, evt), st)
            case "settle_timeout":
                st.timer = None
                self._redeliver_and_ack(st)
            case _:
                log.info("dlx worker: unhandled cast %r", msg)
        return ("noreply", st)

    def handle_info(self, msg: Any, st: _State) -> Any:
        match msg:
            case ("DOWN", ref, "process", _, _) if ref == st.monitor_ref:
                # the local member is gone; the next leader starts its own worker
                return ("stop", "normal", st)
            case ("ra_event", from_, _evt):
                # a target queue's Ra event (confirms of our publishes)
                self._handle_actions(st.router.handle_event(from_, msg), st)
                return ("noreply", st)
        log.info("dlx worker: unhandled info %r", msg)
        return ("noreply", st)

    # --- topology ----------------------------------------------------------------------------

    def _lookup_topology(self, st: _State) -> None:
        st.exchange, st.routing_key = st.router.lookup_topology(st.queue_ref)

    def _lookup_dlx(self, st: _State) -> bool:
        if st.router.exchange_exists(st.exchange):
            return True
        if st.logged.get("missing_dlx") != st.exchange:
            log.warning("Cannot forward any dead-letter messages from source quorum %r because "
                        "its configured dead-letter-exchange %r does not exist.",
                        st.queue_ref, st.exchange)
            st.logged["missing_dlx"] = st.exchange
        return False

    def _log_no_route_once(self, st: _State) -> None:
        key = (st.exchange, st.routing_key)
        if st.logged.get("no_route") != key:
            log.warning("Cannot forward any dead-letter messages from source quorum %r with "
                        "configured dead-letter-exchange %r and dead-letter-routing-key %r: "
                        "no queue to route to.", st.queue_ref, st.exchange, st.routing_key)
            st.logged["no_route"] = key

    def _routing_keys(self, st: _State, original: list[Any]) -> list[Any]:
        return original if st.routing_key is None else [st.routing_key]

    def _prepare(self, st: _State, msg: Any, keys: list[Any]) -> Any:
        msg = _clear_ttl(msg)
        msg = mc.set_annotation("routing_keys", list(keys), msg)
        return mc.set_annotation("exchange", st.exchange, msg)

    # --- consuming and forwarding ------------------------------------------------------------

    def _handle_actions(self, actions: list[Any], st: _State) -> None:
        for action in actions:
            match action:
                case ("deliver", msgs):
                    exists = self._lookup_dlx(st)
                    for _qref, msg_id, msg, reason in msgs:
                        self._forward(st, msg, msg_id, reason, exists)
                    self._maybe_set_timer(st)
                case ("settled", queue, seqs):
                    for seq in seqs:
                        self._handle_settled(st, queue, seq)
                    self._ack(st)
                    self._maybe_cancel_timer(st)
                case ("rejected", queue, seqs):
                    for seq in seqs:
                        self._rejected(st, seq, [queue])

    def _forward(self, st: _State, msg: Any, msg_id: int, reason: str, exists: bool) -> None:
        now = _now()
        original = list(mc.get_annotation("routing_keys", msg) or [])
        keys = self._routing_keys(st, original)
        msg = self._prepare(st, record_death(reason, _queue_name(st.queue_ref), msg), keys)
        targets: list[Any] = []
        if exists:
            cyclic, targets = detect_cycles(reason, msg, st.router.route(st.exchange, keys, msg))
            if cyclic:
                log.warning("Message has been dead-lettered in a cycle to %r; dropping those "
                            "targets", cyclic)
            if not targets:
                self._log_no_route_once(st)
        seq = st.next_out_seq
        st.next_out_seq += 1
        pend = Pending(consumed_msg_id=msg_id, delivery=msg, reason=reason,
                       original_routing_keys=original, consumed_at=now)
        st.pendings[seq] = pend
        if targets:
            pend.publish_count, pend.last_published_at = 1, now
            pend.unsettled = list(targets)
            self._deliver(st, msg, seq, targets)

    def _deliver(self, st: _State, msg: Any, seq: int, targets: list[Any]) -> None:
        match st.router.publish(targets, msg, seq):
            case ("ok", actions):
                self._handle_actions(actions, st)
            case err:
                log.debug("Failed to deliver dead letter %d to %r: %r", seq, targets, err)
                self._rejected(st, seq, list(targets))

    def _rejected(self, st: _State, seq: int, queues: list[Any]) -> None:
        pend = st.pendings.get(seq)
        if pend is None:
            return
        pend.unsettled = [q for q in pend.unsettled if q not in queues]
        pend.rejected = [*queues, *pend.rejected]

    def _handle_settled(self, st: _State, queue: Any, seq: int) -> None:
        pend = st.pendings.get(seq)
        if pend is None:
            log.debug("Ignoring confirm for unknown dead letter %d from %r", seq, queue)
            return
        if (pend.unsettled == [queue] and not pend.rejected) or (
                not pend.unsettled and pend.rejected == [queue]):
            del st.pendings[seq]
            st.settled_ids.insert(0, pend.consumed_msg_id)
            return
        pend.unsettled = [q for q in pend.unsettled if q != queue]
        pend.rejected = [q for q in pend.rejected if q != queue]
        pend.settled = [queue, *pend.settled]

    def _ack(self, st: _State) -> None:
        if st.settled_ids:
            st.dlx_client = dlx_client.settle(st.settled_ids, st.dlx_client)
            st.settled_ids = []

    # --- retries -------------------------------------------------------------------------------

    def _redeliver_and_ack(self, st: _State) -> None:
        self._redeliver_messages(st)
        self._ack(st)
        self._maybe_set_timer(st)

    def _redeliver_messages(self, st: _State) -> None:
        if not self._lookup_dlx(st):
            return  # keep everything until the exchange exists again
        now = _now()
        for seq in sorted(st.pendings):
            pend = st.pendings.get(seq)
            if pend is None:
                continue
            last = pend.last_published_at
            if last is None or last + st.settle_timeout <= now:
                self._redeliver(st, seq, pend, now)

    def _redeliver(self, st: _State, seq: int, pend: Pending, now: int) -> None:
        keys = self._routing_keys(st, pend.original_routing_keys)
        msg = self._prepare(st, pend.delivery, keys)
        routed = st.router.route(st.exchange, keys, msg)
        if not routed and pend.settled:
            # the route went away after at least one target confirmed: that is enough
            del st.pendings[seq]
            st.settled_ids.insert(0, pend.consumed_msg_id)
            return
        unsettled = [q for q in routed if q not in pend.settled]
        self_resending = [q for q in pend.unsettled if st.router.redelivers(q)]
        cyclic, targets = detect_cycles(pend.reason, msg,
                                        [q for q in unsettled if q not in self_resending])
        if cyclic:
            log.warning("Message has been dead-lettered in a cycle to %r", cyclic)
        if not targets:
            if not routed:
                self._log_no_route_once(st)
            return
        pend.publish_count += 1
        pend.last_published_at = now
        pend.delivery = msg
        pend.unsettled = unsettled
        pend.rejected = []
        self._deliver(st, msg, seq, targets)

    def _maybe_set_timer(self, st: _State) -> None:
        if st.timer is None and st.pendings:
            st.timer = actors.send_after(st.settle_timeout, actors.self(),
                                         ("$gen_cast", "settle_timeout"))

    def _maybe_cancel_timer(self, st: _State) -> None:
        if st.timer is not None and not st.pendings:
            self._cancel_timer(st)

    def _cancel_timer(self, st: _State) -> None:
        if st.timer is not None:
            actors.cancel_timer(st.timer)
            st.timer = None
