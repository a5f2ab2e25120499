"""Carrying out what a `rabbit_fifo_client` session asks of the process that owns it.

The fifo client (`fifo.client`) is pure: an operation returns the Ra sends
and timers to perform as effects, and ends with a `call` effect when it needs
an answer (register as enqueuer, checkout, dequeue, members...). The owner (a
channel, or a `fifo.queue_session` process) performs those effects from its own
process with `ra.api` and replays the operation with each answer, exactly as the
replay protocol of `fifo.client_effects` describes. Synchronous calls block the
owner, as they block `rabbit_channel` upstream. Timers are kept in the owner's
`Timers` map by the client's reference, so a timer set again replaces the old one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import actors
from fifo.client_effects import (
    AuxCommand,
    CancelTimer,
    CastAuxCommand,
    ClientCall,
    ClientEffect,
    ExecRead,
    FindLeader,
    Members,
    Out,
    PipelineCommand,
    ProcessCommand,
    SendAfter,
)
from ra import api

__all__ = ["drive", "perform"]

Timers = dict[str, Any]


def drive(op: Callable[[Sequence[Any]], Out], timers: Timers) -> Out:
    """Run a client operation to completion, answering its synchronous calls."""
    replies: list[Any] = []
    while True:
        out = op(replies)
        if out.tag != "call":
            for eff in out.effects:
                perform(eff, timers)
            return out
        *before, request = out.effects
        for eff in before:
            perform(eff, timers)
        replies = [*replies, call(request)]


def perform(eff: ClientEffect | ClientCall, timers: Timers) -> None:
    """An asynchronous effect: a pipelined command, an aux cast or a timer."""
    match eff:
        case PipelineCommand(server=server, command=cmd, correlation=corr, priority=prio):
            api.pipeline_command(server, cmd, corr, prio)
        case CastAuxCommand(server=server, command=cmd):
            api.cast_aux_command(server, cmd)
        case SendAfter(ref=ref, ms=ms, msg=msg):
            cancel(timers, ref)
            timers[ref] = actors.send_after(ms, actors.self(), msg)
        case CancelTimer(ref=ref):
            cancel(timers, ref)
        case _:
            raise ValueError(f"unexpected fifo client effect {eff!r}")


def cancel(timers: Timers, ref: str) -> None:
    tref = timers.pop(ref, None)
    if tref is not None:
        actors.cancel_timer(tref)


def call(request: ClientEffect | ClientCall) -> Any:
    """A synchronous effect, answered in the shape the client expects."""
    match request:
        case ProcessCommand(servers=servers, command=cmd, timeout=timeout):
            return api.process_command(list(servers), cmd, timeout)
        case Members(server=server):
            return api.members(server)
        case FindLeader(servers=servers):
            for server in servers:
                found = api.members(server)
                if found[0] == "ok":
                    return found[2]
            return None
        case AuxCommand(server=server, command=cmd):
            return api.aux_command(server, cmd)
        case ExecRead(read_plan=plan):
            return plan.execute()
    raise ValueError(f"unexpected fifo client call {request!r}")
