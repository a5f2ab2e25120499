"""``rabbit_fifo_client``: a channel's session with one quorum queue.

Every operation takes a `ClientState` (never modified) and returns an
`fifo.client_effects.Out`: the new state, *actions* for the channel (flow
control, settled publishes, deliveries) and *effects* for Ra (commands to
pipeline, synchronous calls). Synchronous calls follow the replay protocol
described in `fifo.client_effects`.

Publishes are tracked with two counters: ``next_seq`` correlates every
pipelined command with its ``applied`` notification, ``next_enqueue_seq`` is
the per-publisher sequence the machine uses to drop duplicates and refuse
gaps. Keeping every unconfirmed command in ``pending`` and resending all of it,
in order, whenever the leader changes is what gives exactly-once enqueue
without any acknowledgement protocol of its own (as upstream's ``resend_all_pending``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fifo import v2_client
from fifo.client_calls import Calls, run
from fifo.client_delivery import handle_delivery
from fifo.client_effects import (
    CancelTimer,
    ClientEffect,
    ClientExit,
    FindLeader,
    Members,
    Out,
    PipelineCommand,
    ProcessCommand,
)
from fifo.client_records import (
    UNLIMITED_PREFETCH_COUNT,
    ClientConsumer,
    ClientState,
    cluster_name,
    pick_server,
    sorted_servers,
)
from fifo.client_send import (
    consumer_id,
    consumer_key,
    qref,
    resend_all_pending,
    send_command,
    send_pending,
    set_timer,
    stash,
    transform_msgs,
)
from fifo.commands import (
    make_checkout,
    make_credit,
    make_discard,
    make_enqueue,
    make_modify,
    make_register_enqueuer,
    make_return,
    make_settle,
)
from fifo.records import erl_sorted

__all__ = [
    "cancel_checkout",
    "checkout",
    "credit",
    "dequeue",
    "discard",
    "enqueue",
    "handle_ra_event",
    "modify",
    "pending_size",
    "return_",
    "settle",
    "untracked_enqueue",
]

_REGISTER_SOFT_FAILURES = ("no_more_servers_to_try", ("shutdown", "delete"))


# --- publishing -----------------------------------------------------------------------------


def enqueue(qname: Any, correlation: Any, msg: Any, state: ClientState,
            replies: Sequence[Any] = ()) -> Out:
    """Publish `msg`; `correlation` comes back in a ``settled`` action once applied.

    The very first publish registers the process as an enqueuer synchronously,
    which is how the session learns that a ``reject_publish`` queue is full
    before sending anything it would then have to nack.
    """

    def op(calls: Calls, s: ClientState, fx: list[ClientEffect]) -> Out:
        if s.queue_status is None and s.next_enqueue_seq == 1:
            reg = ProcessCommand("process_command", s.cfg.servers,
                                 make_register_enqueuer(s.cfg.self_pid), s.cfg.timeout)
            match calls.call(reg, fx):
                case ("ok", "reject_publish", leader):
                    s.leader = leader
                    s.queue_status = "reject_publish"
                    return Out("reject_publish", s, [], fx)
                case ("ok", "ok", leader):
                    s.leader = leader
                    s.queue_status = "go"
                case ("error", (reason, _)) if reason == "no_more_servers_to_try":
                    return Out("reject_publish", state, [], fx)
                case ("error", ("shutdown", "delete")) | ("timeout", _):
                    return Out("reject_publish", state, [], fx)
                case err:
                    raise ClientExit(err)
        if s.queue_status == "reject_publish":
            return Out("reject_publish", s, [], fx)
        if s.queue_status != "go":
            raise ClientExit(("unexpected_queue_status", s.queue_status))
        was_slow = s.slow
        cmd = make_enqueue(s.cfg.self_pid, s.next_enqueue_seq, msg,
                           compact=s.cfg.machine_version > 2)
        fx.append(PipelineCommand("pipeline_command", pick_server(s), cmd, s.next_seq, "low"))
        s.slow = len(s.pending) >= s.cfg.soft_limit
        s.pending[s.next_seq] = (correlation, cmd)
        s.next_seq += 1
        s.next_enqueue_seq += 1
        if s.slow and not was_slow:
            set_timer(qname, s, fx)
            return Out("ok", s, [("block", cluster_name(s))], fx)
        return Out("ok", s, [], fx)

    return run(op, state, replies)


def untracked_enqueue(servers: Sequence[Any], msg: Any) -> list[Any]:
    """A fire-and-forget publish: no publisher, no sequence, no confirm, no resend."""
    cmd = make_enqueue(None, None, msg)
    return [PipelineCommand("pipeline_command", servers[0], cmd, None, "low")]


def pending_size(state: ClientState) -> int:
    return len(state.pending)


# --- settlement and credit ------------------------------------------------------------------


def _settlement(kind: str, tag: Any, msg_ids: Sequence[int], state: ClientState) -> Out:
    if not msg_ids:
        raise ValueError(f"{kind} needs at least one message id")

    def op(_calls: Calls, s: ClientState, fx: list[ClientEffect]) -> Out:
        key = consumer_key(tag, s)
        if s.slow:
            stash(kind, key, list(msg_ids), s)
        else:
            make = {"settle": make_settle, "return": make_return, "discard": make_discard}[kind]
            send_command(pick_server(s), None, make(key, msg_ids), "normal", s, fx)
        return Out("ok", s, [], fx)

    return run(op, state, ())


def settle(tag: Any, msg_ids: Sequence[int], state: ClientState) -> Out:
    """Ack. While slow the ids are stashed and sent when the session unblocks."""
    return _settlement("settle", tag, msg_ids, state)


def return_(tag: Any, msg_ids: Sequence[int], state: ClientState) -> Out:
    """Requeue (``return`` is a Python keyword)."""
    return _settlement("return", tag, msg_ids, state)


def discard(tag: Any, msg_ids: Sequence[int], state: ClientState) -> Out:
    """Reject without requeue (dead-letter if configured)."""
    return _settlement("discard", tag, msg_ids, state)


def modify(tag: Any, msg_ids: Sequence[int], delivery_failed: bool, undeliverable_here: bool,
           annotations: Mapping[str, Any], state: ClientState) -> Out:
    """Send a ``modify`` now, after anything stashed for the consumer.

    It cannot be batched with stashed settlements (it carries per-call
    annotations), and sending the stash first keeps the consumer's outcomes
    in the order the channel produced them.
    """
    if not msg_ids:
        raise ValueError("modify needs at least one message id")

    def op(_calls: Calls, s: ClientState, fx: list[ClientEffect]) -> Out:
        key = consumer_key(tag, s)
        send_pending(key, s, fx)
        cmd = make_modify(key, msg_ids, delivery_failed, undeliverable_here, annotations)
        send_command(pick_server(s), None, cmd, "normal", s, fx)
        return Out("ok", s, [], fx)

    return run(op, state, ())


def credit(tag: Any, delivery_count: int, link_credit: int, drain: bool,
           state: ClientState) -> Out:
    """Grant link credit (AMQP 1.0 flow); never stashed, the peer is waiting for it."""

    def op(_calls: Calls, s: ClientState, fx: list[ClientEffect]) -> Out:
        cmd = make_credit(consumer_key(tag, s), link_credit, delivery_count, drain)
        send_command(pick_server(s), None, cmd, "normal", s, fx)
        return Out("ok", s, [], fx)

    return run(op, state, ())


# --- consumers ------------------------------------------------------------------------------


def checkout(tag: Any, credit_mode: tuple[str, int], meta: Mapping[str, Any],
             state: ClientState, replies: Sequence[Any] = ()) -> Out:
    """Attach a consumer; ``result`` is the machine's consumer info map."""

    def op(calls: Calls, s: ClientState, fx: list[ClientEffect]) -> Out:
        spec: Any = ("auto", credit_mode)
        if tuple(credit_mode) == ("simple_prefetch", 0):
            spec = ("auto", ("simple_prefetch", UNLIMITED_PREFETCH_COUNT))
        if s.cfg.machine_version <= 2:
            spec = _v2_checkout_spec(spec[1])
        cmd = make_checkout(consumer_id(tag, s), spec, meta)
        reply = calls.call(ProcessCommand("process_command", sorted_servers(s), cmd,
                                          s.cfg.timeout), fx)
        match reply:
            case ("ok", "ok", leader):
                # machine 2 replies a bare ok: the key is the consumer id and the
                # first message id the session expects is 0 (`last_msg_id = -1`)
                ack = meta.get("ack", True)
                old = s.consumers.get(tag)
                last = -1 if old is None else old.last_msg_id
                s.consumers[tag] = ClientConsumer(consumer_id(tag, s), last, ack)
                s.leader = leader
                return Out("ok", s, [], fx, {})
            case ("ok", ("ok", info), leader):
                ack = meta.get("ack", True)
                old = s.consumers.get(tag)
                if old is not None:
                    s.consumers[tag] = ClientConsumer(old.key, old.last_msg_id, ack)
                else:
                    last = None if info["num_checked_out"] > 0 else info["next_msg_id"] - 1
                    key = info.get("key", consumer_id(tag, s))
                    s.consumers[tag] = ClientConsumer(key, last, ack)
                s.leader = leader
                return Out("ok", s, [], fx, info)
        return _error(reply, state, fx)

    return run(op, state, replies)


def _v2_checkout_spec(mode: tuple[str, int]) -> tuple[str, int, str]:
    """3.10's spec ``{auto, N, simple_prefetch | credited}`` (credited starts at 0)."""
    if mode[0] == "credited":
        return ("auto", 0, "credited")
    return ("auto", mode[1], "simple_prefetch")


def cancel_checkout(tag: Any, reason: str, state: ClientState,
                    replies: Sequence[Any] = ()) -> Out:
    """Detach a consumer (`reason` ``cancel`` or ``remove``) after flushing its stash."""

    def op(calls: Calls, s: ClientState, fx: list[ClientEffect]) -> Out:
        c = s.consumers.get(tag)
        if c is None:
            return Out("ok", s, [], fx)
        servers = sorted_servers(s)
        send_pending(c.key, s, fx)
        del s.consumers[tag]
        # 3.10 knows only cancel: what the consumer holds stays with it until settled
        cmd = make_checkout(consumer_id(tag, s),
                            "cancel" if s.cfg.machine_version <= 2 else reason, {})
        reply = calls.call(ProcessCommand("process_command", servers, cmd, s.cfg.timeout), fx)
        match reply:
            case ("ok", _, leader):
                s.leader = leader
                return Out("ok", s, [], fx)
        # upstream drops the session state here; the commands already flushed are
        # pending in `s`, so hand that back rather than the stale input
        return _error(reply, s, fx)

    return run(op, state, replies)


def dequeue(qname: Any, tag: Any, settlement: str, state: ClientState,
            replies: Sequence[Any] = (), timeout: int | None = None) -> Out:
    """``basic.get``: ``result`` is ``(MsgsReady, (QName, QRef, MsgId, Redelivered, Msg))``.

    `timeout` is the consumer timeout a 4.3 queue holds the message for unsettled
    (``None``: the machine's default)."""

    def op(calls: Calls, s: ClientState, fx: list[ClientEffect]) -> Out:
        meta = {} if timeout is None else {"timeout": timeout}
        cmd = make_checkout(consumer_id(tag, s), ("dequeue", settlement), meta)
        reply = calls.call(ProcessCommand("process_command", (pick_server(s),), cmd,
                                          s.cfg.timeout), fx)
        match reply:
            case ("ok", ("dequeue", "empty"), leader):
                s.leader = leader
                return Out("empty", s, [], fx)
            case ("ok", ("dequeue", (msg_id, (header, msg)), ready), leader):
                s.leader = leader
                if s.cfg.machine_version <= 2:
                    delivered = v2_client.dequeued(qname, qref(leader), msg_id, header, msg)
                else:
                    [delivered] = transform_msgs(qname, leader, [(msg_id, (header, msg))],
                                                 s.cfg.delivery_count_header)
                return Out("ok", s, [], fx, (ready, delivered))
            case ("ok", ("error", _) as err, _):
                return _error(err, state, fx)
        return _error(reply, state, fx)

    return run(op, state, replies)


def _error(reply: Any, state: ClientState, fx: list[ClientEffect]) -> Out:
    tag = reply[0] if isinstance(reply, tuple) and reply[0] in ("error", "timeout") else "error"
    return Out(tag, state, [], fx, reply)


# --- ra events (``handle_ra_event/4``) -----------------------------------------------------------


def handle_ra_event(qname: Any, from_: Any, evt: Any, state: ClientState,
                    replies: Sequence[Any] = ()) -> Out:
    """Feed one ``{ra_event, From, Evt}`` (or a session timer message) to the session."""

    def op(calls: Calls, s: ClientState, fx: list[ClientEffect]) -> Out:
        match evt:
            case ("applied", seqs):
                return _applied(calls, qname, from_, seqs, s, fx)
            case ("machine", ("delivery", *_) as delivery):
                return handle_delivery(calls, qname, from_, delivery, s, fx)
            case ("machine", ("queue_status", status)):
                s.queue_status = status
                return Out("ok", s, [], fx)
            case ("machine", "leader_change"):
                s.leader = from_
                resend_all_pending(s, fx)
                return Out("ok", s, [], fx)
            case ("machine", "eol"):
                return Out("eol", s, [("unblock", cluster_name(s))], fx)
            case ("machine", other):
                return Out("ok", s, [other], fx)
            case ("rejected", ("not_leader", leader, _seq)):
                if leader is None or leader == s.leader:
                    return Out("ok", s, [], fx)
                s.leader = leader
                resend_all_pending(s, fx)
                _cancel_timer(s, fx)
                return Out("ok", s, [], fx)
            case "timeout":
                leader = calls.call(FindLeader("find_leader", s.cfg.servers), fx)
                if leader is None:
                    set_timer(qname, s, fx)
                else:
                    s.leader = leader
                    resend_all_pending(s, fx)
                return Out("ok", s, [], fx)
            case "close_cached_segments":
                return Out("ok", s, [], fx)
        raise ValueError(f"unexpected ra_event {evt!r}")

    return run(op, state, replies)


def _applied(calls: Calls, qname: Any, from_: Any, seqs: Iterable[tuple[int, Any]],
             s: ClientState, fx: list[ClientEffect]) -> Out:
    old_leader = s.leader
    s.leader = from_
    corrs: list[Any] = []
    actions: list[Any] = []
    for seq, reply in seqs:
        _add_actions(reply, actions)
        entry = s.pending.get(seq)
        if entry is None or reply == "not_enqueued":
            continue
        del s.pending[seq]
        if entry[0] is not None:
            corrs.insert(0, entry[0])
    if old_leader != from_:
        # applied notifications from an old leader can still arrive after a new
        # one was elected: ask before resending everything
        match calls.call(Members("members", from_), fx):
            case ("ok", _, actual) if actual != old_leader:
                s.leader = actual
                resend_all_pending(s, fx)
    if corrs:
        actions.insert(0, ("settled", qname, corrs))
    if s.slow and len(s.pending) < s.cfg.soft_limit:
        s.slow = False
        _cancel_timer(s, fx)
        unsent, s.unsent_commands = s.unsent_commands, {}
        server = pick_server(s)
        for cmd in _unsent_commands(unsent):
            send_command(server, None, cmd, "normal", s, fx)
        actions.insert(0, ("unblock", cluster_name(s)))
    return Out("ok", s, actions, fx)


def _add_actions(reply: Any, acc: list[Any]) -> None:
    match reply:
        case "ok" | "not_enqueued":
            return
        case ("multi", replies):
            for r in replies:
                _add_actions(r, acc)
        case ("send_drained", (tag, drained)):
            acc.append(("credit_reply_v1", tag, drained, 0, True))
        case _:
            acc.append(reply)


def _unsent_commands(unsent: Mapping[Any, tuple[list[int], list[int], list[int]]]
                     ) -> list[Any]:
    """Stashed settlements as commands: per consumer settle, return, discard."""
    out: list[Any] = []
    for key in reversed(erl_sorted(unsent)):
        settles, returns, discards = unsent[key]
        if settles:
            out.append(make_settle(key, settles))
        if returns:
            out.append(make_return(key, returns))
        if discards:
            out.append(make_discard(key, discards))
    return out


def _cancel_timer(s: ClientState, fx: list[ClientEffect]) -> None:
    if s.timer_state is not None:
        fx.append(CancelTimer("cancel_timer", s.timer_state))
        s.timer_state = None
