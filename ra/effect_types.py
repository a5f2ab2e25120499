"""Every effect a Ra server core or a machine hands to its shell, as typed records.

This is Ra's ``ra_machine:effect()`` (what a machine may return) and the
internal effects of ``ra_server`` (what the core asks ``ra_server_proc`` to
do), one record per shape. Each record is a NamedTuple whose first field is
the Erlang tag, so a record equals, hashes and pattern-matches like the plain
tuple a trace shows: ``SendMsg("send_msg", pid, msg) == ("send_msg", pid, msg)``.
Where upstream has two arities for one tag (``{send_msg, To, Msg}`` and
``{send_msg, To, Msg, Opts}``) there are two records, so the length of every
effect stays what it is upstream. Atoms are strings.

The `Effect` union is written as the tuple *shapes* (Ra's type is a union of
tuple shapes too), so a record and the plain tuple literal a core builds
(``("notify", nots)``) both have the type, and the type checker tells a
misspelt tag or a missing field apart from a real effect.

Executors (`ra.proc_effects`, `ra.sim`) match every shape and end in
`unknown_effect`: the type checker proves that case unreachable, and at run
time it raises `UnknownEffect`: an effect nobody executes is a bug in whoever
emitted it, and silently dropping it hides that bug.
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple, Never, NoReturn

__all__ = [
    "Append",
    "AppendMode",
    "Aux",
    "BgWork",
    "CancelSnapshotRetryTimer",
    "Cast",
    "Checkpoint",
    "CoreEffect",
    "Demonitor",
    "DemonitorComponent",
    "Effect",
    "Log",
    "LogExt",
    "LogLocal",
    "MachineEffect",
    "ModCall",
    "Monitor",
    "MonitorComponent",
    "NextEvent",
    "NextEventTyped",
    "Notify",
    "RecordLeaderMsg",
    "ReleaseCursor",
    "ReleaseCursorIndex",
    "ReleaseCursorOpts",
    "Reply",
    "ReplyFrom",
    "ReplyTo",
    "SendMsg",
    "SendMsgOpts",
    "SendRaEvent",
    "SendRpc",
    "SendSnapshot",
    "SendVoteRequests",
    "StartSnapshotRetryTimer",
    "Timer",
    "TimerOpts",
    "TryAppend",
    "UnknownEffect",
    "unknown_effect",
]


class UnknownEffect(ValueError):
    """Raised by an executor given an effect that is not one of `Effect`."""

    def __init__(self, effect: object, executor: str) -> None:
        super().__init__(f"{executor}: unknown effect {effect!r}")
        self.effect = effect


def unknown_effect(effect: Never, executor: str) -> NoReturn:
    """The last case of an executor's match: unreachable for the type checker
    once every shape of `Effect` has a case, `UnknownEffect` at run time."""
    raise UnknownEffect(effect, executor)


# --- machine effects (ra_machine:effect()) -----------------------------------------------


class SendMsg(NamedTuple):
    """``{send_msg, To, Msg}``: the leader sends `msg` to `to`."""

    name: Literal["send_msg"]
    to: Any
    msg: Any


class SendMsgOpts(NamedTuple):
    """``{send_msg, To, Msg, Opts}``; opts ``local``, ``ra_event``, ``cast``."""

    name: Literal["send_msg"]
    to: Any
    msg: Any
    opts: Any


class ModCall(NamedTuple):
    """``{mod_call, Mod, Fun, Args}``: the leader calls ``Mod:Fun(Args...)``."""

    name: Literal["mod_call"]
    mod: Any
    fun: str
    args: list[Any]


class Monitor(NamedTuple):
    """``{monitor, process | node, Target}`` for the machine component."""

    name: Literal["monitor"]
    kind: Literal["process", "node"]
    target: Any


class MonitorComponent(NamedTuple):
    """``{monitor, process | node, Component, Target}`` (``machine`` or ``aux``)."""

    name: Literal["monitor"]
    kind: Literal["process", "node"]
    component: str
    target: Any


class Demonitor(NamedTuple):
    name: Literal["demonitor"]
    kind: Literal["process", "node"]
    target: Any


class DemonitorComponent(NamedTuple):
    name: Literal["demonitor"]
    kind: Literal["process", "node"]
    component: str
    target: Any


class Timer(NamedTuple):
    """``{timer, Name, Ms | infinity}``: the leader (re)arms or cancels a machine timer."""

    name: Literal["timer"]
    timer_name: Any
    ms: int | Literal["infinity"]


class TimerOpts(NamedTuple):
    """``{timer, Name, Ms, #{abs => true}}``: `ms` is an absolute time."""

    name: Literal["timer"]
    timer_name: Any
    ms: int | Literal["infinity"]
    opts: dict[str, Any]


class Log(NamedTuple):
    """``{log, Indexes, Fun}``: the leader reads commands and runs `fun` on them."""

    name: Literal["log"]
    idxs: list[int]
    fun: Any


class LogLocal(NamedTuple):
    """``{log, Indexes, Fun, {local, Node}}``: run by the voter on `Node`."""

    name: Literal["log"]
    idxs: list[int]
    fun: Any
    local: Any


class LogExt(NamedTuple):
    """``{log_ext, Indexes, Fun, Local}``: `fun` gets a read plan, not the commands."""

    name: Literal["log_ext"]
    idxs: list[int]
    fun: Any
    local: Any


class ReleaseCursorIndex(NamedTuple):
    name: Literal["release_cursor"]
    idx: int


class ReleaseCursor(NamedTuple):
    """``{release_cursor, Index, MacState}``: entries up to `index` may go."""

    name: Literal["release_cursor"]
    idx: int
    state: Any


class ReleaseCursorOpts(NamedTuple):
    """``{release_cursor, Index, MacState, #{condition => [...]}}``."""

    name: Literal["release_cursor"]
    idx: int
    state: Any
    opts: dict[str, Any]


class Checkpoint(NamedTuple):
    """``{checkpoint, Index, MacState}``: a snapshot that does not truncate the log."""

    name: Literal["checkpoint"]
    idx: int
    state: Any


class Aux(NamedTuple):
    """``{aux, Cmd}``: every member casts `cmd` to its own aux handler."""

    name: Literal["aux"]
    cmd: Any


class Append(NamedTuple):
    """``{append, Cmd}``: the leader appends `cmd` as a new command (no reply)."""

    name: Literal["append"]
    cmd: Any


class AppendMode(NamedTuple):
    """``{append, Cmd, ReplyMode}``."""

    name: Literal["append"]
    cmd: Any
    mode: Any


class TryAppend(NamedTuple):
    """``{try_append, Cmd, ReplyMode}``: appended by whichever member is leader."""

    name: Literal["try_append"]
    cmd: Any
    mode: Any


class Reply(NamedTuple):
    """``{reply, Reply}``: answer the call being handled."""

    name: Literal["reply"]
    reply: Any


class ReplyTo(NamedTuple):
    """``{reply, From, Reply}``: the leader answers `from_`."""

    name: Literal["reply"]
    from_: Any
    reply: Any


class ReplyFrom(NamedTuple):
    """``{reply, From, Reply, Replier}``: ``reply_from`` picks the member that answers."""

    name: Literal["reply"]
    from_: Any
    reply: Any
    replier: Any


MachineEffect = (
    tuple[Literal["send_msg"], Any, Any]
    | tuple[Literal["send_msg"], Any, Any, Any]
    | tuple[Literal["mod_call"], Any, str, list[Any]]
    | tuple[Literal["monitor"], Literal["process", "node"], Any]
    | tuple[Literal["monitor"], Literal["process", "node"], str, Any]
    | tuple[Literal["demonitor"], Literal["process", "node"], Any]
    | tuple[Literal["demonitor"], Literal["process", "node"], str, Any]
    | tuple[Literal["timer"], Any, int | Literal["infinity"]]
    | tuple[Literal["timer"], Any, int | Literal["infinity"], dict[str, Any]]
    | tuple[Literal["log"], list[int], Any]
    | tuple[Literal["log"], list[int], Any, Any]
    | tuple[Literal["log_ext"], list[int], Any, Any]
    | tuple[Literal["release_cursor"], int]
    | tuple[Literal["release_cursor"], int, Any]
    | tuple[Literal["release_cursor"], int, Any, dict[str, Any]]
    | tuple[Literal["checkpoint"], int, Any]
    | tuple[Literal["aux"], Any]
    | tuple[Literal["append"], Any]
    | tuple[Literal["append"], Any, Any]
    | tuple[Literal["try_append"], Any, Any]
    | tuple[Literal["reply"], Any]
    | tuple[Literal["reply"], Any, Any]
    | tuple[Literal["reply"], Any, Any, Any]
    | Literal["garbage_collection"]
)
"""What a machine's ``apply``, ``state_enter``, ``tick`` and aux handler may return."""


# --- core effects (ra_server -> ra_server_proc) ------------------------------------------


class SendRpc(NamedTuple):
    """AppendEntries and other peer RPCs, sent as casts."""

    name: Literal["send_rpc"]
    to: Any
    rpc: Any


class Cast(NamedTuple):
    name: Literal["cast"]
    to: Any
    msg: Any


class NextEvent(NamedTuple):
    """Handle `evt` before the mailbox, with the current event type."""

    name: Literal["next_event"]
    evt: Any


class NextEventTyped(NamedTuple):
    name: Literal["next_event"]
    etype: Any
    evt: Any


class SendVoteRequests(NamedTuple):
    """Pre-vote or vote requests, each sent as a call from a helper process."""

    name: Literal["send_vote_requests"]
    reqs: list[tuple[Any, Any]]


class Notify(NamedTuple):
    """``applied`` notifications, a list of ``(correlation, reply)`` per client pid."""

    name: Literal["notify"]
    nots: dict[Any, list[Any]]


class SendRaEvent(NamedTuple):
    """An ``ra_event`` for `pid`; `evt` is ``(type, body)``, e.g. ``("rejected", ...)``."""

    name: Literal["send_ra_event"]
    pid: Any
    evt: tuple[Any, Any]


class RecordLeaderMsg(NamedTuple):
    """A follower heard from its leader: its election timeout starts over."""

    name: Literal["record_leader_msg"]
    leader: Any


class BgWork(NamedTuple):
    """Snapshot or checkpoint write for the log's worker; `err` is sent on failure."""

    name: Literal["bg_work"]
    job: Any
    err: Any


class SendSnapshot(NamedTuple):
    """Stream the current snapshot to `to`; `spec` is ``(snapshot, leader, term)``."""

    name: Literal["send_snapshot"]
    to: Any
    spec: tuple[Any, Any, int]


class StartSnapshotRetryTimer(NamedTuple):
    name: Literal["start_snapshot_retry_timer"]
    peer: Any
    ms: int


class CancelSnapshotRetryTimer(NamedTuple):
    name: Literal["cancel_snapshot_retry_timer"]
    peer: Any


CoreEffect = (
    tuple[Literal["send_rpc"], Any, Any]
    | tuple[Literal["cast"], Any, Any]
    | tuple[Literal["next_event"], Any]
    | tuple[Literal["next_event"], Any, Any]
    | tuple[Literal["send_vote_requests"], list[tuple[Any, Any]]]
    | tuple[Literal["notify"], dict[Any, list[Any]]]
    | tuple[Literal["send_ra_event"], Any, tuple[Any, Any]]
    | tuple[Literal["record_leader_msg"], Any]
    | tuple[Literal["bg_work"], Any, Any]
    | tuple[Literal["send_snapshot"], Any, tuple[Any, Any, int]]
    | tuple[Literal["start_snapshot_retry_timer"], Any, int]
    | tuple[Literal["cancel_snapshot_retry_timer"], Any]
    | Literal["start_election_timeout"]
)
"""What the server core asks its process shell to do besides machine effects."""

Effect = MachineEffect | CoreEffect
"""Every effect an executor may be handed."""
