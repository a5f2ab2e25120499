"""Sending, stashing and resending commands; shared by the client operations.

All helpers mutate the private state copy an operation works on and append
the Ra effects to `fx`, in the order the owner must perform them.
"""

from __future__ import annotations

from typing import Any

from fifo import mc
from fifo.client_effects import CastAuxCommand, ClientEffect, PipelineCommand, SendAfter
from fifo.client_records import TIMER_TIME, ClientState, pick_server
from fifo.commands import make_discard, make_return, make_settle
from fifo.dlx import annotate_msg

__all__ = [
    "add_delivery_count_header",
    "consumer_id",
    "consumer_key",
    "qref",
    "resend_all_pending",
    "send_command",
    "send_pending",
    "set_timer",
    "stash",
    "transform_msgs",
]


def consumer_id(tag: Any, s: ClientState) -> tuple[Any, Any]:
    """Consumer ids are always ``{Tag, self()}``."""
    return (tag, s.cfg.self_pid)


def consumer_key(tag: Any, s: ClientState) -> Any:
    """The key the machine gave the consumer, else its id (which the machine also accepts)."""
    c = s.consumers.get(tag)
    return consumer_id(tag, s) if c is None else c.key


def _is_return(cmd: Any) -> bool:
    return isinstance(cmd, tuple) and len(cmd) == 3 and cmd[0] == "return"


def send_command(server: Any, correlation: Any, cmd: Any, priority: str, s: ClientState,
                 fx: list[ClientEffect]) -> None:
    """Send `cmd` tracked under a fresh ``next_seq`` and recompute ``slow``.

    Against machine versions up to 7 returns go to the leader's aux handler,
    which decides between re-appending the return or requeueing the bodies
    (docs/fifo.md); it still appends with ``{notify, Seq, self()}`` so the return is
    confirmed like any other command.
    """
    seq = s.next_seq
    if _is_return(cmd) and s.cfg.machine_version <= 7:
        fx.append(CastAuxCommand("cast_aux_command", server, (cmd, seq, s.cfg.self_pid)))
    else:
        fx.append(PipelineCommand("pipeline_command", server, cmd, seq, priority))
    s.slow = len(s.pending) >= s.cfg.soft_limit
    s.pending[seq] = (correlation, cmd)
    s.next_seq = seq + 1


def resend_all_pending(s: ClientState, fx: list[ClientEffect]) -> None:
    """Resend every pending command, oldest first, to the current leader.

    Each keeps its command (so the same enqueue sequence number) but gets a new
    correlation. Sending them in ascending order is what lets the machine
    restore the publisher's sequence: a duplicate is answered ``ok``, a gap
    ``not_enqueued`` (and stays pending). Resends ignore the soft limit: the
    commands were already counted when first sent.
    """
    leader = pick_server(s)
    for old in sorted(s.pending):
        corr, cmd = s.pending.pop(old)
        seq = s.next_seq
        fx.append(PipelineCommand("pipeline_command", leader, cmd, seq, "low"))
        s.pending[seq] = (corr, cmd)
        s.next_seq = seq + 1


def stash(kind: str, key: Any, msg_ids: list[int], s: ClientState) -> None:
    """Hold a settlement while slow; settles may merge in any order, the others keep it."""
    settles, returns, discards = s.unsent_commands.get(key, ([], [], []))
    if kind == "settle":
        settles = msg_ids + settles
    elif kind == "return":
        returns = returns + msg_ids
    else:
        discards = discards + msg_ids
    s.unsent_commands[key] = (settles, returns, discards)


def send_pending(key: Any, s: ClientState, fx: list[ClientEffect]) -> None:
    """Flush what is stashed for one consumer (before a modify or a cancel)."""
    stashed = s.unsent_commands.pop(key, None)
    if stashed is None:
        return
    settles, returns, discards = stashed
    server = pick_server(s)
    for ids, make in ((settles, make_settle), (returns, make_return),
                      (discards, make_discard)):
        if ids:
            send_command(server, None, make(key, ids), "normal", s, fx)


def set_timer(qname: Any, s: ClientState, fx: list[ClientEffect]) -> None:
    """Arm the slow-state timer: if nothing is applied for a while the leader may be gone."""
    leader = pick_server(s)
    fx.append(SendAfter("send_after", "slow", TIMER_TIME,
                        ("$gen_cast", ("queue_event", qname, (leader, "timeout")))))
    s.timer_state = "slow"


def qref(server: Any) -> Any:
    """The queue reference in deliveries: the Ra cluster name of the server id."""
    return server[0] if isinstance(server, tuple) else server


def add_delivery_count_header(msg: Any, header: Any,
                              counter: str = "acquired_count") -> tuple[Any, bool]:
    """Project the machine's counters onto the message, as ``rabbit_fifo_client`` does.

    `counter` is the header counter ``x-delivery-count`` carries (the node release's
    choice): ``acquired_count``, every earlier delivery (4.0 to 4.2), or
    ``delivery_count``, failed deliveries only (4.3, which also sets
    ``x-acquired-count``, and leaves ``x-delivery-count`` out while no delivery
    failed). The AMQP 1.0 ``delivery_count`` annotation only counts failed
    deliveries. A header with a delivery count but no acquired count was written by
    an older machine version and is read as if the two were the same.
    """
    if isinstance(header, dict):
        acquired = header.get("acquired_count")
        # a machine that keeps one counter (3.10's) has no acquired count to show apart
        both_counters = isinstance(acquired, int)
        if not both_counters and isinstance(header.get("delivery_count"), int):
            header = {**header, "acquired_count": header["delivery_count"]}
            acquired = header["acquired_count"]
        if isinstance(acquired, int):
            if mc.is_mc(msg):
                if counter == "acquired_count" or not both_counters:
                    msg = mc.set_annotation("x-delivery-count", acquired, msg)
                else:
                    msg = mc.set_annotation("x-acquired-count", acquired, msg)
                    if isinstance(header.get("delivery_count"), int):
                        msg = mc.set_annotation("x-delivery-count", header["delivery_count"],
                                                msg)
                msg = annotate_msg(header, msg)
            return msg, acquired > 0
    return msg, False


def transform_msgs(qname: Any, leader: Any, id_msgs: list[tuple[int, Any]],
                   counter: str = "acquired_count") -> list[Any]:
    """``[{QName, QRef, MsgId, Redelivered, Msg}]`` as the channel consumes them
    (`counter`: what ``x-delivery-count`` carries, `add_delivery_count_header`)."""
    out = []
    for msg_id, (header, body) in id_msgs:
        msg, redelivered = add_delivery_count_header(body, header, counter)
        out.append((qname, qref(leader), msg_id, redelivered, msg))
    return out
