"""Scenarios as data: cluster size, queues, workload, fault schedule, expectations.

A scenario says what to run and what the analysis must conclude, nothing about how:
`harness.runner` turns it into processes. Keeping them as plain frozen dataclasses
lets `warren scenario list` print them, tests validate all of them without a
cluster, and a new scenario be one entry in `SCENARIOS`.

Fault targets (resolved by the nemesis when the fault starts):
`leader:Q` the node holding Q's leader, `follower:Q` a member that is not the leader,
`node:nK` a fixed node, `random` any live node, `all` every node,
`consumer-channel` a channel with a consumer (for `crash_channel`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from fifo.replica_trace import valid_digest_every

__all__ = ["FAULTS", "ROLES", "SCENARIOS", "ClientSpec", "FaultSpec", "QueueSpec", "Scenario"]

#: fault name -> whether it has a duration (instant faults have `for_s` 0)
FAULTS: dict[str, bool] = {
    "kill": True,            # SIGKILL, restart after for_s
    "pause": True,           # SIGSTOP, SIGCONT after for_s
    "partition": True,       # isolate the target from the rest (ctl hook on every node)
    "crash_channel": False,  # make a channel actor crash (ctl hook)
    "disk_slow": True,       # delay every WAL fsync by params.delay_ms (ctl hook)
    "mem_alarm": True,       # memory high watermark to 0, then back (ctl hook)
}
TARGET_KINDS = ("leader", "follower", "node", "random", "all", "consumer-channel")
STATUSES = ("pass", "fail", "unknown", "skipped")
#: client roles, and the drain group each belongs to (publishing roles drain first)
ROLES = {"publisher": "publish", "rpc_client": "publish", "consumer": "consume",
         "rpc_server": "consume"}
WORKLOADS = ("total_queue", "sac_fifo", "dlx", "perf")


@dataclass(frozen=True)
class QueueSpec:
    """A queue declared before the workload starts (through AMQP, on the first node)."""

    name: str
    queue_type: str = "quorum"
    sac: bool = False
    delivery_limit: int | None = None
    dlx_target: str | None = None
    dlx_strategy: str | None = None  # at-most-once | at-least-once
    overflow: str | None = None  # drop-head | reject-publish
    max_length: int | None = None
    message_ttl_ms: int | None = None

    def arguments(self) -> dict[str, Any]:
        """The `queue.declare` arguments of this queue."""
        args: dict[str, Any] = {}
        if self.queue_type != "classic":
            args["x-queue-type"] = self.queue_type
        if self.sac:
            args["x-single-active-consumer"] = True
        if self.delivery_limit is not None:
            args["x-delivery-limit"] = self.delivery_limit
        if self.dlx_target is not None:
            args["x-dead-letter-exchange"] = ""
            args["x-dead-letter-routing-key"] = self.dlx_target
        if self.dlx_strategy is not None:
            args["x-dead-letter-strategy"] = self.dlx_strategy
        if self.overflow is not None:
            args["x-overflow"] = self.overflow
        if self.max_length is not None:
            args["x-max-length"] = self.max_length
        if self.message_ttl_ms is not None:
            args["x-message-ttl"] = self.message_ttl_ms
        return args

    def meta(self, prefetch: int | None) -> dict[str, Any]:
        """This queue's entry of `run_meta.queues_json` (what the checks key on)."""
        return {"type": self.queue_type, "sac": self.sac, "prefetch": prefetch,
                "delivery_limit": self.delivery_limit, "dlx_target": self.dlx_target,
                "dlx_strategy": self.dlx_strategy, "overflow": self.overflow,
                "max_length": self.max_length, "ttl": self.message_ttl_ms}


@dataclass(frozen=True)
class ClientSpec:
    """`count` identical workload client processes of one role on one queue."""

    #: publisher | consumer | rpc_client (requests with an exclusive reply queue per
    #: connection) | rpc_server (consumes the requests, replies on their reply_to)
    role: str
    queue: str
    count: int = 1
    #: publisher: messages per second per process (0: as fast as `max_in_flight` allows)
    rate: float = 50.0
    max_in_flight: int = 200
    #: publisher: stop after this many messages (0: until drain)
    messages: int = 0
    body_size: int = 64
    #: publisher: every n-th message is marked poison (header `x-warren-poison`)
    poison_every: int = 0
    #: publisher: no confirm for this long -> the connection is given up, publishes unknown
    confirm_timeout_s: float = 10.0
    #: consumer
    prefetch: int = 10
    ack_delay_s: float = 0.0
    reject_poison: bool = True
    #: consumer: reject a poison message with requeue this many times, then ack it
    #: (0: reject it every time, leaving it to the queue's delivery limit)
    poison_requeues: int = 0
    #: AMQP heartbeat (seconds): how fast a client notices a stopped or cut-off node
    heartbeat_s: int = 5


@dataclass(frozen=True)
class FaultSpec:
    """One fault window: starts `at_s` after the workload starts, lasts `for_s`."""

    fault: str
    at_s: float
    for_s: float
    target: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def target_kind(self) -> str:
        return self.target.split(":", 1)[0]

    @property
    def target_arg(self) -> str | None:
        _kind, sep, arg = self.target.partition(":")
        return arg if sep else None


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    queues: tuple[QueueSpec, ...]
    clients: tuple[ClientSpec, ...]
    faults: tuple[FaultSpec, ...] = ()
    nodes: int = 3
    duration_s: float = 30.0
    #: after the last fault healed, before the drain
    settle_s: float = 3.0
    drain_timeout_s: float = 60.0
    workload: str = "total_queue"
    #: check name -> expected status; checks not named may be anything but `fail`
    expect: dict[str, str] = field(default_factory=dict)
    #: channel.connection.config.Config overrides for every node
    amqp: dict[str, Any] = field(default_factory=dict)
    net_ticktime: float = 2.0
    #: K: the nodes record a state digest with every K-th applied index (the replica
    #: state agreement is checked at those); 1 checks every index, and a long or fast
    #: run can take 100, as the digest reads the whole queue state
    state_digest_every: int = 1

    def queue(self, name: str) -> QueueSpec:
        for q in self.queues:
            if q.name == name:
                return q
        raise KeyError(name)

    def queues_meta(self) -> dict[str, dict[str, Any]]:
        """`run_meta.queues_json`: each queue with the prefetch its consumers use."""
        out = {}
        for q in self.queues:
            prefetch = [c.prefetch for c in self.clients if c.role == "consumer"
                        and c.queue == q.name]
            out[q.name] = q.meta(max(prefetch) if prefetch else None)
        return out

    def scaled(self, duration_s: float | None = None, nodes: int | None = None) -> Scenario:
        """The same scenario over another duration (fault times scale with it)."""
        s = self
        if duration_s is not None and duration_s != self.duration_s:
            k = duration_s / self.duration_s
            faults = tuple(dataclasses.replace(f, at_s=f.at_s * k, for_s=f.for_s * k)
                           for f in self.faults)
            s = dataclasses.replace(s, duration_s=duration_s, faults=faults)
        if nodes is not None:
            s = dataclasses.replace(s, nodes=nodes)
        return s

    def validate(self) -> list[str]:
        """Every inconsistency, as readable sentences; empty when the scenario is sound."""
        errors: list[str] = []
        names = [q.name for q in self.queues]
        if len(set(names)) != len(names):
            errors.append("queue names repeat")
        if self.nodes < 1:
            errors.append("a cluster needs at least one node")
        if self.duration_s <= 0:
            errors.append("duration must be positive")

        if not valid_digest_every(self.state_digest_every):
            errors.append("state_digest_every must be at least 1")
        if self.workload not in WORKLOADS:
            errors.append(f"unknown workload {self.workload!r}")
        for q in self.queues:
            if q.dlx_target is not None and q.dlx_target not in names:
                errors.append(f"{q.name}: dead-letter target {q.dlx_target!r} is not declared")
            if q.dlx_strategy == "at-least-once" and q.overflow != "reject-publish":
                errors.append(f"{q.name}: at-least-once dead lettering needs "
                              "overflow reject-publish")
        for c in self.clients:
            if c.role not in ROLES:
                errors.append(f"unknown client role {c.role!r}")
            if c.queue not in names:
                errors.append(f"{c.role} on undeclared queue {c.queue!r}")
            if c.count < 1 or c.prefetch < 0 or c.rate < 0:
                errors.append(f"{c.role} on {c.queue}: count, prefetch and rate must be >= 0")
        if not any(ROLES.get(c.role) == "consume" for c in self.clients):
            errors.append("no consumer: nothing drains the queues")
        for f in self.faults:
            errors.extend(self._fault_errors(f, names))
        for check, status in self.expect.items():
            if status not in STATUSES:
                errors.append(f"expectation {check}: unknown status {status!r}")
        return errors

    def _fault_errors(self, f: FaultSpec, queues: list[str]) -> list[str]:
        errors = []
        if f.fault not in FAULTS:
            return [f"unknown fault {f.fault!r}"]
        if f.target_kind not in TARGET_KINDS:
            errors.append(f"{f.fault}: unknown target {f.target!r}")
        if f.target_kind in ("leader", "follower") and f.target_arg not in queues:
            errors.append(f"{f.fault}: target queue {f.target_arg!r} is not declared")
        elif f.target_kind in ("leader", "follower") and \
                self.queue(str(f.target_arg)).queue_type != "quorum":
            errors.append(f"{f.fault}: {f.target_kind}:{f.target_arg} needs a quorum queue "
                          "(a classic queue lives on the node that declared it: node:n1)")
        if f.target_kind == "node":
            known = {f"n{i + 1}" for i in range(self.nodes)}
            if f.target_arg not in known:
                errors.append(f"{f.fault}: no node {f.target_arg!r} in a "
                              f"{self.nodes}-node cluster")
        if f.target_kind == "follower" and self.nodes < 2:
            errors.append(f"{f.fault}: a follower needs two nodes or more")
        if (f.target_kind == "consumer-channel") != (f.fault == "crash_channel"):
            errors.append(f"{f.fault}: target consumer-channel goes with crash_channel only")
        if f.at_s < 0 or f.for_s < 0:
            errors.append(f"{f.fault}: negative time")
        if FAULTS[f.fault] and f.for_s == 0:
            errors.append(f"{f.fault}: needs a duration")
        if f.at_s + f.for_s > self.duration_s:
            errors.append(f"{f.fault} at {f.at_s} s for {f.for_s} s ends after the "
                          f"workload ({self.duration_s} s)")
        if f.fault == "partition" and self.nodes < 3:
            errors.append("partition: needs three nodes or more to leave a majority")
        return errors


def _every(fault: str, target: str, start_s: float, period_s: float, for_s: float,
           until_s: float, **params: Any) -> tuple[FaultSpec, ...]:
    """The same fault again and again: a window every `period_s` from `start_s`."""
    out = []
    t = start_s
    while t + for_s <= until_s:
        out.append(FaultSpec(fault, t, for_s, target, dict(params)))
        t += period_s
    return tuple(out)


_Q = QueueSpec("q1")
_SAFE = {"total_queue": "pass", "ordering_channel_fifo": "pass",
         "replica_determinism": "pass"}

SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario(
        "leader-failover",
        "SIGKILL the node of q1's leader every 8 s, restart it 3 s later; "
        "two publishers, two competing consumers.",
        queues=(_Q,),
        clients=(ClientSpec("publisher", "q1", count=2, rate=40),
                 ClientSpec("consumer", "q1", count=2, prefetch=10)),
        faults=_every("kill", "leader:q1", 4, 8, 3, 28),
        duration_s=30, expect=dict(_SAFE),
    ),
    Scenario(
        "consumer-crash",
        "Crash a consuming channel actor every 4 s: its unacked deliveries return "
        "to the queue and are redelivered.",
        queues=(_Q,),
        clients=(ClientSpec("publisher", "q1", rate=50),
                 ClientSpec("consumer", "q1", count=2, prefetch=20, ack_delay_s=0.02)),
        faults=_every("crash_channel", "consumer-channel", 3, 4, 0, 20),
        duration_s=20, expect=dict(_SAFE),
    ),
    Scenario(
        "partition-minority",
        "Cut one follower of q1 off the cluster for 6 s, twice; the majority keeps "
        "confirming.",
        queues=(_Q,),
        clients=(ClientSpec("publisher", "q1", count=2, rate=40),
                 ClientSpec("consumer", "q1", count=2)),
        faults=(FaultSpec("partition", 4, 6, "follower:q1"),
                FaultSpec("partition", 16, 6, "follower:q1")),
        duration_s=26, expect=dict(_SAFE),
    ),
    Scenario(
        "partition-leader",
        "Cut q1's leader off for 8 s: a new leader is elected on the majority side, "
        "the old one steps down, clients on it reconnect.",
        queues=(_Q,),
        clients=(ClientSpec("publisher", "q1", count=3, rate=30),
                 ClientSpec("consumer", "q1", count=2)),
        faults=(FaultSpec("partition", 5, 8, "leader:q1"),),
        duration_s=20, expect=dict(_SAFE),
    ),
    Scenario(
        "flow-overload",
        "Publishers as fast as credit allows while the disk is slow (the channel's "
        "quorum_commands_soft_limit engages), then a memory alarm blocks publishers.",
        queues=(_Q,),
        clients=(ClientSpec("publisher", "q1", count=3, rate=0, max_in_flight=500,
                            body_size=1024, confirm_timeout_s=20),
                 ClientSpec("consumer", "q1", count=2, prefetch=50)),
        faults=(FaultSpec("disk_slow", 3, 6, "all", {"delay_ms": 50}),
                FaultSpec("mem_alarm", 12, 5, "all", {"watermark": 0.0, "restore": 0.4})),
        duration_s=20, expect={**_SAFE, "flow_not_stuck": "pass"},
        # Overload must not turn into a partition: with 2 s ticks a node whose hub is
        # starved by the load declares its peers down, and machine v7 then returns the
        # checked-out messages of their consumers (their later acks are lost, as in
        # RabbitMQ), which is a different scenario.
        net_ticktime=20.0,
    ),
    Scenario(
        "poison-message",
        "Every 10th message is poison: consumers reject it with requeue until the "
        "delivery limit dead-letters it (at-least-once) into q1.dlx; the leader is "
        "killed once meanwhile.",
        queues=(QueueSpec("q1", delivery_limit=2, dlx_target="q1.dlx",
                          dlx_strategy="at-least-once", overflow="reject-publish"),
                QueueSpec("q1.dlx")),
        clients=(ClientSpec("publisher", "q1", rate=40, poison_every=10),
                 ClientSpec("consumer", "q1", count=2),
                 ClientSpec("consumer", "q1.dlx")),
        faults=(FaultSpec("kill", 8, 3, "leader:q1"),),
        duration_s=20, workload="dlx",
        expect={**_SAFE, "dlx_at_least_once": "pass"},
    ),
    Scenario(
        "poison-requeue",
        "Every 10th message is poison, on a queue declared without a delivery limit: "
        "the one consumer rejects it with requeue 25 times, then acks it. Which "
        "release the nodes model decides what happens meanwhile (a default delivery "
        "limit may remove it first, a requeue may or may not count); compare runs "
        "under each with `warren scenario compare`.",
        queues=(QueueSpec("q1"),),
        clients=(ClientSpec("publisher", "q1", rate=40, poison_every=10),
                 ClientSpec("consumer", "q1", prefetch=10, poison_requeues=25)),
        duration_s=15, expect=dict(_SAFE),
    ),
    Scenario(
        "classic-rpc",
        "RPC over classic queues: clients publish persistent requests with confirms to "
        "a durable classic work queue, each connection with an exclusive server-named "
        "reply queue; servers, slower than the clients, reply and ack, so requests wait "
        "in the queue. n1, the work queue's home (queues are declared there), is "
        "SIGKILLed for 4 s; its clients reconnect to other nodes.",
        queues=(QueueSpec("work", queue_type="classic"),),
        clients=(ClientSpec("rpc_client", "work", count=2, rate=25),
                 ClientSpec("rpc_server", "work", count=2, prefetch=2, ack_delay_s=0.1)),
        faults=(FaultSpec("kill", 6, 4, "node:n1"),),
        duration_s=20, expect={"total_queue": "pass", "ordering_channel_fifo": "pass"},
    ),
    Scenario(
        "sac-fifo",
        "A single-active-consumer queue consumed with prefetch 1 by three consumers: "
        "strict FIFO across consumer switch-overs caused by killing the leader and "
        "crashing the active consumer's channel.",
        queues=(QueueSpec("q1", sac=True),),
        clients=(ClientSpec("publisher", "q1", rate=30),
                 ClientSpec("consumer", "q1", count=3, prefetch=1)),
        faults=(FaultSpec("crash_channel", 5, 0, "consumer-channel"),
                FaultSpec("kill", 10, 3, "leader:q1"),
                FaultSpec("crash_channel", 17, 0, "consumer-channel")),
        duration_s=22, workload="sac_fifo",
        expect={**_SAFE, "ordering_sac_fifo": "pass"},
    ),
)}
