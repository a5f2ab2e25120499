"""Tiny hand-written histories, one per legal corner or violation kind.

A case builds its rows through `Builder`, which namespaces every queue, connection and
message id, so all cases can also be merged into one history and checked by Spark in a
single pass. Each case returns the violation rows it expects (exactly) and the status
it expects from the checks it is about.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from analysis.model import Violation

Row = dict[str, Any]
MS = 1_000_000


class Builder:
    def __init__(self, prefix: str = "", msg_base: int = 0) -> None:
        self.p = prefix
        self.base = msg_base
        self.t = 1_000 * MS
        self.rows: dict[str, list[Row]] = defaultdict(list)
        self.seq: dict[str, int] = defaultdict(int)
        self.queues: dict[str, dict[str, Any]] = {}
        self.tags: dict[tuple[str, int], int] = defaultdict(int)

    # names
    def q(self, name: str) -> str:
        return self.p + name

    def m(self, i: int) -> int:
        return self.base + i

    def conn(self, name: str) -> str:
        return self.p + name

    def ckey(self, conn: str, ch: int = 1, tag: str = "t") -> str:
        return f"{self.conn(conn)}/{ch}/{tag}"

    def v(self, check: str, violation: str, queue: str | None = None, msg: int | None = None,
          other: int | None = None, key: str | None = None, raft_index: int | None = None,
          ts_ns: int | None = None, detail: str | None = None) -> Violation:
        return (check, violation, None if queue is None else self.q(queue),
                None if msg is None else self.m(msg), None if other is None else self.m(other),
                key, raft_index, ts_ns, detail)

    # rows
    def _emit(self, table: str, emitter: str, kind: str, node: str, **f: Any) -> Row:
        self.t += MS
        row = {"run_id": "cases", "node": node, "emitter": emitter, "seq": self.seq[emitter],
               "ts_ns": self.t, "wall_ns": self.t, "kind": kind, **f}
        self.seq[emitter] += 1
        self.rows[table].append(row)
        return row

    def config(self, queue: str, **cfg: Any) -> None:
        if "dlx_target" in cfg:
            cfg["dlx_target"] = self.q(cfg["dlx_target"])
        self.queues[self.q(queue)] = cfg

    def op(self, kind: str, conn: str | None = None, ch: int | None = 1, **f: Any) -> Row:
        for k in ("queue",):
            if f.get(k) is not None:
                f[k] = self.q(f[k])
        if f.get("msg_id") is not None:
            f["msg_id"] = self.m(f["msg_id"])
        c = self.conn(conn) if conn else None
        return self._emit("client_ops", f"{self.p}client/{conn}", kind, "client", conn_id=c,
                          channel_id=ch if conn else None, **f)

    def open(self, conn: str, ch: int = 1) -> None:
        self.op("channel_open", conn, ch)
        self.tags[(conn, ch)] = 0

    def publish(self, queue: str, m: int, conn: str = "p", ch: int = 1, seq: int | None = None,
                confirm: str | None = "confirm", digest: int | None = None) -> None:
        seq = m if seq is None else seq
        pub_chan = f"{self.conn(conn)}/{ch}"
        self.op("publish", conn, ch, queue=queue, msg_id=m, pub_seq=seq, pub_chan=pub_chan,
                body_digest=m if digest is None else digest)
        if confirm:
            self.op(confirm, conn, ch, queue=queue, msg_id=m, pub_seq=seq)

    def deliver(self, queue: str, m: int, conn: str = "c", ch: int = 1, tag: str = "t",
                redelivered: bool = False, count: int | None = None, pub: str = "p",
                seq: int | None = None, digest: int | None = None, kind: str = "deliver",
                dtag: int | None = None) -> int:
        self.tags[(conn, ch)] += 1
        dtag = self.tags[(conn, ch)] if dtag is None else dtag
        self.op(kind, conn, ch, queue=queue, msg_id=m, consumer_tag=tag, delivery_tag=dtag,
                redelivered=redelivered, delivery_count=count, pub_chan=f"{self.conn(pub)}/1",
                pub_seq=m if seq is None else seq, body_digest=m if digest is None else digest)
        return dtag

    def settle(self, kind: str, queue: str, m: int, dtag: int, conn: str = "c", ch: int = 1,
               requeue: bool | None = None) -> None:
        self.op(kind, conn, ch, queue=queue, msg_id=m, delivery_tag=dtag, requeue=requeue)

    def close(self, conn: str, ch: int = 1, error: str | None = None) -> None:
        self.op("channel_close", conn, ch, error=error)

    def drain(self) -> None:
        self.op("drain_end", None, None, outcome="ok")

    def rep(self, kind: str, queue: str, node: str, **f: Any) -> Row:
        if f.get("msg_id") is not None:
            f["msg_id"] = self.m(f["msg_id"])
        q = self.q(queue)
        return self._emit("replica_events", f"{node}/ra/{q}", kind, node, queue=q,
                          server=f"{q}@{node}", **f)

    def applied(self, queue: str, idx: int, cmd: str = "enqueue", m: int | None = None,
                nodes: tuple[str, ...] = ("n1", "n2", "n3"), term: int = 1,
                digest: int | None = None, state: int | None = None) -> None:
        for n in nodes:
            self.rep("applied", queue, n, raft_index=idx, raft_term=term, cmd_type=cmd,
                     msg_id=m, cmd_digest=idx if digest is None else digest,
                     state_digest=idx if state is None else state)

    def pid(self, serial: int, node: str = "n1") -> str:
        """A pid as recorded (`<node.serial.creation>`)."""
        return f"<{self.p}{node}.{serial}.1>"

    def sup(self, kind: str, path: str, supervisor: str, cls: str | None = None,
            reason: str | None = None, node: str = "n1", **extra: Any) -> Row:
        """A supervision event; `path` and `node` are namespaced, `extra` is JSON."""
        node = self.p + node
        return self._emit("supervision_events", f"{node}/sup", kind, node,
                          actor_path=f"{node}/{path}", supervisor=supervisor, actor_class=cls,
                          reason=reason, restart_count=0,
                          extra=json.dumps(extra) if extra else None)

    def tables(self) -> dict[str, list[Row]]:
        out = dict(self.rows)
        out["run_meta"] = [{"run_id": "cases", "node": "harness", "emitter": "harness",
                            "seq": 0, "ts_ns": 0, "wall_ns": 0, "kind": "run_meta",
                            "queues_json": json.dumps(self.queues), "drain_expected": True,
                            "workload": "total_queue", "state_digest_every": 1}]
        return out


Case = Callable[[Builder], tuple[list[Violation], dict[str, str]]]
CASES: dict[str, Case] = {}


def case(fn: Case) -> Case:
    CASES[fn.__name__] = fn
    return fn


TQ = "total_queue"


@case
def redelivery_after_requeue_is_legal(b: Builder) -> tuple[list[Violation], dict[str, str]]:
    b.open("p"), b.open("c")
    b.publish("q", 1)
    t1 = b.deliver("q", 1)
    b.settle("nack", "q", 1, t1, requeue=True)
    t2 = b.deliver("q", 1, redelivered=True, count=1)
    b.settle("ack", "q", 1, t2)
    b.drain()
    return [], {TQ: "pass", "ordering_channel_fifo": "pass"}


@case
def ack_lost_in_channel_close_is_legal(b: Builder) -> tuple[list[Violation], dict[str, str]]:
    b.open("p"), b.open("c")
    b.publish("q", 1)
    t1 = b.deliver("q", 1)
    b.settle("ack", "q", 1, t1)
    b.close("c", error="connection_forced")
    b.open("c")  # the same channel number, a new epoch: tags restart
    t2 = b.deliver("q", 1, redelivered=True, count=1)
    b.settle("ack", "q", 1, t2)
    b.drain()
    return [], {TQ: "pass"}


@case
def lost_messages_are_split_by_whether_delivered(
        b: Builder) -> tuple[list[Violation], dict[str, str]]:
    b.open("p"), b.open("c")
    b.publish("q", 1)
    b.publish("q", 2)
    b.deliver("q", 2)  # never acked, channel still open at the end
    b.publish("q", 3, confirm="pub_timeout")  # indeterminate: may be lost
    b.drain()
    return [b.v(TQ, "lost_never_delivered", "q", 1),
            b.v(TQ, "lost_delivered_never_acked", "q", 2)], {TQ: "fail"}


@case
def unexpected_and_corrupted_deliveries(b: Builder) -> tuple[list[Violation], dict[str, str]]:
    b.open("p"), b.open("c")
    b.publish("q", 1)
    t = b.deliver("q", 1, digest=77)
    b.settle("ack", "q", 1, t)
    t = b.deliver("q", 9)
    b.settle("ack", "q", 9, t)
    b.drain()
    key = f"{b.conn('c')}/1"
    rows = b.rows["client_ops"]
    ts = [r["ts_ns"] for r in rows if r["kind"] == "deliver"]
    return [b.v(TQ, "unexpected_body", "q", 1, key=key, ts_ns=ts[0]),
            b.v(TQ, "unexpected", "q", 9, key=key, ts_ns=ts[1])], {TQ: "fail"}


@case
def duplicate_beyond_redelivery(b: Builder) -> tuple[list[Violation], dict[str, str]]:
    b.open("p"), b.open("c")
    b.publish("q", 1)
    for _ in range(3):  # acked three times, never returned
        t = b.deliver("q", 1, redelivered=True)
        b.settle("ack", "q", 1, t)
    b.drain()
    return [b.v(TQ, "duplicated_beyond_redelivery", "q", 1, detail="2")], {TQ: "fail"}


def _replicated(b: Builder, queue: str, idx: int, cmd: str, m: int, decide_for: str | None = None,
                attempt: int = 0) -> None:
    """Members n1 and n2 apply `cmd` at `idx`; a settle records `settled` for `m`, and
    `decide_for` (a consumer connection) gets `m` there, sent by n2, the consumer's node."""
    b.applied(queue, idx, cmd, m if cmd == "enqueue" else None, nodes=("n1", "n2"))
    for n in ("n1", "n2"):
        if cmd == "settle":
            b.rep("settled", queue, n, raft_index=idx, msg_id=m, consumer_key=b.ckey("c"))
        if decide_for is not None:
            b.rep("service_queue", queue, n, raft_index=idx, msg_id=m, attempt=attempt,
                  consumer_key=b.ckey(decide_for), consumer_node="n2")
    if decide_for is not None:
        b.rep("local_delivery", queue, "n2", raft_index=idx, msg_id=m, attempt=attempt,
              consumer_key=b.ckey(decide_for))


@case
def settled_message_decided_again_is_duplicated(
        b: Builder) -> tuple[list[Violation], dict[str, str]]:
    """The replica form: once the settle of a message is applied, the queue must never
    hand it out again. The client's view of the same deliveries is only counted."""
    q = b.q("sd")
    b.open("p"), b.open("c")
    b.rep("leader_elected", "sd", "n1", raft_term=1, leader=f"{q}@n1")
    b.publish("sd", 1)
    _replicated(b, "sd", 1, "enqueue", 1, decide_for="c")
    t = b.deliver("sd", 1)
    b.settle("ack", "sd", 1, t)
    _replicated(b, "sd", 2, "settle", 1)
    _replicated(b, "sd", 3, "checkout", 1, decide_for="c")  # handed out again
    t = b.deliver("sd", 1, redelivered=True)
    b.settle("ack", "sd", 1, t)
    _replicated(b, "sd", 4, "settle", 1)
    b.drain()
    return [b.v(TQ, "duplicated_beyond_redelivery", "sd", 1, raft_index=3,
                detail="decided at 3 after its settle at 2")], \
        {TQ: "fail", "local_delivery": "pass", "replica_determinism": "pass"}


@case
def an_ack_the_queue_never_settled_explains_the_redelivery(
        b: Builder) -> tuple[list[Violation], dict[str, str]]:
    """The client acked, but the settle never reached the log (its channel went down),
    so the queue returned the message and handed it out again: legal for the replicas,
    though the client alone cannot tell it from a duplicate."""
    q = b.q("su")
    b.open("p"), b.open("c"), b.open("d")
    b.rep("leader_elected", "su", "n1", raft_term=1, leader=f"{q}@n1")
    b.publish("su", 1)
    _replicated(b, "su", 1, "enqueue", 1, decide_for="c")
    t = b.deliver("su", 1)
    b.settle("ack", "su", 1, t)
    _replicated(b, "su", 2, "down", 1, decide_for="d", attempt=1)
    t = b.deliver("su", 1, conn="d", redelivered=True, count=1)
    b.settle("ack", "su", 1, t, conn="d")
    _replicated(b, "su", 3, "settle", 1)
    b.drain()
    return [], {TQ: "pass", "local_delivery": "pass", "replica_determinism": "pass"}


@case
def dead_lettered_drop_explains_second_delivery(
        b: Builder) -> tuple[list[Violation], dict[str, str]]:
    b.config("src", dlx_strategy="at-least-once", dlx_target="dlq")
    b.open("p"), b.open("c")
    b.publish("src", 1)
    t = b.deliver("src", 1)
    b.settle("reject", "src", 1, t, requeue=False)
    b.applied("src", 1, "enqueue", 1)
    b.rep("dlx_discard", "src", "n1", msg_id=1)
    b.applied("dlq", 1, "enqueue", 1)
    b.applied("dlq", 2, "enqueue", 1)  # dead-lettered twice: allowed
    b.rep("dlx_settled", "src", "n1", msg_id=1)
    t = b.deliver("dlq", 1)
    b.settle("ack", "dlq", 1, t)
    b.drain()
    return [], {TQ: "pass", "dlx_at_least_once": "pass"}


@case
def dlx_lost_and_pending(b: Builder) -> tuple[list[Violation], dict[str, str]]:
    b.config("src", dlx_strategy="at-least-once", dlx_target="dlq")
    b.rep("dlx_discard", "src", "n1", msg_id=1)
    b.rep("dlx_settled", "src", "n1", msg_id=1)
    b.rep("dlx_discard", "src", "n1", msg_id=2)
    ts = [r["ts_ns"] for r in b.rows["replica_events"] if r["kind"] == "dlx_discard"]
    b.drain()
    return [b.v("dlx_at_least_once", "dlx_lost", "src", 1, key=b.q("dlq"), ts_ns=ts[0]),
            b.v("dlx_at_least_once", "dlx_pending", "src", 2, key=b.q("dlq"), ts_ns=ts[1])], \
        {"dlx_at_least_once": "fail"}


@case
def dlx_duplicate_dead_letter_is_counted_not_lost(
        b: Builder) -> tuple[list[Violation], dict[str, str]]:
    # at-least-once: the target took the discarded message twice (its worker resent it
    # after a failover); the message arrived, and the second copy is only counted
    b.config("src", dlx_strategy="at-least-once", dlx_target="dlq")
    b.rep("dlx_discard", "src", "n1", msg_id=1)
    b.applied("dlq", 1, "enqueue", 1)
    b.applied("dlq", 2, "enqueue", 1)
    b.rep("dlx_settled", "src", "n1", msg_id=1)
    b.drain()
    return [], {"dlx_at_least_once": "pass"}


@case
def publish_order_broken_per_channel(b: Builder) -> tuple[list[Violation], dict[str, str]]:
    b.open("p"), b.open("c")
    for m in (1, 2, 3):
        b.publish("q", m)
    b.deliver("q", 1)
    r3 = b.deliver("q", 3)
    b.deliver("q", 2)
    b.applied("q", 1, "enqueue", 1)
    b.applied("q", 2, "enqueue", 2)
    b.applied("q", 3, "enqueue", 3)
    ts = b.rows["client_ops"][-1]["ts_ns"]
    assert r3 == 2
    return [b.v("ordering_channel_fifo", "pub_seq_descent", "q", 2, 3,
                key=f"{b.conn('p')}/1>{b.ckey('c')}", ts_ns=ts, detail="3>2"),
            b.v("ordering_consumer_monotonic", "pos_descent", "q", 2, 3, key=b.ckey("c"),
                raft_index=2, ts_ns=ts, detail="3>2")], \
        {"ordering_channel_fifo": "fail", "ordering_consumer_monotonic": "fail"}


@case
def sac_strict_fifo_violations(b: Builder) -> tuple[list[Violation], dict[str, str]]:
    b.config("s", sac=True, prefetch=1)
    b.open("p"), b.open("c"), b.open("d")
    for m in (1, 2):
        b.publish("s", m)
        b.applied("s", m, "enqueue", m)
    t1 = b.deliver("s", 1)
    t2 = b.deliver("s", 2, conn="d")  # second consumer while 1 is outstanding
    ts2 = b.rows["client_ops"][-1]["ts_ns"]
    b.settle("ack", "s", 2, t2, conn="d")
    b.settle("ack", "s", 1, t1)
    ack1 = b.rows["client_ops"][-1]["ts_ns"]
    b.drain()
    chk = "ordering_sac_fifo"
    return [b.v(chk, "sac_overlap", "s", 2, 1, key=b.ckey("d"), ts_ns=ts2),
            b.v(chk, "sac_order", "s", 1, 2, raft_index=1, ts_ns=ack1, detail="2>1"),
            b.v(chk, "sac_overtake", "s", 2, 1, key=b.ckey("d"), raft_index=2, ts_ns=ts2)], \
        {chk: "fail"}


@case
def replica_divergence(b: Builder) -> tuple[list[Violation], dict[str, str]]:
    b.applied("r", 1, "enqueue", 1)
    b.applied("r", 2, "enqueue", 2, nodes=("n1", "n2"))
    b.applied("r", 2, "enqueue", 2, nodes=("n3",), digest=99)  # different command
    b.applied("r", 3, "settle", 1, nodes=("n1", "n2"))
    b.applied("r", 3, "settle", 1, nodes=("n3",), state=42)  # different state
    b.applied("r", 5, "noop", nodes=("n1",))  # gap after 3
    b.rep("leader_elected", "r", "n1", raft_term=1, leader=b.q("r") + "@n1")
    b.rep("leader_elected", "r", "n2", raft_term=1, leader=b.q("r") + "@n2")
    for n in ("n1", "n2"):
        b.rep("service_queue", "r", n, raft_index=1, msg_id=1, consumer_key="k", attempt=0)
    gap_ts = next(r["ts_ns"] for r in b.rows["replica_events"] if r.get("raft_index") == 5)
    chk = "replica_determinism"
    return [b.v(chk, "log_disagreement", "r", raft_index=2, detail="2"),
            b.v(chk, "state_disagreement", "r", raft_index=3, detail="2"),
            b.v(chk, "decision_disagreement", "r", raft_index=1, detail="2"),
            b.v(chk, "apply_gap", "r", key=b.q("r") + "@n1", raft_index=5, ts_ns=gap_ts,
                detail="after 3"),
            b.v(chk, "election_safety", "r", key="term=1", detail="2")], {chk: "fail"}


@case
def snapshot_install_continues_the_log(b: Builder) -> tuple[list[Violation], dict[str, str]]:
    b.applied("r", 1, "noop", nodes=("n1",))
    b.rep("snapshot_installed", "r", "n1", raft_index=10)
    b.applied("r", 11, "noop", nodes=("n1",))
    b.rep("recovered", "r", "n1", raft_index=4)
    b.applied("r", 5, "noop", nodes=("n1",))
    b.applied("r", 5, "noop", nodes=("n1",))  # applied twice
    ts = b.rows["replica_events"][-1]["ts_ns"]
    chk = "replica_determinism"
    return [b.v(chk, "apply_repeat", "r", key=b.q("r") + "@n1", raft_index=5, ts_ns=ts,
                detail="after 5")], {chk: "fail"}


@case
def local_delivery_kinds(b: Builder) -> tuple[list[Violation], dict[str, str]]:
    q = b.q("l")
    b.open("c")
    b.rep("leader_elected", "l", "n1", raft_term=1, leader=f"{q}@n1")
    for i, m in enumerate((1, 2, 3, 4, 5, 6), start=1):
        b.applied("l", i, "enqueue", m, nodes=("n1", "n2"))
    decide = {1: "n2", 2: "n2", 3: "n2", 4: "n9", 5: "n2", 6: "n2"}
    for i, cnode in decide.items():
        b.rep("service_queue", "l", "n1", raft_index=i, msg_id=i, consumer_key=b.ckey("c"),
              consumer_node=cnode, attempt=0)
    ld = {"consumer_key": b.ckey("c"), "attempt": 0}
    b.rep("local_delivery", "l", "n2", raft_index=1, msg_id=1, **ld)  # correct
    b.rep("local_delivery", "l", "n2", raft_index=2, msg_id=2, **ld)
    b.rep("local_delivery", "l", "n2", raft_index=2, msg_id=2, **ld)  # double
    wrong = b.rep("local_delivery", "l", "n1", raft_index=3, msg_id=3, **ld)  # n2 has one
    b.rep("local_delivery", "l", "n1", raft_index=4, msg_id=4, **ld)  # n9 has none: leader
    # 5: never sent (missing); 6: never sent but the consumer's channel closed first
    orphan = b.deliver("l", 7)  # no send at all for 7
    orphan_ts = b.rows["client_ops"][-1]["ts_ns"]
    assert orphan == 1
    chk = "local_delivery"
    b.close("c")
    # channel closed before index 6 was applied: move index 6's applies after the close
    for r in b.rows["replica_events"]:
        if r["kind"] == "applied" and r["raft_index"] == 6:
            r["ts_ns"] = b.t + MS
    b.drain()
    return [b.v(chk, "double_send", "l", 2, key=b.ckey("c"), raft_index=2, detail="2"),
            b.v(chk, "wrong_sender", "l", 3, key=f"{q}@n1", raft_index=3, ts_ns=wrong["ts_ns"],
                detail=f"{q}@n2"),
            b.v(chk, "missing_send", "l", 5, key=b.ckey("c"), raft_index=5, detail="0"),
            b.v(chk, "orphan_delivery", "l", 7, key=b.ckey("c"), ts_ns=orphan_ts, detail="0")], \
        {chk: "fail"}


@case
def membership_changes_move_the_expected_sender(
        b: Builder) -> tuple[list[Violation], dict[str, str]]:
    """A member removed at index 3 sends no more: from then on a consumer on its node is
    served by the leader; a member added at index 6 serves its node from there on."""
    q = b.q("mc")
    b.open("c")
    b.rep("leader_elected", "mc", "n1", raft_term=1, leader=f"{q}@n1",
          members=[f"{q}@n1", f"{q}@n2", f"{q}@n3"])

    def change(idx: int, *nodes: str) -> None:
        for n in ("n1", "n2"):
            b.rep("applied", "mc", n, raft_index=idx, raft_term=1, cmd_type="cluster_change",
                  cmd_digest=idx, state_digest=idx, members=[f"{q}@{m}" for m in nodes])

    ld = {"consumer_key": b.ckey("c"), "attempt": 0}

    def decide(idx: int, cnode: str, sender: str) -> dict[str, Any]:
        b.applied("mc", idx, "enqueue", idx, nodes=("n1", "n2"))
        b.rep("service_queue", "mc", "n1", raft_index=idx, msg_id=idx, consumer_key=b.ckey("c"),
              consumer_node=cnode, attempt=0)
        b.rep("service_queue", "mc", "n2", raft_index=idx, msg_id=idx, consumer_key=b.ckey("c"),
              consumer_node=cnode, attempt=0)
        return b.rep("local_delivery", "mc", sender, raft_index=idx, msg_id=idx, **ld)

    decide(1, "n3", "n3")  # n3 is a member: it sends
    decide(2, "n3", "n3")
    change(3, "n1", "n2")  # n3 leaves
    decide(4, "n3", "n1")  # no member on n3 now: the leader sends
    stale = decide(5, "n3", "n3")  # a send by the removed member is wrong
    change(6, "n1", "n2", "n4")  # n4 joins
    decide(7, "n4", "n4")
    b.close("c")
    b.drain()
    chk = "local_delivery"
    return [b.v(chk, "wrong_sender", "mc", 5, key=f"{q}@n3", raft_index=5,
                ts_ns=stale["ts_ns"], detail=f"{q}@n1")], {chk: "fail"}


# -- missing node data: a SIGKILLed node loses its unflushed events -------------
# These cases name their nodes after their prefix: a kill hides every server of its node.

def kill(b: Builder, node: str) -> None:
    b._emit("nemesis_events", "nemesis", "start", "nemesis", fault="kill", targets=[node])


@case
def killed_sender_lost_its_last_sends(b: Builder) -> tuple[list[Violation], dict[str, str]]:
    n1, n2 = b.p + "a1", b.p + "a2"
    q = b.q("h")
    b.open("c")
    b.rep("leader_elected", "h", n1, raft_term=1, leader=f"{q}@{n1}")

    def decide(i: int, nodes: tuple[str, ...]) -> None:
        b.applied("h", i, "enqueue", i, nodes=nodes)
        for n in nodes:
            b.rep("service_queue", "h", n, raft_index=i, msg_id=i, consumer_key=b.ckey("c"),
                  consumer_node=n2, attempt=0)

    decide(1, (n1, n2))
    b.rep("local_delivery", "h", n2, raft_index=1, msg_id=1, consumer_key=b.ckey("c"),
          attempt=0)
    b.deliver("h", 1)
    decide(2, (n1, n2))  # n2 sent 2, but its recorder never flushed the send
    b.deliver("h", 2)
    decide(3, (n1,))  # applied by n2 too, after its last flush
    b.deliver("h", 3)
    kill(b, n2)
    b.rep("recovered", "h", n2, raft_index=0)
    return [], {"local_delivery": "pass", "replica_determinism": "pass"}


@case
def sends_outside_a_hole_are_still_checked(
        b: Builder) -> tuple[list[Violation], dict[str, str]]:
    n1, n2 = b.p + "b1", b.p + "b2"
    b.open("c")

    def decide(i: int) -> None:
        b.applied("o", i, "enqueue", i, nodes=(n1, n2))
        for n in (n1, n2):
            b.rep("service_queue", "o", n, raft_index=i, msg_id=i, consumer_key=b.ckey("c"),
                  consumer_node=n2, attempt=0)

    decide(1)  # never sent, and n2 recorded a later send before it was killed
    decide(2)
    b.rep("local_delivery", "o", n2, raft_index=2, msg_id=2, consumer_key=b.ckey("c"),
          attempt=0)
    kill(b, n2)
    b.rep("recovered", "o", n2, raft_index=0)
    decide(3)  # decided after n2 came back: its record covers it
    chk = "local_delivery"
    return [b.v(chk, "missing_send", "o", 1, key=b.ckey("c"), raft_index=1, detail="0"),
            b.v(chk, "missing_send", "o", 3, key=b.ckey("c"), raft_index=3, detail="0")], \
        {chk: "fail"}


@case
def restarted_member_resends_but_never_twice_per_life(
        b: Builder) -> tuple[list[Violation], dict[str, str]]:
    n1, n2 = b.p + "c1", b.p + "c2"
    b.open("c")
    ld = {"consumer_key": b.ckey("c"), "attempt": 0}
    for i in (1, 2):
        b.applied("r", i, "enqueue", i, nodes=(n1, n2))
        for n in (n1, n2):
            b.rep("service_queue", "r", n, raft_index=i, msg_id=i, consumer_node=n2, **ld)
    b.rep("local_delivery", "r", n2, raft_index=1, msg_id=1, **ld)
    b.rep("local_delivery", "r", n2, raft_index=2, msg_id=2, **ld)
    kill(b, n2)
    # n2 had persisted last_applied 0: it applies 1 and 2 again, effects included
    b.rep("recovered", "r", n2, raft_index=0)
    b.applied("r", 1, "enqueue", 1, nodes=(n2,))
    b.applied("r", 2, "enqueue", 2, nodes=(n2,))
    b.rep("local_delivery", "r", n2, raft_index=1, msg_id=1, **ld)  # a resend: legal
    b.rep("local_delivery", "r", n2, raft_index=2, msg_id=2, **ld)
    b.rep("local_delivery", "r", n2, raft_index=2, msg_id=2, **ld)  # twice in one life
    return [b.v("local_delivery", "double_send", "r", 2, key=b.ckey("c"), raft_index=2,
                detail="2")], {"local_delivery": "fail"}


@case
def decisions_cut_by_a_kill_are_not_compared(
        b: Builder) -> tuple[list[Violation], dict[str, str]]:
    n1, n2, n3 = b.p + "d1", b.p + "d2", b.p + "d3"
    for i in (1, 2):
        b.applied("d", i, "enqueue", i, nodes=(n1, n2, n3))
        for n in (n1, n2) if i == 2 else (n1, n2, n3):
            b.rep("service_queue", "d", n, raft_index=i, msg_id=i, consumer_key="k",
                  consumer_node=n1, attempt=0)
    kill(b, n3)  # n3's decision at 2 was still in its buffer; it never came back
    b.applied("d", 3, "enqueue", 3, nodes=(n1, n2))
    b.rep("service_queue", "d", n1, raft_index=3, msg_id=3, consumer_key="k",
          consumer_node=n1, attempt=0)  # n2 recorded 3 and lost nothing: a disagreement
    chk = "replica_determinism"
    return [b.v(chk, "decision_disagreement", "d", raft_index=3, detail="2")], {chk: "fail"}


@case
def poison_dead_lettered_then_dropped_at_the_target_limit(
        b: Builder) -> tuple[list[Violation], dict[str, str]]:
    b.config("src", type="quorum", delivery_limit=1, dlx_strategy="at-least-once",
             dlx_target="dlq")
    b.config("dlq", type="quorum", delivery_limit=1)
    b.open("p"), b.open("c"), b.open("x")
    for m in (1, 2, 3):
        b.publish("src", m)
        for count in (0, 1):  # rejected with requeue until the limit dead-letters it
            t = b.deliver("src", m, redelivered=count > 0, count=count)
            b.settle("reject", "src", m, t, requeue=True)
        b.rep("dlx_discard", "src", "n1", msg_id=m, reason="delivery_limit")
        b.rep("dlx_settled", "src", "n1", msg_id=m, reason="delivery_limit")
    for count in (0, 1):  # the target's consumer rejects it too: dropped past its limit
        t = b.deliver("dlq", 1, conn="x", redelivered=count > 0, count=count)
        b.settle("reject", "dlq", 1, t, conn="x", requeue=True)
    t = b.deliver("dlq", 2, conn="x")  # returned once, then never again: lost there
    b.settle("reject", "dlq", 2, t, conn="x", requeue=True)
    b.drain()  # 3 was dead-lettered and never delivered from the target
    src = "dead-lettered from " + b.q("src")
    return [b.v(TQ, "lost_delivered_never_acked", "dlq", 2, detail=src),
            b.v(TQ, "lost_never_delivered", "dlq", 3, detail=src)], {TQ: "fail"}


@case
def messages_the_consumer_dropped_are_not_lost(
        b: Builder) -> tuple[list[Violation], dict[str, str]]:
    b.config("q", type="quorum")  # no limit declared: RabbitMQ's default of 20 applies
    b.open("p"), b.open("c")
    b.publish("q", 1)
    t = b.deliver("q", 1)
    b.settle("reject", "q", 1, t, requeue=False)  # no dead-letter target: dropped
    b.publish("q", 2)
    for count in range(21):
        t = b.deliver("q", 2, redelivered=count > 0, count=count)
        b.settle("nack", "q", 2, t, requeue=True)
    b.publish("q", 3)
    for count in range(20):  # one return short of the limit: still in the queue
        t = b.deliver("q", 3, redelivered=count > 0, count=count)
        b.settle("nack", "q", 3, t, requeue=True)
    b.drain()
    return [b.v(TQ, "lost_delivered_never_acked", "q", 3)], {TQ: "fail"}


@case
def dead_lettered_arrivals_are_not_channel_ordered(
        b: Builder) -> tuple[list[Violation], dict[str, str]]:
    b.config("src", dlx_strategy="at-least-once", dlx_target="dlq")
    b.open("p"), b.open("c"), b.open("x")
    for m in (1, 2):
        b.publish("src", m)
    t1 = b.deliver("src", 1)
    t2 = b.deliver("src", 2)
    b.settle("reject", "src", 2, t2, requeue=False)  # 2 is dead-lettered first
    b.settle("reject", "src", 1, t1, requeue=False)
    for m in (2, 1):  # so the target delivers it first: not the publisher's order
        t = b.deliver("dlq", m, conn="x")
        b.settle("ack", "dlq", m, t, conn="x")
    b.drain()
    return [], {TQ: "pass", "ordering_channel_fifo": "pass"}


SL = "supervision_liveness"


@case
def channel_crash_ends_its_transient_channel_sup_by_design(
        b: Builder) -> tuple[list[Violation], dict[str, str]]:
    # recorded before events named their supervisor's pid: it is read from the label
    child = {"pid": b.pid(5), "sup_pid": b.pid(4), "restart_type": "transient"}
    b.sup("started", "channel_sup_sup/channel_sup/5.1", "channel_sup_sup", "channel_sup",
          **child)
    b.sup("started", "_Sup<5.1>/channel", "_Sup<5.1>", "channel", pid=b.pid(6),
          restart="transient")
    b.sup("started", "_Sup<5.1>/limiter", "_Sup<5.1>", "limiter", pid=b.pid(7),
          restart="permanent")
    b.sup("crashed", "_Sup<5.1>/channel", "_Sup<5.1>", "channel", "boom", pid=b.pid(6),
          context="exit")
    b.sup("intensity_exceeded", "_Sup<5.1>", "_Sup<5.1>", None,
          "reached_max_restart_intensity")
    b.sup("crashed", "_Sup<5.1>/limiter", "_Sup<5.1>", "limiter", "killed", pid=b.pid(7),
          context="exit")  # permanent, but its supervisor is gone
    b.sup("stopped", "channel_sup_sup/channel_sup/5.1", "channel_sup_sup", "channel_sup",
          "shutdown", context="exit", **child)  # transient: not restarted
    b.sup("stopped", "channel_sup_sup/channel_sup/5.1", "channel_sup_sup", "channel_sup",
          "not_restarted", context="removed", **child)
    return [], {SL: "pass"}


@case
def permanent_children_left_down_are_reported(
        b: Builder) -> tuple[list[Violation], dict[str, str]]:
    top = {"sup_pid": b.pid(1)}
    recorder = {**top, "pid": b.pid(2), "restart_type": "permanent"}
    b.sup("started", "top/recorder", "top", "recorder", **recorder)
    down = b.sup("crashed", "top/recorder", "top", "recorder", "boom", context="exit",
                 **recorder)
    ra = {**top, "pid": b.pid(3), "restart_type": "permanent", "child_type": "supervisor"}
    b.sup("started", "top/ra_sup", "top", "ra_sup", **ra)
    b.sup("intensity_exceeded", "ra_sup", "ra_sup", None, "reached_max_restart_intensity",
          sup_pid=b.pid(3))  # judged as top's child: top never restarted it
    gone = b.sup("stopped", "top/ra_sup", "top", "ra_sup", "shutdown", context="exit", **ra)
    helper = {**top, "pid": b.pid(4), "restart_type": "transient"}
    b.sup("started", "top/helper", "top", "helper", **helper)
    b.sup("crashed", "top/helper", "top", "helper", "boom", context="exit", **helper)
    root = b.sup("intensity_exceeded", "other", "other", None,
                 "reached_max_restart_intensity", sup_pid=b.pid(9))  # nobody above it
    return [b.v(SL, "not_running", key=down["actor_path"], ts_ns=down["ts_ns"], detail="boom"),
            b.v(SL, "not_running", key=gone["actor_path"], ts_ns=gone["ts_ns"],
                detail="shutdown"),
            b.v(SL, "not_running", key=root["actor_path"], ts_ns=root["ts_ns"],
                detail="reached_max_restart_intensity")], {SL: "fail"}


@case
def a_carried_delivery_count_may_repeat_across_decisions(
        b: Builder) -> tuple[list[Violation], dict[str, str]]:
    # a dead-lettered message keeps its source's delivery count for its first delivery
    # from the target, and its first return there counts 1 again: two decisions, one
    # attempt number, one send each
    b.open("x")
    b.applied("t", 1, "enqueue", 1, nodes=("n1",))
    for idx in (2, 3):
        b.applied("t", idx, "return", nodes=("n1",))
        f = {"raft_index": idx, "msg_id": 1, "consumer_key": b.ckey("x"), "attempt": 1}
        b.rep("service_queue", "t", "n1", consumer_node="n1", **f)
        b.rep("local_delivery", "t", "n1", **f)
        t = b.deliver("t", 1, conn="x", redelivered=True, count=1)
        b.settle("reject", "t", 1, t, conn="x", requeue=True)
    return [], {"local_delivery": "pass"}


# the classic-queue, final-state and returns-order cases register themselves in CASES
from tests.analysis import cases_classic, cases_final, cases_returns  # noqa: E402, F401
