"""``rabbit_fifo_dlx``: dead lettering from inside the machine.

``discard`` is the single funnel for messages leaving the queue unsuccessfully
(rejected, expired, over the length limit, over the delivery limit). With no
handler they are only counted; at-most-once hands their bodies to an MFA on
the leader; at-least-once keeps them in the queue's own state until the
dead-letter worker has confirmed them, so they keep counting against limits
and keep their log entries alive.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fifo import mc
from fifo.commands import get_msg
from fifo.effects import SELF, dead_lettered, mod_call, send_msg
from fifo.msg import Msg, msg_header, msg_idx, msg_size, unpack
from fifo.records import DlxConsumer, RabbitFifoDlx
from ra.effect_types import Effect

__all__ = [
    "annotate_msg",
    "apply",
    "checkout",
    "discard",
    "overview",
    "purge",
    "smallest_raft_index",
    "stat",
    "state_enter",
    "update_config",
]


def stat(dlx: RabbitFifoDlx) -> tuple[int, int]:
    num = len(dlx.discards)
    if dlx.consumer is not None:
        num += len(dlx.consumer.checked_out)
    return (num, dlx.msg_bytes + dlx.msg_bytes_checkout)


def overview(dlx: RabbitFifoDlx) -> dict[str, int]:
    checked = 0 if dlx.consumer is None else len(dlx.consumer.checked_out)
    return {
        "num_discarded": len(dlx.discards),
        "num_discard_checked_out": checked,
        "discard_message_bytes": dlx.msg_bytes,
        "discard_checkout_message_bytes": dlx.msg_bytes_checkout,
    }


def smallest_raft_index(dlx: RabbitFifoDlx) -> int | None:
    return dlx.ra_indexes.smallest()


def annotate_msg(header: Any, msg: Any, acquired_count: bool = False) -> Any:
    """Copy header annotations and the failed-delivery count onto the container.

    Machine 8 also copies ``acquired_count`` (how often the message was given
    back), so an at-most-once dead letter tells how often it was redelivered.
    """
    if not (mc.is_mc(msg) and isinstance(header, dict)):
        return msg
    for k, v in header.get("anns", {}).items():
        msg = mc.set_annotation(k, v, msg)
    if acquired_count and "acquired_count" in header:
        msg = mc.set_annotation("acquired_count", header["acquired_count"], msg)
    if "delivery_count" in header:
        msg = mc.set_annotation("delivery_count", header["delivery_count"], msg)
    return msg


def discard(msgs: Sequence[Msg], reason: str, dlh: Any, dlx: RabbitFifoDlx,
            acquired_count: bool = False) -> list[Any]:
    """Dead-letter `msgs` (in order) with `reason`; returns the effects.

    `acquired_count`: at-most-once bodies carry that annotation (machine 8).
    """
    if dlh is None:
        return [dead_lettered(reason, "disabled", len(msgs))]
    if dlh == "at_least_once":
        if reason == "maxlen":
            raise ValueError("maxlen messages are never dead-lettered at-least-once")
        for m in msgs:
            dlx.discards.append((reason, m))
            dlx.msg_bytes += msg_size(m)
            dlx.ra_indexes.append(msg_idx(m))
        return [dead_lettered(reason, "at_least_once", len(msgs))]
    _, (mod, fun, args) = dlh
    unpacked = [unpack(m) for m in msgs]
    idxs = [i for i, _ in unpacked]

    def read(cmds: Sequence[Any]) -> list[Any]:
        lookup = dict(zip(idxs, cmds, strict=False))
        bodies = [annotate_msg(h, get_msg(lookup[i]), acquired_count)
                  for i, h in unpacked if i in lookup]
        return [mod_call(mod, fun, [*args, reason, bodies])]

    return [("log", idxs, read)]


def purge(dlx: RabbitFifoDlx) -> int:
    """Drop every dead letter, waiting or checked out to the worker (v8 ``purge``).

    The worker stays checked out; returns how many messages were dropped.
    """
    num, _ = stat(dlx)
    dlx.discards.clear()
    if dlx.consumer is not None:
        dlx.consumer.checked_out.clear()
    dlx.ra_indexes = type(dlx.ra_indexes)()
    dlx.msg_bytes = 0
    dlx.msg_bytes_checkout = 0
    return num


def checkout(dlh: Any, dlx: RabbitFifoDlx) -> list[Any]:
    """Hand discarded messages to the at-least-once worker up to its prefetch."""
    con = dlx.consumer
    if dlh != "at_least_once" or con is None:
        return []
    sent: list[tuple[int, str, Any, int]] = []
    while len(con.checked_out) < con.prefetch and dlx.discards:
        reason, m = dlx.discards.popleft()
        msg_id = con.next_msg_id
        con.checked_out[msg_id] = (reason, m)
        con.next_msg_id += 1
        size = msg_size(m)
        dlx.msg_bytes -= size
        dlx.msg_bytes_checkout += size
        sent.append((msg_idx(m), reason, msg_header(m), msg_id))
    if not sent:
        return []
    return [("log", [s[0] for s in sent], _dlx_delivery_fun(con.pid, sent))]


def _dlx_delivery_fun(
    pid: Any, sent: list[tuple[int, str, Any, int]]
) -> Callable[..., list[Any]]:
    def deliver(cmds: Sequence[Any], self_pid: Any = SELF) -> list[Any]:
        msgs = [
            (msg_id, (reason, annotate_msg(h, get_msg(cmd))))
            for cmd, (_, reason, h, msg_id) in zip(cmds, sent, strict=False)
        ]
        return [send_msg(pid, ("dlx_event", self_pid, ("dlx_delivery", msgs)), ["cast"])]

    return deliver


def apply(cmd: Any, dlh: Any, dlx: RabbitFifoDlx) -> list[Any]:
    """``{dlx, {checkout, Pid, Prefetch}}`` / ``{dlx, {settle, Ids}}``; ignored
    unless the handler is at-least-once."""
    if dlh != "at_least_once":
        return []
    match cmd:
        case ("settle", msg_ids) if dlx.consumer is not None:
            checked = dlx.consumer.checked_out
            acked = 0
            for msg_id in dict.fromkeys(msg_ids):
                item = checked.pop(msg_id, None)
                if item is None:
                    continue
                _, m = item
                dlx.ra_indexes.delete(msg_idx(m))
                dlx.msg_bytes_checkout -= msg_size(m)
                acked += 1
            return [mod_call("rabbit_global_counters", "messages_dead_lettered_confirmed",
                             ["rabbit_quorum_queue", "at_least_once", acked])]
        case ("checkout", pid, prefetch):
            old = dlx.consumer
            if old is not None:
                # last consumer wins: the old worker's in-flight messages go back
                # to the front of discards in their original order
                moved = 0
                for msg_id in sorted(old.checked_out, reverse=True):
                    reason, m = old.checked_out[msg_id]
                    dlx.discards.appendleft((reason, m))
                    moved += msg_size(m)
                dlx.msg_bytes += moved
                dlx.msg_bytes_checkout -= moved
            dlx.consumer = DlxConsumer(pid=pid, prefetch=prefetch)
            return []
    return []


def update_config(old: Any, new: Any, qres: Any, dlx: RabbitFifoDlx) -> tuple[RabbitFifoDlx,
                                                                           list[Any]]:
    """Handler switch on ``update_config`` (as ``rabbit_fifo_dlx:update_config`` does)."""
    if old == "at_least_once" and new == "at_least_once":
        if dlx.consumer is None:
            return dlx, []
        return dlx, [send_msg(dlx.consumer.pid, ("dlx_event", SELF, "lookup_topology"), "cast")]
    if old == new:
        return dlx, []
    effects: list[Effect] = [
        mod_call("logger", "debug",
                 ["Switching dead_letter_handler from ~tp to ~tp for ~ts", [old, new, qres]])
    ]
    if old == "at_least_once":
        if dlx.consumer is not None:
            effects.append(("aux", ("dlx", "teardown", dlx.consumer.pid)))
        num, size = stat(dlx)
        effects.append(mod_call(
            "logger", "info",
            ["Deleted ~b dead-lettered messages (with total messages size of ~b bytes) in ~ts",
             [num, size, qres]]))
        dlx = RabbitFifoDlx()
    if new == "at_least_once":
        dlx = RabbitFifoDlx()
        effects.append(("aux", ("dlx", "setup")))
    return dlx, effects


def state_enter(ra_state: str, dlh: Any, dlx: RabbitFifoDlx) -> list[Any]:
    """The worker lives on the leader: start it there, stop it elsewhere."""
    if dlh != "at_least_once":
        return []
    if ra_state == "leader":
        return [("aux", ("dlx", "setup"))]
    if dlx.consumer is not None:
        return [("aux", ("dlx", "teardown", dlx.consumer.pid))]
    return []
