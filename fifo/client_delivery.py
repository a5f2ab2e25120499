"""Deliveries to the session's consumers (``rabbit_fifo_client``'s delivery handling).

Message ids are per consumer and consecutive, so the session can tell from
the first id of a delivery whether an earlier one was lost (the machine sends
deliveries as plain messages, which a congested distribution link may drop) or
whether it is seeing a repeat. Lost ids are fetched back from a member's aux
handler; repeats are dropped. Deliveries never move the session's idea of the
leader: with the local-read rule they may come from any member.
"""

from __future__ import annotations

from typing import Any

from fifo.client_calls import Calls
from fifo.client_effects import AuxCommand, ClientEffect, ExecRead, Out
from fifo.client_records import ClientConsumer, ClientState, pick_server
from fifo.client_send import consumer_key, send_command, stash, transform_msgs
from fifo.commands import get_msg, make_return, make_settle
from fifo.msg import unpack

__all__ = ["find_local_or_leader", "handle_delivery"]


def find_local_or_leader(s: ClientState) -> Any:
    """A member on this node can answer without a network hop; else ask the leader."""
    for server in s.cfg.servers:
        if isinstance(server, tuple) and len(server) == 2 and server[1] == s.cfg.node:
            return server
    return s.leader


def handle_delivery(calls: Calls, qname: Any, from_: Any, delivery: tuple[Any, ...],
                    s: ClientState, fx: list[ClientEffect]) -> Out:
    match delivery:
        case ("delivery", tag, read_plan, plain):
            # bodies are still in the log on this node: read them here
            entries = calls.call(ExecRead("exec_read", read_plan), fx)
            # machine 8 sends packed references as they are; earlier ones ``(idx, header)``
            refs = [(mid, unpack(m)) for mid, m in plain]
            id_msgs = [(mid, (h, get_msg(entries[i]))) for mid, (i, h) in refs
                       if i in entries]
            return _deliver(calls, qname, from_, tag, id_msgs, s, fx)
        case ("delivery", tag, id_msgs):
            return _deliver(calls, qname, from_, tag, list(id_msgs), s, fx)
    raise ValueError(f"not a delivery: {delivery!r}")


def _deliver(calls: Calls, qname: Any, from_: Any, tag: Any, id_msgs: list[Any],
             s: ClientState, fx: list[ClientEffect]) -> Out:
    if not id_msgs:
        return Out("ok", s, [], fx)
    c = s.consumers.get(tag)
    if c is None:
        # cancelled locally while this was in flight: hand the messages back
        _return(tag, [mid for mid, _ in id_msgs], s, fx)
        return Out("ok", s, [], fx)
    first, last = id_msgs[0][0], id_msgs[-1][0]
    prev = c.last_msg_id
    if prev is not None and first <= prev:
        rest = [im for im in id_msgs if im[0] > prev]
        if not rest:
            return Out("ok", s, [], fx)
        return _deliver(calls, qname, from_, tag, rest, s, fx)
    if prev is not None and first > prev + 1:
        server = find_local_or_leader(s)
        req = AuxCommand("aux_command", server,
                         ("get_checked_out", c.key, list(range(prev + 1, first))))
        match calls.call(req, fx):
            case ("ok", missing):
                id_msgs = [*missing, *id_msgs]
            case ("timeout", _):
                return Out("protocol_error", s, [], fx, (
                    "internal_error", "Cannot query missing deliveries from ~tp: timeout",
                    [server]))
            case ("error", err):
                return Out("protocol_error", s, [], fx, (
                    "internal_error", "Cannot query missing deliveries from ~tp: ~tp",
                    [server, err]))
            case err:
                return Out("protocol_error", s, [], fx, (
                    "internal_error", "Cannot query missing deliveries from ~tp: ~tp",
                    [server, err]))
    s.consumers[tag] = ClientConsumer(c.key, last, c.ack)
    deliver = ("deliver", tag, c.ack, transform_msgs(qname, from_, id_msgs,
                                                     s.cfg.delivery_count_header))
    if not c.ack:
        # no-ack consumer: the queue only learns of the automatic ack this way
        _settle(tag, [m[2] for m in deliver[3]], s, fx)
    return Out("ok", s, [deliver], fx)


def _settle(tag: Any, msg_ids: list[int], s: ClientState, fx: list[ClientEffect]) -> None:
    key = consumer_key(tag, s)
    if s.slow:
        stash("settle", key, msg_ids, s)
    else:
        send_command(pick_server(s), None, make_settle(key, msg_ids), "normal",
                     s, fx)


def _return(tag: Any, msg_ids: list[int], s: ClientState, fx: list[ClientEffect]) -> None:
    key = consumer_key(tag, s)
    if s.slow:
        stash("return", key, msg_ids, s)
    else:
        send_command(pick_server(s), None, make_return(key, msg_ids), "normal",
                     s, fx)
