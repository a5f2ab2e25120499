"""Shared pieces of the Ra process tests: a cluster of nodes on the in-memory
network (the fixtures are in conftest.py), test machines, and a pipelining client
that follows leader hints and resends what was not applied.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import actors
from actors import Node
from ra import api
from ra import system as ra_system
from ra.machine import Machine
from tests import waiting
from transports.faults import FaultRules
from transports.memory import MemoryNetwork
from transports.tick import TickConfig

TICK = TickConfig(net_ticktime=0.4, net_tickintensity=4)
#: short ticks so stale peers are re-sent to quickly
SERVER_CONFIG = {"tick_timeout": 100}


@dataclass
class Cluster:
    network: MemoryNetwork
    nodes: list[Node]
    ids: list[tuple[str, str]] = field(default_factory=list)

    def node_of(self, sid: tuple[str, str]) -> Node:
        return next(n for n in self.nodes if n.name == sid[1])


def make_cluster(n_nodes: int = 3) -> Cluster:
    network = MemoryNetwork(TICK, FaultRules(seed=1))
    nodes = [Node(f"ra{i}@127.0.0.1:{i}", transport=network.transport()).start()
             for i in range(1, n_nodes + 1)]
    for node in nodes:
        with node.attached():
            assert ra_system.start()[0] == "ok"
    return Cluster(network, nodes, [(f"s{i}", nodes[i - 1].name) for i in range(1, 4)])


def wait_until(pred: Callable[[], Any], timeout_s: float = 10.0, what: str = "condition",
               poll_ms: int = 20) -> Any:
    """Poll `pred` from a process (sleeping lets the other processes run)."""
    return waiting.wait_until(pred, what, timeout_s, poll_s=poll_ms / 1000,
                              sleep=lambda s: actors.sleep(round(s * 1000)))


def leader_of(ids: list[tuple[str, str]]) -> tuple[str, str]:
    result = api.members(ids, 2000)
    assert result[0] == "ok", result
    return result[2]


def overview(sid: tuple[str, str]) -> dict[str, Any]:
    result = api.member_overview(sid, 2000)
    assert isinstance(result, dict), result
    return result


class SeqMachine(Machine):
    """Appends ``("push", seq)`` values in order, ignoring resends of a seq
    already applied (as a queue dedupes a publisher's resends). Optionally
    releases its log every `snapshot_every` applied indexes.
    """

    def __init__(self, snapshot_every: int = 0) -> None:
        self.snapshot_every = snapshot_every

    def init(self, config: dict[str, Any]) -> Any:
        return (-1, ())

    def apply(self, meta: dict[str, Any], command: Any, state: Any) -> tuple[Any, ...]:
        last, applied = state
        match command:
            case ("push", seq) if seq > last:
                state = (seq, (*applied, seq))
                reply: Any = ("pushed", seq)
            case ("push", seq):
                reply = ("duplicate", seq)
            case ("send_local", pid, msg):
                return (state, "ok", [("send_msg", pid, msg, ["local"])])
            case _:
                reply = ("error", "unknown_command")
        idx = meta["index"]
        if self.snapshot_every and idx % self.snapshot_every == 0:
            return (state, reply, [("release_cursor", idx, state)])
        return (state, reply)


class FailoverClient:
    """What the test clients share: a client pipelines commands to the server it
    believes leads, and after a silence it tries the next server with everything
    still pending, as a publisher survives a leader failure without loss.

    A subclass keeps `pending` (the correlations not yet applied) and provides
    `handle` (one ``ra_event``) and `resend_all`.
    """

    servers: list[tuple[str, str]]
    target: tuple[str, str]
    pending: dict[int, bool] | set[int]
    #: default wait for `drain`, and the silence after which the next server is tried
    DRAIN_TIMEOUT_S = 20.0
    SILENCE_MS = 300

    def handle(self, msg: Any) -> None:
        raise NotImplementedError

    def resend_all(self) -> None:
        raise NotImplementedError

    def drain(self, timeout_s: float | None = None, silence_ms: int | None = None) -> None:
        """Receive until nothing is pending; on silence, try the next server."""
        timeout_s = self.DRAIN_TIMEOUT_S if timeout_s is None else timeout_s
        silence_ms = self.SILENCE_MS if silence_ms is None else silence_ms
        deadline = time.monotonic() + timeout_s
        while self.pending:
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(self.pending)} commands never applied")
            msg = actors.receive(silence_ms)
            if msg is actors.TIMEOUT:
                pos = self.servers.index(self.target) if self.target in self.servers else -1
                self.target = self.servers[(pos + 1) % len(self.servers)]
                self.resend_all()
                continue
            self.handle(msg)


class PipelineClient(FailoverClient):
    """Pipelines ``("push", seq)`` commands with correlation `seq`.

    It keeps every unapplied seq, follows ``not_leader`` hints, and after a
    silence resends everything pending to the next server it believes in,
    which is how a publisher survives a leader failure without loss.
    """

    def __init__(self, servers: list[tuple[str, str]], target: tuple[str, str]) -> None:
        self.servers = servers
        self.target = target
        self.pending: dict[int, bool] = {}
        self.applied: list[int] = []
        self.events = 0
        self.rejections: list[Any] = []

    def send(self, seq: int) -> None:
        self.pending[seq] = True
        api.pipeline_command(self.target, ("push", seq), seq)

    def resend_all(self) -> None:
        for seq in sorted(self.pending):
            api.pipeline_command(self.target, ("push", seq), seq)

    def handle(self, msg: Any) -> None:
        match msg:
            case ("ra_event", leader, ("applied", replies)):
                self.events += 1
                self.target = leader
                for corr, _reply in replies:
                    if self.pending.pop(corr, None):
                        self.applied.append(corr)
            case ("ra_event", _from, ("rejected", ("not_leader", hint, corr))):
                self.rejections.append((hint, corr))
                if hint is not None:
                    self.target = hint
                if corr in self.pending:
                    api.pipeline_command(self.target, ("push", corr), corr)
