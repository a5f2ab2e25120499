"""The history of each replica of a quorum queue (``replica_events``).

Every Ra member of a queue applies every committed entry through
`fifo.ra_glue.QueueMachine`; that wrapper hands each apply, state entry and
``local`` send to this module, which records them through ``actors.trace``
with the fields of the history schema:

* ``applied`` for every applied entry, machine commands and the Raft-level
  entries the machine never sees (``noop``, ``cluster_change``), with the
  entry's term, a digest of its canonical encoding and, every
  `digest_every()` indexes, a digest of a replica-independent projection of
  the machine state (`replica_view`), and the state's ``ready`` and ``checked_out``
  message counts (also on ``snapshot_installed``), from which the final state of a
  queue is read;
* ``service_queue`` for each message handed to a consumer while applying (the
  same decisions on every member), ``local_delivery`` when this member really
  sent it, ``settled`` for each message a consumer's settle removed;
* ``recovered``, ``role_change``, ``leader_elected``, ``snapshot_installed``,
  ``snapshot_taken``;
* ``dlx_discard`` / ``dlx_settled`` for messages entering and leaving the
  at-least-once dead-letter backlog.

Recording is a side effect outside the machine state: nothing here changes
what the machine computes. The machine callbacks do not receive the Ra
server's state, which holds what the history also needs (current term,
leader, membership, the log for entries the machine is not called for, the
index a recovery starts from); Ra hands it to a tracing machine explicitly
as a `ra.trace_context.TraceContext`, and every field that needs it is left
empty when the machine runs without one (outside a Ra server, in unit tests).

Server names are ``<queue>@<node>`` with the node's short name (``q1@n2``),
so the node a server runs on is the part after the last ``@``; consumer
nodes use the same short name. A consumer's key is
``<conn_id>/<channel_id>/<consumer_tag>`` when the consumer stated its
connection and channel in the ``x-warren-consumer`` argument
(``<conn_id>/<channel_id>``), otherwise ``<pid>//<consumer_tag>``.

The state digest period K is a node's ``state_digest_every`` (`set_digest_every`),
else ``WARREN_STATE_DIGEST_EVERY`` read when this module is imported, else 1; every
member records the same indexes.
"""

from __future__ import annotations

import hashlib
import os
import sys
from array import array
from collections import deque
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

import actors
from actors import trace
from actors.wire import frozen_init
from fifo import mc
from fifo.commands import Settle, get_msg
from fifo.consumers import consumer_key_from_id
from fifo.delivery import messages_ready
from fifo.fifo_q import FifoQ
from fifo.msg import Msg, get_header, msg_header, msg_idx, unpack
from fifo.pq import PriorityQ
from fifo.records import Consumer, RabbitFifoState, erl_sorted
from fifo.versions import rules_of_state
from ra.effect_types import Effect
from ra.trace_context import LogReader, TraceContext
from ra.types import NOOP, RA_CLUSTER, RA_CLUSTER_CHANGE, USR

__all__ = [
    "CONSUMER_ARG",
    "DIGEST_EVERY_ENV",
    "ID_HEADER",
    "Before",
    "applied",
    "before_apply",
    "canonical",
    "digest",
    "digest_every",
    "entered",
    "forget",
    "record_views",
    "replica_view",
    "sent",
    "set_digest_every",
    "snapshot_installed",
    "ticked",
]

#: message header carrying the workload's message id
ID_HEADER = "x-warren-id"
#: consumer argument naming the consumer's ``<conn_id>/<channel_id>``
CONSUMER_ARG = "x-warren-consumer"
DIGEST_EVERY_ENV = "WARREN_STATE_DIGEST_EVERY"
#: bound of the per-replica caches (message ids by raft index, pending sends)
CACHE_MAX = 100_000


def _env_digest_every() -> int:
    try:
        return max(1, int(os.environ.get(DIGEST_EVERY_ENV, "1")))
    except ValueError:
        return 1


_digest_every = _env_digest_every()
_views = False


def digest_every() -> int:
    """K: ``applied`` rows carry a state digest when ``raft_index % K == 0``."""
    return _digest_every


def valid_digest_every(k: object) -> bool:
    """Whether `k` can be K: an integer (not a bool) of at least 1."""
    return isinstance(k, int) and not isinstance(k, bool) and k >= 1


def set_digest_every(k: int) -> int:
    """Change K (at least 1); returns the previous value."""
    global _digest_every
    previous, _digest_every = _digest_every, max(1, int(k))
    return previous


def record_views(on: bool) -> bool:
    """Also put the whole `replica_view` on ``applied`` rows (large; for debugging)."""
    global _views
    previous, _views = _views, bool(on)
    return previous


# --- canonical encoding and digests ----------------------------------------------------------


def canonical(term: Any) -> bytes:
    """A byte encoding of `term` that depends only on its value, never on the process."""
    out = bytearray()
    _encode(term, out)
    return bytes(out)


def digest(term: Any) -> int:
    """Signed 64-bit BLAKE2b digest of `canonical(term)`."""
    raw = hashlib.blake2b(canonical(term), digest_size=8).digest()
    return int.from_bytes(raw, "big", signed=True)


def _sized(tag: bytes, data: bytes, out: bytearray) -> None:
    out += tag
    out += str(len(data)).encode()
    out += b":"
    out += data


def _encode(x: Any, out: bytearray) -> None:
    if x is None:
        out += b"N"
    elif x is True:
        out += b"T"
    elif x is False:
        out += b"F"
    elif isinstance(x, int):
        out += b"i" + str(x).encode() + b";"
    elif isinstance(x, float):
        out += b"f" + repr(x).encode() + b";"
    elif isinstance(x, str):
        _sized(b"s", x.encode(), out)
    elif isinstance(x, bytes | bytearray | memoryview):
        _sized(b"b", bytes(x), out)
    elif isinstance(x, array):
        _sized(b"a" + x.typecode.encode(), _little_endian(x), out)
    elif isinstance(x, tuple):
        _items(b"(", x, out)
    elif isinstance(x, list | deque):
        _items(b"[", x, out)
    elif isinstance(x, Mapping):
        out += b"{"
        for k, v in sorted((canonical(k), canonical(v)) for k, v in x.items()):
            out += k
            out += v
        out += b"}"
    elif isinstance(x, set | frozenset):
        out += b"<"
        for item in sorted(canonical(i) for i in x):
            out += item
        out += b">"
    elif is_dataclass(x) and not isinstance(x, type):
        tag, names = _dataclass_layout(type(x))
        out += tag
        _items(b"(", [getattr(x, n) for n in names], out)
    else:
        _sized(b"r", repr(x).encode(), out)


_LAYOUTS: dict[type, tuple[bytes, tuple[str, ...]]] = {}


def _dataclass_layout(cls: type) -> tuple[bytes, tuple[str, ...]]:
    """A dataclass's encoded name and its field names, looked up once per class (every
    applied command is encoded, and `dataclasses.fields` builds its tuple per call)."""
    layout = _LAYOUTS.get(cls)
    if layout is None:
        tag = bytearray()
        _sized(b"D", cls.__name__.encode(), tag)
        layout = _LAYOUTS[cls] = (bytes(tag), tuple(f.name for f in fields(cls)))
    return layout


def _little_endian(a: array) -> bytes:
    """The items' bytes in one byte order, whatever the machine's."""
    if sys.byteorder == "little":
        return a.tobytes()
    b = array(a.typecode, a)
    b.byteswap()
    return b.tobytes()


def _indexes(msgs: Iterable[Msg]) -> array:
    """The raft indexes of `msgs`, in their order, as 64-bit integers."""
    return array("q", [msg_idx(m) for m in msgs])


def _ready_view(q: FifoQ | PriorityQ) -> Any:
    """v7: both levels and the 2:1 counter; v8: each non-empty level's indexes."""
    if isinstance(q, PriorityQ):
        return {p: _indexes(msgs) for p, msgs in q.buckets().items()}
    return (_indexes(q.hi), _indexes(q.no), q.dequeue_counter)


def _items(tag: bytes, items: Iterable[Any], out: bytearray) -> None:
    out += tag
    for item in items:
        _encode(item, out)
    out += b")"


def replica_view(s: RabbitFifoState) -> dict[str, Any]:
    """What every replica must agree on after applying the same index.

    The service queue in order, each consumer's credit, status and checked-out
    raft indexes, the returned messages, the ready messages (both priority lanes of
    the queue in order, and its dequeue counter: they decide the delivery order), the
    enqueuers' next sequence numbers and the dead-letter queue: values only (pids by
    node and serial), so equal states give equal canonical encodings on every node.

    Long sequences of indexes are `array`s, encoded as one block of bytes: the view is
    taken every K applies and its size grows with the backlog, so walking the ready
    messages in delivery order and encoding each index apart made a recorded node
    several times slower (4.8 against 0.6 ms for 15,000 ready messages).
    """
    consumers = {}
    for key in erl_sorted(s.consumers):
        c = s.consumers[key]
        held = sorted(c.checked_out.items())
        consumers[key] = {
            "tag": c.cfg.tag, "pid": c.cfg.pid, "status": c.status, "credit": c.credit,
            "next_msg_id": c.next_msg_id,
            "checked_out": (array("q", [mid for mid, _m in held]),
                            _indexes(m for _mid, m in held)),
        }
    dlx_out = {} if s.dlx.consumer is None else {
        mid: msg_idx(m) for mid, (_r, m) in sorted(s.dlx.consumer.checked_out.items())}
    return {
        "service_queue": s.service_queue.to_list(),
        "consumers": consumers,
        "returns": _indexes(s.returns),
        "messages": _ready_view(s.messages),
        "messages_total": s.messages_total,
        "enqueuers": {pid: e.next_seqno for pid, e in s.enqueuers.items()},
        "dlx_discards": [(r, msg_idx(m)) for r, m in s.dlx.discards],
        "dlx_checked_out": dlx_out,
    }


# --- names -----------------------------------------------------------------------------------


def short_node(node: Any) -> str:
    """``n2`` for ``n2@127.0.0.1:5000``: the node name servers and consumers are keyed by."""
    return str(node).partition("@")[0]


def _queue_name(s: RabbitFifoState) -> str:
    res = s.cfg.resource
    if isinstance(res, tuple) and len(res) == 4 and res[0] == "resource":
        return str(res[3])
    return str(s.cfg.name)


def _server_name(queue: str, server_id: Any) -> str | None:
    if isinstance(server_id, tuple) and len(server_id) == 2:
        return f"{queue}@{short_node(server_id[1])}"
    return None


def _text(value: Any) -> str | None:
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode(errors="replace")
    return None if value is None else str(value)


def _consumer_key(tag: Any, pid: Any, meta: Mapping[str, Any] | None) -> str:
    args = dict((meta or {}).get("args") or [])
    ident = _text(args.get(CONSUMER_ARG))
    if ident:
        return f"{ident}/{_text(tag) or ''}"
    return f"{pid!r}//{_text(tag) or ''}"


def _pid_node(pid: Any) -> str | None:
    node = getattr(pid, "node", None)
    return None if node is None else short_node(node)


def warren_id(msg: Any) -> int | None:
    """The workload's message id (header ``x-warren-id``) of a stored message, if any."""
    value = mc.get_annotation(ID_HEADER, msg)
    if value is None:
        headers = getattr(msg, "headers", None)
        if callable(headers):
            try:
                value = headers().get(ID_HEADER)
            except Exception:  # a message whose properties do not decode has no id
                return None
    return id_value(value)


def id_value(value: Any) -> int | None:
    """An ``x-warren-id`` header value as the integer id, or None if it is not one."""
    if isinstance(value, bytes | bytearray):
        value = bytes(value).decode(errors="replace")
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def _attempt(header: Any, counter: str = "acquired_count") -> int:
    """What the consumer sees as ``x-delivery-count``: the header counter the machine
    tests its delivery limit against (`Rules.delivery_limit_counter`): every earlier
    delivery up to machine 7, failed deliveries only in machine 8 (RabbitMQ 4.3)."""
    count = get_header(counter, header)
    if not isinstance(count, int) and counter == "acquired_count":
        count = get_header("delivery_count", header)
    return count if isinstance(count, int) else 0


def cmd_type(cmd: Any) -> str:
    """The history's name of a machine command (``e`` is an ``enqueue``)."""
    match cmd:
        case ("e", *_):
            return "enqueue"
        case ("dlx", (str() as op, *_)):
            return f"dlx_{op}"
        case (str() as name, *_):
            return name
        case str():
            return cmd
    return type(cmd).__name__


def _enqueued_msg(cmd: Any) -> Any:
    try:
        return get_msg(cmd)
    except ValueError:
        return None


# --- per-replica bookkeeping -----------------------------------------------------------------


@dataclass
class _Replica:
    queue: str
    server: str
    node: str
    emitter: str
    role: str | None = None
    last_index: int | None = None
    snapshot_index: int | None = None
    #: raft index of an enqueue -> workload message id
    msg_ids: dict[int, int | None] = field(default_factory=dict)
    #: (consumer pid, tag, consumer's msg id) -> (raft index, msg id, attempt, key)
    decided: dict[tuple[Any, Any, int], tuple[int, int | None, int, str]] = field(
        default_factory=dict)
    #: (consumer pid, tag) -> consumer key
    keys: dict[tuple[Any, Any], str] = field(default_factory=dict)
    #: the header counter ``x-delivery-count`` carries under the machine version last
    #: applied (`_attempt`)
    counter: str = "acquired_count"

    def emit(self, kind: str, **fields: Any) -> None:
        trace.emit(kind, node=self.node, emitter=self.emitter, queue=self.queue,
                   server=self.server, role=self.role, **fields)


_REPLICAS: dict[tuple[Any, str], _Replica] = {}


def _replica(s: RabbitFifoState) -> _Replica:
    node = actors.node()
    key = (s.cfg.name, node)
    r = _REPLICAS.get(key)
    if r is None:
        queue = _queue_name(s)
        r = _Replica(queue, f"{queue}@{short_node(node)}", node, f"{node}/ra/{queue}")
        _REPLICAS[key] = r
    return r


def forget() -> None:
    """Drop every replica's bookkeeping (tests that restart nodes in one process)."""
    _REPLICAS.clear()


def _bounded_put(d: dict[Any, Any], key: Any, value: Any) -> None:
    d[key] = value
    if len(d) > CACHE_MAX:
        del d[next(iter(d))]


# --- apply -----------------------------------------------------------------------------------


@frozen_init
@dataclass(frozen=True, slots=True)
class Before:
    """What an apply is compared with: consumers' next msg ids, the dead-letter backlog,
    and for a settle the consumer (its key and record) and the messages it held of those
    named."""

    next_ids: dict[Hashable, int]
    dlx: dict[int, str] | None
    settling: tuple[Hashable, Consumer, dict[int, Msg]] | None = None


def _dlx_backlog(s: RabbitFifoState) -> dict[int, str] | None:
    if s.cfg.dead_letter_handler != "at_least_once":
        return None
    out = {msg_idx(m): reason for reason, m in s.dlx.discards}
    if s.dlx.consumer is not None:
        out.update((msg_idx(m), reason) for reason, m in s.dlx.consumer.checked_out.values())
    return out


def before_apply(s: RabbitFifoState, cmd: Any = None) -> Before:
    return Before({k: c.next_msg_id for k, c in s.consumers.items()}, _dlx_backlog(s),
                  _settling(s, cmd))


def _settling(s: RabbitFifoState,
              cmd: Any) -> tuple[Hashable, Consumer, dict[int, Msg]] | None:
    if not isinstance(cmd, Settle):
        return None
    key = consumer_key_from_id(cmd.consumer_key, s)
    c = None if key is None else s.consumers.get(key)
    if c is None:
        return None
    held = {i: c.checked_out[i] for i in cmd.msg_ids if i in c.checked_out}
    return (key, c, held) if held else None


def applied(meta: Mapping[str, Any], cmd: Any, s: RabbitFifoState, before: Before,
            ctx: TraceContext | None = None) -> None:
    """Record one machine apply on this member (called after it, with its result state);
    `ctx` is the applying server's context, if the machine runs in one."""
    r = _replica(s)
    log = None if ctx is None else ctx.log
    idx, term = int(meta["index"]), meta.get("term")
    if log is not None and r.last_index is not None and idx > r.last_index + 1:
        _fill_raft_entries(r, log, r.last_index + 1, idx)
    r.last_index = idx
    msg = _enqueued_msg(cmd)
    msg_id = None if msg is None else warren_id(msg)
    if msg is not None:
        _bounded_put(r.msg_ids, idx, msg_id)
    extra: dict[str, Any] = {}
    if idx % _digest_every == 0:
        view = replica_view(s)
        extra["state_digest"] = digest(view)
        if _views:
            extra["view"] = view
    r.emit("applied", raft_term=term, raft_index=idx, cmd_type=cmd_type(cmd),
           cmd_digest=digest(cmd), msg_id=msg_id, **_counts(s), **extra)
    _decisions(r, log, s, before, idx, term)
    if before.settling is not None:
        _settled(r, log, s, before.settling, idx, term)
    if before.dlx is not None:
        _dead_letters(r, log, s, before.dlx, idx, term)


def _counts(s: RabbitFifoState) -> dict[str, int]:
    """Ready and checked-out messages of the state: what post-drain emptiness reads."""
    return {"ready": messages_ready(s),
            "checked_out": sum(len(c.checked_out) for c in s.consumers.values())}


def _fill_raft_entries(r: _Replica, log: LogReader, lo: int, hi: int) -> None:
    """``applied`` rows for the entries between two machine applies (noops, cluster changes)."""
    for j in range(lo, hi):
        entry = log.fetch(j)
        if entry is None:
            return
        _, term, cmd = entry
        match cmd:
            case (tag, *_) if tag == NOOP:
                kind = "noop"
            case (tag, _meta, cluster, *_) if tag == RA_CLUSTER_CHANGE:
                # the membership from this index on (Ra uses a change once appended)
                r.emit("applied", raft_term=term, raft_index=j, cmd_type="cluster_change",
                       cmd_digest=digest(cmd), members=_member_names(r.queue, cluster))
                r.last_index = j
                continue
            case (tag, *_) if tag == RA_CLUSTER_CHANGE:
                kind = "cluster_change"
            case (tag, _m, "delete", *_) if tag == RA_CLUSTER:
                kind = "delete"
            case (tag, _m, data, *_) if tag == USR:
                kind = cmd_type(data)
            case _:
                kind = "unknown"
        r.emit("applied", raft_term=term, raft_index=j, cmd_type=kind, cmd_digest=digest(cmd))
        r.last_index = j


def _msg_id_at(r: _Replica, log: LogReader | None, idx: int) -> int | None:
    if idx in r.msg_ids:
        return r.msg_ids[idx]
    if log is None:
        return None
    entry = log.fetch(idx)
    if entry is None or not (isinstance(entry[2], tuple) and entry[2][:1] == (USR,)):
        return None
    msg = _enqueued_msg(entry[2][2])
    msg_id = None if msg is None else warren_id(msg)
    _bounded_put(r.msg_ids, idx, msg_id)
    return msg_id


def _decisions(r: _Replica, log: LogReader | None, s: RabbitFifoState, before: Before,
               idx: int, term: Any) -> None:
    r.counter = rules_of_state(s).delivery_limit_counter
    for key, c in s.consumers.items():
        first = before.next_ids.get(key, 0)
        if c.next_msg_id == first:
            continue
        pid, tag = c.cfg.pid, c.cfg.tag
        ckey = _key_of(r, c)
        cnode = _pid_node(pid)
        for cmid in range(first, c.next_msg_id):
            m = c.checked_out.get(cmid)
            if m is None:
                continue
            msg_id = _msg_id_at(r, log, msg_idx(m))
            attempt = _attempt(msg_header(m), r.counter)
            _bounded_put(r.decided, (pid, tag, cmid), (idx, msg_id, attempt, ckey))
            r.emit("service_queue", raft_term=term, raft_index=idx, msg_id=msg_id,
                   consumer_key=ckey, consumer_node=cnode, attempt=attempt,
                   delivery_id=cmid)


def _key_of(r: _Replica, c: Consumer) -> str:
    """The history's key of consumer `c`, remembered per (pid, tag)."""
    pid, tag = c.cfg.pid, c.cfg.tag
    ckey = r.keys.get((pid, tag))
    if ckey is None:
        ckey = _consumer_key(tag, pid, c.cfg.meta)
        _bounded_put(r.keys, (pid, tag), ckey)
    return ckey


def _settled(r: _Replica, log: LogReader | None, s: RabbitFifoState,
             settling: tuple[Hashable, Consumer, dict[int, Msg]], idx: int,
             term: Any) -> None:
    """``settled`` for each message this settle took from its consumer: from this index
    on the queue must never hand it out again (the replica form of
    ``duplicated_beyond_redelivery``)."""
    key, c, held = settling
    after = s.consumers.get(key)
    still = after.checked_out if after is not None else {}
    ckey = _key_of(r, c)
    for cmid, m in held.items():
        if cmid not in still:
            r.emit("settled", raft_term=term, raft_index=idx,
                   msg_id=_msg_id_at(r, log, msg_idx(m)), consumer_key=ckey, delivery_id=cmid)


def _dead_letters(r: _Replica, log: LogReader | None, s: RabbitFifoState,
                  before: dict[int, str], idx: int, term: Any) -> None:
    after = _dlx_backlog(s) or {}
    for ridx in sorted(after.keys() - before.keys()):
        r.emit("dlx_discard", raft_term=term, raft_index=idx,
               msg_id=_msg_id_at(r, log, ridx), reason=after[ridx], msg_index=ridx)
    for ridx in sorted(before.keys() - after.keys()):
        r.emit("dlx_settled", raft_term=term, raft_index=idx,
               msg_id=_msg_id_at(r, log, ridx), reason=before[ridx], msg_index=ridx)


# --- roles, recovery, snapshots --------------------------------------------------------------


def entered(ra_state: str, s: RabbitFifoState, ctx: TraceContext | None = None) -> None:
    """The member entered Raft state `ra_state` (``recover``, ``follower``, ``leader`` ...);
    `ctx` is its server's context, if the machine runs in one."""
    r = _replica(s)
    previous, r.role = r.role, ra_state
    term = None if ctx is None else ctx.term
    if ra_state == "recover" and ctx is not None:
        r.last_index = ctx.last_applied
        r.emit("recovered", raft_term=term, raft_index=ctx.last_applied)
    leader = None if ctx is None else _server_name(r.queue, ctx.leader)
    if ra_state == "leader":
        leader = r.server
    r.emit("role_change", raft_term=term, leader=leader, previous=previous)
    if ra_state == "leader":
        # with the membership it leads: before any recorded cluster change, the queue's
        # initial members
        members = None if ctx is None else _member_names(r.queue, ctx.cluster)
        r.emit("leader_elected", raft_term=term, leader=r.server, members=members)


def _member_names(queue: str, cluster: Any) -> list[str]:
    """The servers of a Ra cluster map (or its dehydrated form), as history names."""
    return sorted(n for n in (_server_name(queue, sid) for sid in cluster or ()) if n is not None)


def snapshot_installed(meta: Mapping[str, Any], s: RabbitFifoState) -> None:
    """A snapshot from the leader replaced the state: applies resume after its index."""
    r = _replica(s)
    idx = int(meta["index"])
    r.last_index = r.snapshot_index = idx
    r.emit("snapshot_installed", raft_term=meta.get("term"), raft_index=idx,
           members=_member_names(r.queue, meta.get("cluster")), **_counts(s))


def ticked(s: RabbitFifoState, srv: Any) -> None:
    """A periodic look at the server: records a snapshot this member took since the last."""
    snap = srv.log.snapshot_index_term()
    if snap is None:
        return
    r = _replica(s)
    if snap[0] != r.snapshot_index:
        r.snapshot_index = snap[0]
        r.emit("snapshot_taken", raft_term=snap[1], raft_index=snap[0])


# --- sends -----------------------------------------------------------------------------------


def _delivered(msg: Any) -> tuple[Any, list[tuple[int, Any, Msg | None, Any]]] | None:
    """``(tag, [(consumer msg id, header, message ref, body)])`` of a delivery message."""
    match msg:
        case ("delivery", tag, _plan, plain):
            refs = [(cmid, unpack(m)) for cmid, m in plain]  # v8 sends packed references
            return tag, [(cmid, h, (i, h), None) for cmid, (i, h) in refs]
        case ("delivery", tag, id_msgs):
            return tag, [(cmid, h, None, body) for cmid, (h, body) in id_msgs]
    return None


def sent(ra_name: Any, effects: list[Effect]) -> None:
    """``local_delivery`` for each message of the ``send_msg`` deliveries in `effects`."""
    r = None
    for eff in effects:
        if not (isinstance(eff, tuple) and len(eff) == 4 and eff[0] == "send_msg"):
            continue
        found = _delivered(eff[2])
        if found is None:
            continue
        if r is None:
            r = _REPLICAS.get((ra_name, actors.node()))
            if r is None:
                return
        pid, (tag, items) = eff[1], found
        ids = [cmid for cmid, *_ in items]
        for cmid, header, ref, body in items:
            decided = r.decided.pop((pid, tag, cmid), None)
            if decided is not None:
                idx, msg_id, attempt, ckey = decided
            else:
                idx, attempt = None, _attempt(header, r.counter)
                ckey = r.keys.get((pid, tag)) or _consumer_key(tag, pid, None)
                msg_id = (warren_id(body) if ref is None
                          else r.msg_ids.get(msg_idx(ref)))
            r.emit("local_delivery", raft_index=idx, msg_id=msg_id, consumer_key=ckey,
                   consumer_node=_pid_node(pid), attempt=attempt, to=pid, tag=tag,
                   delivery_id=cmid, delivery_ids=ids)
