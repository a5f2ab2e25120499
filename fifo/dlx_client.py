"""``rabbit_fifo_dlx_client``: the dead-letter worker's session with its source queue.

Much simpler than the consumer session (`fifo.client`): the worker runs on the
leader's node and the machine sends it dead letters from that same node, so
deliveries can neither be lost nor repeated on the way. The client therefore
insists on contiguous ids and crashes the worker otherwise (a fresh worker and
a fresh checkout restore a consistent picture), and it ignores deliveries from
any other node.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import actors
from fifo.commands import make_dlx_checkout, make_dlx_settle
from ra import api

__all__ = ["CHECKOUT_ATTEMPTS", "CHECKOUT_TIMEOUT", "DlxClientState", "OutOfOrderDelivery",
           "checkout", "handle_ra_event", "overview", "settle"]

log = logging.getLogger("warren.fifo.dlx")

#: ``process_command`` timeout of the checkout, and how often it is tried
CHECKOUT_TIMEOUT = 60_000
CHECKOUT_ATTEMPTS = 5


@dataclass(frozen=True, slots=True)
class DlxClientState:
    """``#state{queue_resource, leader, last_msg_id}``."""

    queue_resource: Any
    leader: Any
    last_msg_id: int = -1


class OutOfOrderDelivery(Exception):
    """A dead-letter delivery did not continue the last one."""


def checkout(queue_resource: Any, leader: Any, prefetch: int) -> tuple[str, Any]:
    """Register the calling process as the queue's dead-letter consumer.

    `leader` is the Ra member on this node. If another member answers (the
    local one is not the leader any more), the worker is on the wrong node:
    ``("error", "non_local_leader")``. Other failures are retried.
    """
    cmd = make_dlx_checkout(actors.self(), prefetch)
    for attempt in range(CHECKOUT_ATTEMPTS, 0, -1):
        match api.process_command(leader, cmd, CHECKOUT_TIMEOUT):
            case ("ok", "ok", answered) if answered == leader:
                return ("ok", DlxClientState(queue_resource, leader))
            case ("ok", "ok", other):
                log.warning("dlx checkout on %r: the leader is %r", leader, other)
                return ("error", "non_local_leader")
            case err:
                log.warning("dlx checkout on %r failed: %r; %d more attempt(s)", leader, err,
                            attempt - 1)
    return ("error", "ra_command_failed")


def settle(msg_ids: Sequence[int], state: DlxClientState) -> DlxClientState:
    """Tell the queue these dead letters reached every target (pipelined, no reply)."""
    api.pipeline_command(state.leader, make_dlx_settle(msg_ids))
    return state


def handle_ra_event(leader_pid: Any, evt: Any,
                    state: DlxClientState) -> tuple[DlxClientState, list[Any]]:
    """``{dlx_delivery, [{Id, {Reason, Msg}}]}`` from the local member -> a deliver action."""
    match evt:
        case ("dlx_delivery", id_msgs) if id_msgs and getattr(leader_pid, "node",
                                                              None) == actors.node():
            first = id_msgs[0][0]
            if first != state.last_msg_id + 1:
                raise OutOfOrderDelivery((state.last_msg_id, first))
            msgs = [(state.queue_resource, msg_id, msg, reason)
                    for msg_id, (reason, msg) in id_msgs]
            return (replace(state, last_msg_id=id_msgs[-1][0]), [("deliver", msgs)])
    log.debug("ignoring dlx event %r from %r", evt, leader_pid)
    return (state, [])


def overview(state: DlxClientState) -> dict[str, Any]:
    return {"leader": state.leader, "last_msg_id": state.last_msg_id}
