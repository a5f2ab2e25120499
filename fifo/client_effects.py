"""What the session asks its owner to do, and what an operation hands back.

The client never talks to Ra itself. Asynchronous sends are *effects* the
owning process performs in list order; a synchronous call (``process_command``,
``members``, an aux query, reading bodies from the local log) is an effect too,
but it ends the operation with tag ``"call"``: the owner performs the effects,
answers the last one, and invokes the same operation again with the same
arguments plus the answer appended to ``replies``. The operation replays
deterministically up to that point, skips the effects already handed out and
carries on, so the order of sends around a call is the order upstream has.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

__all__ = [
    "AuxCommand",
    "CancelTimer",
    "CastAuxCommand",
    "ClientCall",
    "ClientEffect",
    "ClientExit",
    "ExecRead",
    "FindLeader",
    "Members",
    "Out",
    "PipelineCommand",
    "ProcessCommand",
    "SendAfter",
]


class PipelineCommand(NamedTuple):
    """``ra:pipeline_command(Server, Command, Correlation, Priority)``.

    ``correlation`` ``None`` means reply mode ``noreply`` (untracked enqueue);
    otherwise the leader answers with ``{applied, [{Correlation, Reply}]}``.
    """

    name: str
    server: Any
    command: Any
    correlation: int | None
    priority: str


class CastAuxCommand(NamedTuple):
    """``ra:cast_aux_command(Server, Command)``: fire-and-forget to a member's aux."""

    name: str
    server: Any
    command: Any


class SendAfter(NamedTuple):
    """``erlang:send_after(Ms, self(), Msg)`` with the timer identified by ``ref``."""

    name: str
    ref: str
    ms: int
    msg: Any


class CancelTimer(NamedTuple):
    name: str
    ref: str


# --- synchronous calls: each ends an operation with tag "call" ------------------------------


class ProcessCommand(NamedTuple):
    """``ra:process_command`` trying ``servers`` in order until one answers ``{ok, _, _}``.

    Expected answers: ``("ok", Reply, Leader)``, ``("error", Reason)`` or
    ``("timeout", Server)``.
    """

    name: str
    servers: tuple[Any, ...]
    command: Any
    timeout: int


class Members(NamedTuple):
    """``ra:members(Server)``; answer ``("ok", Members, Leader)`` or an error tuple."""

    name: str
    server: Any


class FindLeader(NamedTuple):
    """``ra:members`` on each server in turn; answer the first leader found or ``None``."""

    name: str
    servers: tuple[Any, ...]


class AuxCommand(NamedTuple):
    """``ra:aux_command(Server, Command)``; answer ``("ok", R)``, ``("error", E)``
    or ``("timeout", Server)``."""

    name: str
    server: Any
    command: Any


class ExecRead(NamedTuple):
    """Execute a delivery's read plan against the local log.

    Answer: a mapping ``{raft_index: command}`` of the entries found (the shape
    a read plan's ``execute()`` returns).
    """

    name: str
    read_plan: Any


ClientEffect = PipelineCommand | CastAuxCommand | SendAfter | CancelTimer
"""An asynchronous effect of a client operation."""

ClientCall = ProcessCommand | Members | FindLeader | AuxCommand | ExecRead
"""A synchronous call that ends a client operation with tag ``"call"``."""


class Out(NamedTuple):
    """The result of every client operation.

    ``tag`` is upstream's leading atom (``ok``, ``reject_publish``, ``empty``,
    ``eol``, ``error``, ``timeout``, ``protocol_error``) or ``call`` (see the
    module docstring). ``actions`` go to the channel (flow control, settled
    publishes, deliveries); ``effects`` go to Ra; ``result`` carries what a
    synchronous operation returns besides the state (checkout info, a dequeued
    message, an error term).
    """

    tag: str
    state: Any
    actions: list[Any]
    effects: Sequence[ClientEffect | ClientCall]
    result: Any = None


class ClientExit(Exception):
    """Upstream lets the owning process crash with this reason (``exit(Err)``)."""

    def __init__(self, reason: Any) -> None:
        super().__init__(reason)
        self.reason = reason
