"""Synthetic runs: plausible histories of a three-node cluster, with chosen anomalies.

They let the checks be tested (and a report be seen) without a cluster: a generator
that knows the truth it injected is the other half of the tests' oracle. Everything is
derived from one seed, so a failing example replays exactly.

Legal corners generated on purpose: requeue-nack then redelivery, an ack followed by
an abnormal channel close and a redelivery on the reopened channel, a leader change
under a partition, dead-lettering with the target consumed, and two messages returned
by a channel close and redelivered in order on the reopened channel.
"""

from __future__ import annotations

import json
import random
import shutil
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis import compact, recorder
from analysis.client_ops import body_digest

Row = dict[str, Any]
ANOMALIES = ("lose", "duplicate", "reorder", "unexpected", "nondeterminism", "wrong_sender",
             "double_send", "dlx_lose", "stuck_flow", "crash", "return_reorder")
NODES = ("n1", "n2", "n3")
MS = 1_000_000


@dataclass
class Synthetic:
    """Rows per table plus the anomalies that were injected (check -> ids)."""

    tables: dict[str, list[Row]]
    truth: dict[str, set[Any]] = field(default_factory=dict)


class _Gen:
    def __init__(self, seed: int, run_id: str) -> None:
        self.rnd = random.Random(seed)
        self.run_id = run_id
        self.t = 10 * 1_000_000_000
        self.tables: dict[str, list[Row]] = defaultdict(list)
        self.seqs: dict[str, int] = defaultdict(int)
        self.index: dict[str, int] = defaultdict(int)
        self.term: dict[str, int] = defaultdict(lambda: 1)
        self.leader: dict[str, str] = {}
        self.checked_out: dict[str, int] = defaultdict(int)
        self.tags: dict[tuple[str, int], int] = defaultdict(int)
        self.prefix = ""
        self.msg_base = 0

    def tick(self, lo: float = 0.2, hi: float = 3.0) -> int:
        """Advance the clock by lo..hi time units (5 ms each: a message takes ~50 ms)."""
        self.t += int(self.rnd.uniform(lo, hi) * 5 * MS)
        return self.t

    def emit(self, table: str, node: str, emitter: str, kind: str, **f: Any) -> Row:
        row = {"run_id": self.run_id, "node": node, "emitter": emitter,
               "seq": self.seqs[emitter], "ts_ns": f.pop("ts_ns", self.t),
               "wall_ns": 1_700_000_000_000_000_000 + self.t, "kind": kind, **f}
        self.seqs[emitter] += 1
        self.tables[table].append(row)
        return row

    def client(self, conn: str, kind: str, **f: Any) -> Row:
        client = conn.split("-")[0]
        return self.emit("client_ops", f"client-{client}", f"client-{client}/{conn}", kind,
                         conn_id=conn, **f)

    def apply(self, queue: str, cmd: str, msg_id: int | None = None) -> int:
        """Every replica applies the next index of `queue`'s log."""
        self.index[queue] += 1
        i = self.index[queue]
        term = self.term[queue]
        digest = body_digest(repr((queue, i, cmd, msg_id)).encode())
        # every enqueue is handed to a waiting consumer at once; settles and discards end it
        self.checked_out[queue] += {"enqueue": 1, "settle": -1, "discard": -1}.get(cmd, 0)
        for n in NODES:
            server = f"{queue}@{n}"
            role = "leader" if self.leader[queue] == server else "follower"
            self.emit("replica_events", n, f"{n}/ra/{queue}", "applied", queue=queue,
                      server=server, role=role, raft_term=term, raft_index=i, cmd_type=cmd,
                      cmd_digest=digest, state_digest=digest ^ 0x5A5A, msg_id=msg_id,
                      ready=0, checked_out=self.checked_out[queue],
                      ts_ns=self.t + NODES.index(n) * 100_000)
            if cmd == "settle":
                self.emit("replica_events", n, f"{n}/ra/{queue}", "settled", queue=queue,
                          server=server, raft_term=term, raft_index=i, msg_id=msg_id,
                          ts_ns=self.t + NODES.index(n) * 100_000)
        return i

    def elect(self, queue: str, node: str) -> None:
        self.term[queue] += 1 if queue in self.leader else 0
        self.leader[queue] = f"{queue}@{node}"
        self.emit("replica_events", node, f"{node}/ra/{queue}", "leader_elected", queue=queue,
                  server=f"{queue}@{node}", role="leader", raft_term=self.term[queue],
                  leader=f"{queue}@{node}")

    def dlx_worker(self, queue: str, node: str, up: bool) -> None:
        """The queue's dead-letter worker on `node` starts (and checks out) or stops."""
        pid = f"<{self.prefix}{node}.50.1>"
        fields = json.dumps({"pid": pid, "restart_type": "transient"})
        path = f"{self.prefix}{node}/rabbit_fifo_dlx_sup/rabbit_fifo_dlx_worker/50.1"
        self.emit("supervision_events", node, f"{node}/sup", "started" if up else "stopped",
                  actor_path=path, supervisor="rabbit_fifo_dlx_sup",
                  actor_class="fifo.dlx_worker._start_worker",
                  reason=None if up else "shutdown", extra=fields)
        if up:
            self.emit("replica_events", node, f"{node}/dlx/{queue}", "dlx_worker_checkout",
                      queue=queue, extra=json.dumps({"pid": pid}))


@dataclass
class _Consumer:
    conn: str
    channel: int
    tag: str
    node: str

    @property
    def key(self) -> str:
        return f"{self.conn}/{self.channel}/{self.tag}"


def generate(seed: int = 0, messages: int = 40, anomalies: tuple[str, ...] = (),
             run_id: str | None = None, prefix: str = "", msg_base: int = 0) -> Synthetic:
    """A complete drained run of `messages` publishes over three queues.

    `prefix` (on queue, connection and entity names) and `msg_base` (added to message
    ids) let several generated histories be merged into one without sharing anything.
    """
    g = _Gen(seed, run_id or f"synthetic-{seed}")
    g.prefix, g.msg_base = prefix, msg_base
    rnd = g.rnd
    truth: dict[str, set[Any]] = defaultdict(set)
    P = prefix
    queues = {
        P + "qa": {"type": "quorum", "sac": False, "prefetch": 10},
        P + "qs": {"type": "quorum", "sac": True, "prefetch": 1},
        P + "qd": {"type": "quorum", "dlx_strategy": "at-least-once", "dlx_target": P + "qd.dlx"},
        P + "qd.dlx": {"type": "quorum"},
    }
    g.emit("run_meta", "harness", "harness", "run_meta", started_wall_ns=g.t,
           warren_version="0.1.0", config_json=json.dumps({"seed": seed}),
           queues_json=json.dumps(queues), workload="total_queue", state_digest_every=1,
           drain_expected=True)
    for q in queues:
        g.elect(q, "n1")
    g.dlx_worker(P + "qd", "n1", True)
    consumers = {
        P + "qa": [_Consumer(P + "c1-1", 1, "ctag-a1", "n2"),
                   _Consumer(P + "c2-1", 1, "ctag-a2", "n3")],
        P + "qs": [_Consumer(P + "c1-1", 2, "ctag-s", "n2")],
        P + "qd": [_Consumer(P + "c2-1", 2, "ctag-d", "n3")],
        # no member on n4: the leader sends
        P + "qd.dlx": [_Consumer(P + "c1-2", 1, "ctag-x", "n4")],
    }
    for cs in consumers.values():
        for c in cs:
            if (c.conn, c.channel) not in g.tags:
                g.client(c.conn, "channel_open", channel_id=c.channel)
                g.tags[(c.conn, c.channel)] = 0
            g.client(c.conn, "consume_ok", channel_id=c.channel, consumer_tag=c.tag)
    pubs = [(P + "p1-1", 1), (P + "p2-1", 1)]
    pub_seq: dict[tuple[str, int], int] = defaultdict(int)
    for conn, ch in pubs:
        g.client(conn, "channel_open", channel_id=ch)
    fault_at = messages // 2
    rr = 0
    delivered: list[tuple[str, _Consumer, int, int, int]] = []  # queue, c, msg, tag, pubseq

    def deliver(q: str, c: _Consumer, m: int, attempt: int, pub: tuple[str, int], seq: int,
                body: bytes, idx: int) -> int:
        dnode = c.node if c.node in NODES else g.leader[q].split("@")[1]
        for n in NODES:
            g.emit("replica_events", n, f"{n}/ra/{q}", "service_queue", queue=q,
                   server=f"{q}@{n}", raft_index=idx, msg_id=m, consumer_key=c.key,
                   consumer_node=c.node, attempt=attempt, raft_term=g.term[q])
        g.tick(0.05, 0.3)
        sender = f"{q}@{dnode}"
        g.emit("replica_events", dnode, f"{dnode}/ra/{q}", "local_delivery", queue=q,
               server=sender, role="leader" if g.leader[q] == sender else "follower",
               msg_id=m, consumer_key=c.key, consumer_node=c.node, attempt=attempt,
               raft_index=idx)
        g.tick(0.05, 0.3)
        g.tags[(c.conn, c.channel)] += 1
        tag = g.tags[(c.conn, c.channel)]
        g.client(c.conn, "deliver", channel_id=c.channel, queue=q, consumer_tag=c.tag,
                 delivery_tag=tag, msg_id=m, body_digest=body_digest(body),
                 redelivered=attempt > 0, delivery_count=attempt or None,
                 pub_chan=f"{pub[0]}/{pub[1]}", pub_seq=seq)
        return tag

    for m in range(msg_base + 1, msg_base + messages + 1):
        g.tick()
        if m - msg_base == fault_at:
            g.emit("nemesis_events", "nemesis", "nemesis", "start", fault="partition",
                   targets=["n1"], params="{}")
            for q in queues:
                g.elect(q, "n2")
            g.dlx_worker(P + "qd", "n1", False)
            g.dlx_worker(P + "qd", "n2", True)
        if m - msg_base == fault_at + max(5, messages // 5):
            g.emit("nemesis_events", "nemesis", "nemesis", "stop", fault="partition",
                   targets=["n1"], params="{}")
        q = P + rnd.choice(["qa", "qa", "qs", "qd"])
        pub = pubs[m % 2]
        pub_seq[pub] += 1
        seq = pub_seq[pub]
        body = f"body-{m}".encode()
        g.client(pub[0], "publish", channel_id=pub[1], queue=q, msg_id=m,
                 pub_chan=f"{pub[0]}/{pub[1]}", pub_seq=seq, body_digest=body_digest(body))
        g.tick()
        idx = g.apply(q, "enqueue", m)
        g.tick(0.1, 0.5)
        outcome = rnd.random()
        if outcome < 0.05:
            g.client(pub[0], "pub_timeout", channel_id=pub[1], queue=q, msg_id=m,
                     pub_seq=seq, outcome="info")
        else:
            g.client(pub[0], "confirm", channel_id=pub[1], queue=q, msg_id=m, pub_seq=seq,
                     outcome="ok")
        c = consumers[q][rr % len(consumers[q])]
        rr += 1
        tag = deliver(q, c, m, 0, pub, seq, body, idx)
        g.tick()
        if q == P + "qd":
            g.client(c.conn, "reject", channel_id=c.channel, queue=q, msg_id=m,
                     delivery_tag=tag, requeue=False)
            g.apply(q, "discard", m)
            g.emit("replica_events", "n1", f"n1/ra/{q}", "dlx_discard", queue=q,
                   server=g.leader[q], msg_id=m, reason="rejected")
            g.tick()
            tidx = g.apply(P + "qd.dlx", "enqueue", m)
            g.emit("replica_events", "n1", f"n1/ra/{q}", "dlx_settled", queue=q,
                   server=g.leader[q], msg_id=m)
            x = consumers[P + "qd.dlx"][0]
            xtag = deliver(P + "qd.dlx", x, m, 0, pub, seq, body, tidx)
            g.tick()
            g.client(x.conn, "ack", channel_id=x.channel, queue=P + "qd.dlx", msg_id=m,
                     delivery_tag=xtag)
            g.apply(P + "qd.dlx", "settle", m)
            continue
        if q == P + "qa" and rnd.random() < 0.15:  # requeue, then redelivered
            g.client(c.conn, "nack", channel_id=c.channel, queue=q, msg_id=m, delivery_tag=tag,
                     requeue=True)
            g.tick()
            ridx = g.apply(q, "return", m)
            tag = deliver(q, c, m, 1, pub, seq, body, ridx)
            g.tick()
        g.client(c.conn, "ack", channel_id=c.channel, queue=q, msg_id=m, delivery_tag=tag)
        g.apply(q, "settle", m)
        delivered.append((q, c, m, tag, seq))
    # a consumer's channel closes holding two messages; on the reopened channel they
    # come back to it in the order it got them
    q, c, pub = P + "qa", consumers[P + "qa"][0], pubs[0]
    held = []
    for m in (msg_base + messages + 1, msg_base + messages + 2):
        g.tick()
        pub_seq[pub] += 1
        seq, body = pub_seq[pub], f"body-{m}".encode()
        g.client(pub[0], "publish", channel_id=pub[1], queue=q, msg_id=m,
                 pub_chan=f"{pub[0]}/{pub[1]}", pub_seq=seq, body_digest=body_digest(body))
        g.tick()
        idx = g.apply(q, "enqueue", m)
        g.tick(0.1, 0.5)
        g.client(pub[0], "confirm", channel_id=pub[1], queue=q, msg_id=m, pub_seq=seq,
                 outcome="ok")
        deliver(q, c, m, 0, pub, seq, body, idx)
        held.append((m, seq, body))
    g.tick()
    g.client(c.conn, "channel_close", channel_id=c.channel, error="CHANNEL_ERROR")
    g.tick()
    g.apply(q, "down")
    g.client(c.conn, "channel_open", channel_id=c.channel)
    g.tags[(c.conn, c.channel)] = 0
    g.client(c.conn, "consume_ok", channel_id=c.channel, consumer_tag=c.tag)
    g.tick()
    idx = g.apply(q, "checkout")
    redelivered = []
    for m, seq, body in held:
        tag = deliver(q, c, m, 1, pub, seq, body, idx)
        redelivered.append(g.tables["client_ops"][-1])
        g.tick()
        g.client(c.conn, "ack", channel_id=c.channel, queue=q, msg_id=m, delivery_tag=tag)
        redelivered.append(g.tables["client_ops"][-1])
        g.apply(q, "settle", m)
    g.tick()
    g.client(P + "c1-1", "drain_start")
    g.tick()
    g.client(P + "c1-1", "drain_end", outcome="ok")
    for n in NODES:
        g.emit("supervision_events", n, f"{n}/sup", "started",
               actor_path=f"{P}{n}/warren_sup", supervisor="root",
               actor_class="warren_sup", ts_ns=10 * 1_000_000_000,
               extra=_child_fields(n))
    g.emit("flow_events", "n1", "n1/chan", "credit_blocked", entity_type="channel",
           entity_id=P + "p1-1/1", value=33, ts_ns=g.t - 20 * MS)
    g.emit("flow_events", "n1", "n1/chan", "credit_unblocked", entity_type="channel",
           entity_id=P + "p1-1/1", value=10, ts_ns=g.t - 10 * MS)
    for n in NODES:
        for k in range(3):
            g.emit("samples", n, f"{n}/sampler", "sample", cpu_user_s=0.3 * k, cpu_sys_s=0.1 * k,
                   rss_bytes=100_000_000, mailbox_max=k, open_channels=3,
                   ts_ns=10 * 1_000_000_000 + k * 1_000_000_000)
    _inject(g, anomalies, delivered, truth)
    if "return_reorder" in anomalies:  # the two returned messages come back swapped
        first, first_ack, second, second_ack = redelivered
        for a, b in ((first, second), (first_ack, second_ack)):
            for f in ("msg_id", "body_digest", "pub_seq"):
                a[f], b[f] = b.get(f), a.get(f)
        truth["return_order"].add(first["msg_id"])
    return Synthetic(dict(g.tables), dict(truth))


def _inject(g: _Gen, anomalies: tuple[str, ...], delivered: list[Any],
            truth: dict[str, set[Any]]) -> None:
    rnd = g.rnd
    ops = g.tables["client_ops"]
    rep = g.tables["replica_events"]
    P = g.prefix
    plain = [d for d in delivered if d[0] == P + "qa"]
    confirmed = {r.get("msg_id") for r in ops if r["kind"] == "confirm"}
    if "lose" in anomalies:
        q, _c, m, _tag, _s = rnd.choice([d for d in plain if d[2] in confirmed] or plain)
        ops[:] = [r for r in ops if not (r.get("msg_id") == m and r["kind"] in
                                         ("deliver", "ack", "nack"))]
        rep[:] = [r for r in rep if not (r.get("msg_id") == m and r["kind"] in
                                         ("service_queue", "local_delivery"))]
        truth["lost"].add(m)
    if "duplicate" in anomalies and plain:
        q, c, m, _tag, s = rnd.choice(plain)
        g.tick()
        # the queue hands the settled message out again while applying a later command
        idx = g.apply(q, "checkout")
        g.checked_out[q] += 1
        sender = f"{q}@{c.node if c.node in NODES else g.leader[q].split('@')[1]}"
        for n in NODES:
            g.emit("replica_events", n, f"{n}/ra/{q}", "service_queue", queue=q,
                   server=f"{q}@{n}", raft_index=idx, msg_id=m, consumer_key=c.key,
                   consumer_node=c.node, attempt=0, raft_term=g.term[q])
        g.emit("replica_events", sender.split("@")[1], f"{sender.split('@')[1]}/ra/{q}",
               "local_delivery", queue=q, server=sender,
               role="leader" if g.leader[q] == sender else "follower", msg_id=m,
               consumer_key=c.key, consumer_node=c.node, attempt=0, raft_index=idx)
        g.tick()
        g.tags[(c.conn, c.channel)] += 1
        tag = g.tags[(c.conn, c.channel)]
        g.client(c.conn, "deliver", channel_id=c.channel, queue=q, consumer_tag=c.tag,
                 delivery_tag=tag, msg_id=m, body_digest=body_digest(f"body-{m}".encode()),
                 redelivered=True, pub_seq=s)
        g.tick()
        g.client(c.conn, "ack", channel_id=c.channel, queue=q, msg_id=m, delivery_tag=tag)
        g.apply(q, "settle", m)
        truth["duplicated_beyond_redelivery"].add(m)
        if c.key not in _sent_keys(rep, m):
            truth["orphan_delivery"].add(m)
    if "reorder" in anomalies:
        firsts = [r for r in ops if r["kind"] == "deliver" and not r.get("redelivered")]
        by: dict[tuple[Any, ...], list[Row]] = defaultdict(list)
        for r in firsts:
            by[(r["conn_id"], r["channel_id"], r["pub_chan"])].append(r)
        pairs = [rs for rs in by.values() if len(rs) >= 2]
        if pairs:
            rs = rnd.choice(pairs)
            i = rnd.randrange(len(rs) - 1)
            a, b = rs[i], rs[i + 1]
            a["delivery_tag"], b["delivery_tag"] = b["delivery_tag"], a["delivery_tag"]
            truth["reorder"].add(b["msg_id"])
    if "unexpected" in anomalies:
        g.tick()
        stray = g.msg_base + 999_999
        g.client(P + "c2-1", "deliver", channel_id=1, queue=P + "qa", consumer_tag="ctag-a2",
                 delivery_tag=10_000, msg_id=stray, body_digest=1, redelivered=False)
        truth["unexpected"].add(stray)
    if "nondeterminism" in anomalies:
        applied = [r for r in rep if r["kind"] == "applied" and r["node"] == "n3"]
        r = rnd.choice(applied)
        r["state_digest"] = (r["state_digest"] or 0) + 1
        truth["state_disagreement"].add((r["queue"], r["raft_index"]))
    if "wrong_sender" in anomalies:
        sends = [r for r in rep if r["kind"] == "local_delivery"]
        r = rnd.choice(sends)
        other = next(n for n in NODES if n != r["node"])
        r["server"] = f"{r['queue']}@{other}"
        truth["wrong_sender"].add(r["msg_id"])
    if "double_send" in anomalies:
        sends = [r for r in rep if r["kind"] == "local_delivery"]
        r = dict(rnd.choice(sends))
        g.seqs[r["emitter"]] += 1
        r["seq"] = g.seqs[r["emitter"]]
        r["ts_ns"] += 1
        rep.append(r)
        truth["double_send"].add(r["msg_id"])
    if "dlx_lose" in anomalies:
        moved = [r for r in rep if r["kind"] == "applied" and r["queue"] == P + "qd.dlx"
                 and r["cmd_type"] == "enqueue"]
        if moved:
            m = rnd.choice(moved)["msg_id"]
            rep[:] = [r for r in rep
                      if not (r.get("queue") == P + "qd.dlx" and r.get("msg_id") == m)]
            ops[:] = [r for r in ops
                      if not (r.get("queue") == P + "qd.dlx" and r.get("msg_id") == m)]
            truth["dlx_lost"].add(m)
    if "stuck_flow" in anomalies:
        g.tick()
        g.emit("flow_events", "n2", "n2/chan", "credit_blocked", entity_type="channel",
               entity_id=P + "p2-1/1", value=40)
        g.t += 40 * 1_000_000_000  # the run goes on for 40 s with the channel still blocked
        g.emit("samples", "n2", "n2/sampler", "sample", cpu_user_s=5.0, cpu_sys_s=1.0,
               rss_bytes=100_000_000, mailbox_max=0, open_channels=3)
        truth["flow_stuck"].add(f"channel/{P}p2-1/1")
    if "crash" in anomalies:
        g.tick()
        g.emit("supervision_events", "n2", "n2/sup", "crashed", actor_path=f"{P}n2/warren_sup",
               supervisor="root", actor_class="warren_sup", reason="killed",
               extra=_child_fields("n2"))
        truth["not_running"].add(f"{P}n2/warren_sup")


def _child_fields(node: str) -> str:
    """`extra` of a permanent supervisor child under a root that keeps running."""
    return json.dumps({"pid": f"<{node}.2.1>", "sup_pid": f"<{node}.1.1>",
                       "restart_type": "permanent", "child_type": "supervisor",
                       "significant": False})


def _sent_keys(rep: list[Row], m: int) -> set[str]:
    return {r["consumer_key"] for r in rep if r["kind"] == "local_delivery" and r["msg_id"] == m}


def write_run(run_dir: str | Path, synthetic: Synthetic) -> Path:
    """Record a synthetic history through real recorders (one per node) and compact it."""
    run = Path(run_dir)
    if (run / "raw").exists():
        shutil.rmtree(run / "raw")
    if (run / "history").exists():
        shutil.rmtree(run / "history")
    rows = [(t, r) for t, rs in synthetic.tables.items() for r in rs]
    rows.sort(key=lambda tr: (tr[1]["ts_ns"], tr[1]["emitter"], tr[1]["seq"]))
    recorders: dict[str, recorder.Recorder] = {}
    for table, r in rows:
        node = r["node"]
        rec = recorders.get(node)
        if rec is None:
            rec = recorder.Recorder(run, r["run_id"], node, node, register_atexit=False)
            recorders[node] = rec
        fields = {k: v for k, v in r.items() if k not in ("run_id", "kind", "seq")}
        fields["table"] = table
        rec.sink(r["kind"], fields)
    for rec in recorders.values():
        rec.close()
    compact.compact(run)
    return run
