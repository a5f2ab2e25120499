"""Ra's wire records, identities, log entries and command envelopes.

Names and field order follow ``src/ra.hrl`` so that a recorded trace can be
compared with one taken from Ra itself. Records are frozen, slotted
dataclasses: immutable like Erlang terms, cheap to build, and usable in
``match`` statements with class patterns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple, TypeAlias

from actors.wire import wire_record

#: `ra_server_id()`: ``(name, node)``. Never a pid: the id must survive restarts.
ServerId: TypeAlias = tuple[str, str]
#: `ra_index()` / `ra_term()` are plain non-negative ints.
Index: TypeAlias = int
Term: TypeAlias = int
#: `ra_idxterm()`.
IdxTerm: TypeAlias = tuple[int, int]
#: `log_entry()`: ``(index, term, command)``.
Entry: TypeAlias = tuple[int, int, Any]

#: ``RA_PROTO_VERSION``; only carried in `PreVoteRpc.version`.
RA_PROTO_VERSION = 1

#: The dummy entry written at index 0 of a brand-new log; real entries start at 1.
DUMMY_ENTRY: Entry = (0, 0, None)

# --------------------------------------------------------------------------
# Internal command envelopes (Ra's ``ra_server:command()``). Stored in the log as plain tuples so
# they read like Erlang terms: ``('$usr', meta, command, reply_mode)``.
# --------------------------------------------------------------------------

USR = "$usr"
RA_JOIN = "$ra_join"
RA_LEAVE = "$ra_leave"
RA_CLUSTER_CHANGE = "$ra_cluster_change"
RA_CLUSTER = "$ra_cluster"
NOOP = "noop"
#: A machine reply equal to this suppresses any reply (Ra's ``'$ra_no_reply'``).
RA_NO_REPLY = "$ra_no_reply"

# Reply modes (Ra's ``command_reply_mode()``). Compound modes are tuples:
# ``("await_consensus", {"reply_from": ...})`` and ``("notify", corr, pid)``.
AFTER_LOG_APPEND = "after_log_append"
AWAIT_CONSENSUS = "await_consensus"
NOREPLY = "noreply"
NOTIFY = "notify"

# Raft states of a server (``ra_server:ra_state()``); the process-only ones are listed too so
# effects classification and traces can name them.
FOLLOWER = "follower"
PRE_VOTE = "pre_vote"
CANDIDATE = "candidate"
LEADER = "leader"
AWAIT_CONDITION = "await_condition"
RECEIVE_SNAPSHOT = "receive_snapshot"
TERMINATING_LEADER = "terminating_leader"
TERMINATING_FOLLOWER = "terminating_follower"
RECOVER = "recover"
RECOVERED = "recovered"

# Memberships (`ra_membership()`).
VOTER = "voter"
PROMOTABLE = "promotable"
NON_VOTER = "non_voter"
UNKNOWN = "unknown"


def make_command(
    cmd_type: str,
    data: Any,
    reply_mode: Any,
    ts: int,
    from_: Any | None = None,
) -> tuple[str, dict[str, Any], Any, Any]:
    """Stamp a client command the way ``ra_server_proc:make_command`` does.

    The meta map carries the leader's wall clock (``ts``) and, for synchronous
    calls only, the caller's ``from``; both end up in the apply Meta (``ra_server:command_meta()``).
    """
    meta: dict[str, Any] = {"ts": ts}
    if from_ is not None:
        meta = {"from": from_, "ts": ts}
    return (cmd_type, meta, data, reply_mode)


def usr(meta: dict[str, Any], command: Any, reply_mode: Any = NOREPLY) -> tuple[Any, ...]:
    """``{'$usr', Meta, Command, ReplyMode}``."""
    return (USR, meta, command, reply_mode)


def noop(ts: int, machine_version: int) -> tuple[Any, ...]:
    """``{noop, #{ts}, MachineVersion}``: written by every new leader."""
    return (NOOP, {"ts": ts}, machine_version)


class InvalidReplyMode(ValueError):
    """Raised by `validate_reply_mode`; carries the Erlang-shaped error."""

    def __init__(self, error: tuple[Any, ...]) -> None:
        super().__init__(error)
        self.error = error


def validate_reply_mode(mode: Any) -> None:
    """Accept exactly Ra's ``command_reply_mode()`` values, else raise.

    The error term matches what a synchronous caller receives:
    ``{invalid_reply_mode, Mode}`` or ``{unknown_option, Key, Value}``.
    """
    if mode in (AFTER_LOG_APPEND, AWAIT_CONSENSUS, NOREPLY):
        return
    if isinstance(mode, tuple) and len(mode) == 3 and mode[0] == NOTIFY:
        return
    if isinstance(mode, tuple) and len(mode) == 2 and mode[0] == AWAIT_CONSENSUS:
        opts = mode[1]
        if not isinstance(opts, dict):
            raise InvalidReplyMode(("invalid_reply_mode", mode))
        for key, value in opts.items():
            ok = key == "reply_from" and (
                value in ("leader", "local")
                or (isinstance(value, tuple) and len(value) == 2 and value[0] == "member")
            )
            if not ok:
                raise InvalidReplyMode(("unknown_option", key, value))
        return
    raise InvalidReplyMode(("invalid_reply_mode", mode))


# --------------------------------------------------------------------------
# Wire records (Ra's ``ra.hrl``). ``RECORD`` names the Erlang record for traces.
# --------------------------------------------------------------------------


@wire_record
@dataclass(frozen=True, slots=True)
class AppendEntriesRpc:
    RECORD: ClassVar[str] = "append_entries_rpc"
    term: int
    leader_id: ServerId
    leader_commit: int
    prev_log_index: int
    prev_log_term: int
    entries: tuple[Entry, ...] = ()


@wire_record
@dataclass(frozen=True, slots=True)
class AppendEntriesReply:
    """`last_index`/`last_term` are the follower's last *written* (fsynced) entry;
    `next_index` is its last *appended* index + 1 (or a rewind point)."""

    RECORD: ClassVar[str] = "append_entries_reply"
    term: int
    success: bool
    next_index: int
    last_index: int
    last_term: int


@wire_record
@dataclass(frozen=True, slots=True)
class RequestVoteRpc:
    RECORD: ClassVar[str] = "request_vote_rpc"
    term: int
    candidate_id: ServerId
    last_log_index: int
    last_log_term: int


@wire_record
@dataclass(frozen=True, slots=True)
class RequestVoteResult:
    RECORD: ClassVar[str] = "request_vote_result"
    term: int
    vote_granted: bool


@wire_record
@dataclass(frozen=True, slots=True)
class PreVoteRpc:
    RECORD: ClassVar[str] = "pre_vote_rpc"
    machine_version: int
    term: int
    token: Any
    candidate_id: ServerId
    last_log_index: int
    last_log_term: int
    version: int = RA_PROTO_VERSION


@wire_record
@dataclass(frozen=True, slots=True)
class PreVoteResult:
    RECORD: ClassVar[str] = "pre_vote_result"
    term: int
    token: Any
    vote_granted: bool


@wire_record
@dataclass(frozen=True, slots=True)
class InstallSnapshotRpc:
    """`chunk_state` is ``(num, flag)`` with flag in ``init | pre | next | last``."""

    RECORD: ClassVar[str] = "install_snapshot_rpc"
    term: int
    leader_id: ServerId
    meta: dict[str, Any]
    chunk_state: tuple[int, str]
    data: Any


@wire_record
@dataclass(frozen=True, slots=True)
class InstallSnapshotResult:
    RECORD: ClassVar[str] = "install_snapshot_result"
    term: int
    last_index: int
    last_term: int


@wire_record
@dataclass(frozen=True, slots=True)
class HeartbeatRpc:
    RECORD: ClassVar[str] = "heartbeat_rpc"
    query_index: int
    term: int
    leader_id: ServerId


@wire_record
@dataclass(frozen=True, slots=True)
class HeartbeatReply:
    RECORD: ClassVar[str] = "heartbeat_reply"
    query_index: int
    term: int


@wire_record
@dataclass(frozen=True, slots=True)
class InfoRpc:
    RECORD: ClassVar[str] = "info_rpc"
    from_: ServerId
    term: int
    keys: tuple[str, ...]


@wire_record
@dataclass(frozen=True, slots=True)
class InfoReply:
    RECORD: ClassVar[str] = "info_reply"
    from_: ServerId
    term: int
    keys: tuple[str, ...]
    info: dict[str, Any] = field(default_factory=dict)


class RaEvent(NamedTuple):
    """``{ra_event, ServerId, Evt}`` as delivered to client pids (``ra:ra_event()``).

    ``evt`` stays Erlang-shaped: ``("applied", [(corr, reply), ...])``,
    ``("rejected", ("not_leader", leader_or_None, corr))`` or
    ``("machine", msg)``.
    """

    server_id: ServerId
    evt: Any
