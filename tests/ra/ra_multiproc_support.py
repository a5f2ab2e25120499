"""Shared pieces of the multi-process Ra tests: Ra nodes as real OS processes
on loopback, each with its own data dir, a test machine that records every
apply, and a pipelining client that keeps count of what it sent.

The test process is a fourth node (the client). Every node process is killed
in the fixture's ``finally``, so a failing test leaves nothing behind. Node
processes import this module by name (the repository root is on their path),
so its classes and functions travel by reference.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import actors
from actors import Node
from ra import api
from ra import system as ra_system
from ra.machine import Machine
from tests.ra.ra_proc_support import FailoverClient
from tests.ra.ra_proc_support import wait_until as proc_wait_until
from transports.tick import TickConfig
from transports.zmq import ZmqTransport
from transports.zmq_node import free_port, start_node_process, stop_node_process

COOKIE = "warren-ra-multiproc"
NET_TICKTIME = 1.0
SETUPTIME = 2.0
#: short ticks and elections so failover takes well under a second or two
SERVER_CONFIG: dict[str, Any] = {"tick_timeout": 100, "broadcast_time": 30,
                                 "log_init_args": {"min_snapshot_interval": 64}}
#: small WAL files (~80 commands each), so commands soon roll over into segments
SYSTEM_KEYS: dict[str, Any] = {"wal_max_size_bytes": 8_000, "segment_max_entries": 256}

ServerId = tuple[str, str]


class LedgerMachine(Machine):
    """Records every applied ``("put", seq)`` as ``(index, seq)``, in apply order.

    It does not deduplicate, so the state shows exactly what Ra applied: a log
    index applied twice or a command applied more often than it was sent is
    visible to the test. Every `snapshot_every` indexes it releases the log.
    ``("send_local", pid, msg)`` sends `msg` to `pid` from the replica local
    to it (the ``local`` rule).
    """

    def __init__(self, snapshot_every: int = 0) -> None:
        self.snapshot_every = snapshot_every

    def init(self, config: dict[str, Any]) -> Any:
        return ()

    def apply(self, meta: dict[str, Any], command: Any, state: Any) -> tuple[Any, ...]:
        idx = meta["index"]
        match command:
            case ("put", seq):
                state = (*state, (idx, seq))
                reply: Any = ("put", idx)
            case ("send_local", pid, msg):
                return (state, "ok", [("send_msg", pid, msg, ["local"])])
            case _:
                reply = ("error", "unknown_command")
        if self.snapshot_every and idx % self.snapshot_every == 0:
            return (state, reply, [("release_cursor", idx, state)])
        return (state, reply)


@dataclass
class RaNode:
    """One node process and the data dir it keeps across restarts."""

    name: str
    data_dir: str
    proc: subprocess.Popen[bytes] | None = None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@dataclass
class ProcCluster:
    """Ra node processes plus the client node this test process runs."""

    root: Path
    nodes: list[RaNode] = field(default_factory=list)
    client: Node | None = None
    #: environment variables added to every node process booted from now on
    env: dict[str, str] = field(default_factory=dict)

    def add_node(self) -> RaNode:
        i = len(self.nodes) + 1
        node = RaNode(f"r{i}@127.0.0.1:{free_port()}", str(self.root / f"r{i}"))
        self.nodes.append(node)
        self.boot(node)
        return node

    def boot(self, node: RaNode) -> None:
        """Start (or restart) the node process and its Ra system on its data dir."""
        if node.proc is not None:
            stop_node_process(node.proc)  # reaps the earlier life and removes its log
        node.proc, _ = start_node_process(node.name, cookie=COOKIE, net_ticktime=NET_TICKTIME,
                                          net_setuptime=SETUPTIME,
                                          env={**os.environ, **self.env})
        config = ra_system.disk_system_config(node.data_dir, **SYSTEM_KEYS)
        result = ra_system.rpc(node.name, _start_system, config, timeout=10_000)
        assert result == "ok", result

    def kill(self, node: RaNode) -> None:
        """SIGKILL: nothing of the node gets to run, its files stay as they are."""
        assert node.proc is not None
        os.kill(node.proc.pid, signal.SIGKILL)
        node.proc.wait(5)
        # the client's connection must be seen down before a new life may dial in
        wait_until(lambda: node.name not in actors.nodes(), what=f"{node.name} to be down")

    def node_of(self, sid: ServerId) -> RaNode:
        return next(n for n in self.nodes if n.name == sid[1])

    def close(self) -> None:
        for node in self.nodes:
            if node.proc is not None:
                stop_node_process(node.proc)
        if self.client is not None:
            self.client.stop()


def _start_system(config: dict[str, Any]) -> Any:
    result = ra_system.start(config)
    return "ok" if result[0] == "ok" else result


@contextmanager
def proc_cluster(root: Path, size: int = 3,
                 env: dict[str, str] | None = None) -> Iterator[ProcCluster]:
    """`size` Ra node processes (with `env` added to their environment); the body
    runs attached to the client node.

    Every node process is killed on the way out, whatever happened.
    """
    cluster = ProcCluster(root, env=dict(env or {}))
    try:
        transport = ZmqTransport(cookie=COOKIE, tick=TickConfig(NET_TICKTIME, 4),
                                 net_setuptime=SETUPTIME)
        cluster.client = Node(f"client@127.0.0.1:{free_port()}", transport=transport).start()
        with cluster.client.attached():
            for _ in range(size):
                cluster.add_node()
            yield cluster
    finally:
        cluster.close()


def server_ids(cluster: ProcCluster) -> list[ServerId]:
    return [(f"s{i}", node.name) for i, node in enumerate(cluster.nodes, start=1)]


def start_cluster(ids: list[ServerId], machine: Machine) -> None:
    result = api.start_cluster("default", "ledger", machine, ids, 10_000,
                               server_config=SERVER_CONFIG)
    assert result[0] == "ok" and result[2] == [], result


def wait_until(pred: Callable[[], Any], timeout_s: float = 20.0, what: str = "condition") -> Any:
    """As in-process, with more time and a slower poll: the members are OS processes."""
    return proc_wait_until(pred, timeout_s, what, poll_ms=50)


def leader_of(ids: list[ServerId]) -> ServerId:
    result = wait_until(lambda: _members(ids), what="a leader")
    return result[2]


def _members(ids: list[ServerId]) -> Any:
    result = api.members(ids, 1000)
    return result if result[0] == "ok" else None


def overview(sid: ServerId) -> dict[str, Any]:
    result = api.member_overview(sid, 5000)
    assert isinstance(result, dict), result
    return result


def ledger(sid: ServerId) -> tuple[int, tuple[tuple[int, int], ...]]:
    """``(last_applied, state)`` of one member."""
    result = api.local_query(sid, whole_state, 5000)
    assert result[0] == "ok", result
    return result[1][0][0], result[1][1]


def whole_state(state: Any) -> Any:
    """A query function (module-level: query functions travel by reference)."""
    return state


def caught_up(sids: list[ServerId]) -> bool:
    """Every member applied the same last index."""
    applied = {overview(sid)["last_applied"] for sid in sids}
    return len(applied) == 1


class Publisher(FailoverClient):
    """Pipelines ``("put", seq)`` with correlation `seq` and counts every send.

    It follows ``not_leader`` hints; after a silence it resends what is still
    unconfirmed to the next server, as a publisher does through a failover.
    `sends[seq]` says how often `seq` went out, which bounds how often a
    correct Ra may apply it.
    """

    #: the members are OS processes: more time, and a longer silence before a resend
    DRAIN_TIMEOUT_S = 30.0
    SILENCE_MS = 600

    def __init__(self, servers: list[ServerId], target: ServerId) -> None:
        self.servers = list(servers)
        self.target = target
        self.pending: set[int] = set()
        self.applied: dict[int, Any] = {}
        self.sends: dict[int, int] = {}

    def send(self, seq: int) -> None:
        self.pending.add(seq)
        self.sends[seq] = self.sends.get(seq, 0) + 1
        api.pipeline_command(self.target, ("put", seq), seq)

    def handle(self, msg: Any) -> None:
        match msg:
            case ("ra_event", leader, ("applied", replies)):
                self.target = leader
                for corr, reply in replies:
                    self.pending.discard(corr)
                    self.applied.setdefault(corr, reply)
            case ("ra_event", _from, ("rejected", ("not_leader", hint, corr))):
                if hint is not None:
                    self.target = hint
                if corr in self.pending:
                    self.send(corr)

    def receive_some(self, timeout_ms: int = 5000) -> None:
        msg = actors.receive(timeout_ms)
        if msg is not actors.TIMEOUT:
            self.handle(msg)

    def resend_all(self) -> None:
        for seq in sorted(self.pending):
            self.send(seq)


def check_ledger(state: tuple[tuple[int, int], ...], pub: Publisher) -> None:
    """What a correct Ra leaves in a member's state, given what was sent and confirmed."""
    indexes = [idx for idx, _ in state]
    assert indexes == sorted(set(indexes)), "a log index was applied twice"
    counts: dict[int, int] = {}
    for _, seq in state:
        counts[seq] = counts.get(seq, 0) + 1
    missing = [seq for seq in pub.applied if seq not in counts]
    assert missing == [], f"confirmed but not in the state: {missing[:10]}"
    too_often = [seq for seq, n in counts.items() if n > pub.sends.get(seq, 0)]
    assert too_often == [], f"applied more often than sent: {too_often[:10]}"
