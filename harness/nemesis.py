"""The nemesis: injects the faults of a scenario's schedule and records every window.

Process faults act on node processes through `harness.cluster` (SIGKILL and a later
restart, SIGSTOP and SIGCONT). Network, disk, memory and actor faults go through
operator test hooks of the nodes (`warren ctl`): a partition is applied by every
node to its own outgoing frames (the fault-injecting transport), so every node is
told. Each fault is recorded in `nemesis_events` as a `start` row when it is in
effect and a `stop` row when it is healed, both with the fault, its target nodes and
its parameters; the analysis shades these windows and measures recovery from them.
A target (`leader:q1`, `follower:q1`, ...) is resolved when the fault starts.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.cluster import Cluster, CtlError, NodeSpec
from harness.scenarios import FaultSpec

__all__ = ["ActiveFault", "FaultError", "Nemesis"]

log = logging.getLogger("warren.harness")

Sink = Callable[[str, dict[str, Any]], None]
EMITTER = "nemesis"


class FaultError(RuntimeError):
    """A fault could not be injected (no such target, hook refused or missing)."""


@dataclass
class ActiveFault:
    spec: FaultSpec
    targets: list[NodeSpec]
    params: dict[str, Any]
    undo: Callable[[], None]
    started: float = field(default_factory=time.monotonic)


class Nemesis:
    """Starts and stops faults on `cluster`, writing their windows through `sink`."""

    def __init__(self, cluster: Cluster, sink: Sink, seed: int = 0,
                 restart_timeout_s: float = 60.0) -> None:
        self.cluster = cluster
        self.sink = sink
        self.rng = random.Random(seed)
        self.restart_timeout_s = restart_timeout_s
        self.active: list[ActiveFault] = []
        self.errors: list[str] = []

    # ------------------------------------------------------------ targets

    def resolve(self, spec: FaultSpec) -> list[NodeSpec]:
        """The nodes a fault acts on, decided now (leaders move)."""
        c = self.cluster
        kind, arg = spec.target_kind, spec.target_arg
        live = c.live()
        if kind == "all":
            return list(c.nodes)
        if kind == "node":
            return [c.node(str(arg))]
        if kind in ("random", "consumer-channel"):
            if not live:
                raise FaultError("no live node")
            return [self.rng.choice(live)]
        leader = c.leader_of(str(arg))
        if leader is None:
            raise FaultError(f"queue {arg} has no leader now")
        if kind == "leader":
            return [leader]
        if kind == "follower":
            others = [n for n in live if n is not leader]
            if not others:
                raise FaultError(f"queue {arg} has no live follower")
            return [self.rng.choice(others)]
        raise FaultError(f"unknown target {spec.target!r}")

    # ------------------------------------------------------------- faults

    def start(self, spec: FaultSpec) -> ActiveFault:
        """Inject one fault and record its `start`; FaultError when it cannot be."""
        try:
            targets = self.resolve(spec)
        except (CtlError, KeyError, FaultError) as exc:
            raise FaultError(f"{spec.fault} on {spec.target}: {exc}") from exc
        return self.inject(spec, targets)

    def inject(self, spec: FaultSpec, targets: list[NodeSpec]) -> ActiveFault:
        """`start` on targets the caller already chose (the pytest plugin's helpers
        name their nodes; `spec.target` is then only what gets reported)."""
        try:
            inject = getattr(self, f"_start_{spec.fault}")
            params, undo = inject(targets, dict(spec.params))
        except (CtlError, KeyError, FaultError) as exc:
            raise FaultError(f"{spec.fault} on {spec.target}: {exc}") from exc
        active = ActiveFault(spec, targets, params, undo)
        self._record("start", active)
        self.active.append(active)
        return active

    def stop(self, active: ActiveFault, undo: bool = True) -> None:
        """Heal one fault and record its `stop` (also when healing went wrong).

        `undo=False` only closes the recorded window: a test that leaves a killed
        node dead ends its fault when the test ends, without paying for a restart.
        """
        if active in self.active:
            self.active.remove(active)
        try:
            if undo:
                active.undo()
        except (CtlError, OSError) as exc:
            self.errors.append(f"healing {active.spec.fault}: {exc}")
            log.warning("healing %s failed: %s", active.spec.fault, exc)
        self._record("stop", active)

    def heal_all(self) -> None:
        """Stop every open fault, newest first."""
        for active in reversed(list(self.active)):
            self.stop(active)

    def _record(self, kind: str, active: ActiveFault) -> None:
        self.sink(kind, {"fault": active.spec.fault, "emitter": EMITTER,
                         "targets": [n.name for n in active.targets],
                         "params": json.dumps(active.params, sort_keys=True)})

    # one method per fault: inject now, return (recorded params, undo)

    def _start_kill(self, targets: list[NodeSpec], params: dict[str, Any]) -> Any:
        for n in targets:
            self.cluster.kill_node(n)

        def undo() -> None:
            for n in targets:
                self.cluster.start_node(n, wait=True, timeout_s=self.restart_timeout_s)
        return params, undo

    def _start_pause(self, targets: list[NodeSpec], params: dict[str, Any]) -> Any:
        for n in targets:
            self.cluster.pause_node(n)

        def undo() -> None:
            for n in targets:
                self.cluster.resume_node(n)
        return params, undo

    def _start_partition(self, targets: list[NodeSpec], params: dict[str, Any]) -> Any:
        c = self.cluster
        isolated = [n.name for n in targets]
        rest = [n.name for n in c.nodes if n.name not in isolated]
        groups = [",".join(isolated), ",".join(rest)]
        told = []
        try:
            for n in c.live():
                c.ctl(n.name, "partition", *groups)
                told.append(n)
        except CtlError:
            for n in told:
                c.ctl(n.name, "heal")
            raise

        def undo() -> None:
            failed = []
            for n in c.live():
                try:
                    c.ctl(n.name, "heal")
                except CtlError as exc:
                    failed.append(f"{n.name}: {exc}")
            if failed:
                raise CtlError(70, "; ".join(failed))
        return {**params, "groups": [isolated, rest]}, undo

    def _start_crash_channel(self, targets: list[NodeSpec], params: dict[str, Any]) -> Any:
        c = self.cluster
        candidates = [targets[0], *[n for n in c.live() if n is not targets[0]]]
        for n in candidates:
            rows = c.ctl(n.name, "list_channels") or []
            consuming = [r for r in rows if r.get("consumers")]
            if consuming:
                row = self.rng.choice(consuming)
                c.ctl(n.name, "crash_channel", row["pid"])
                targets[:] = [n]
                return {**params, "channel": row["pid"]}, lambda: None
        raise FaultError("no channel with a consumer on any live node")

    def _start_disk_slow(self, targets: list[NodeSpec], params: dict[str, Any]) -> Any:
        delay = str(int(params.get("delay_ms", 50)))
        for n in targets:
            self.cluster.ctl(n.name, "set_disk_delay", delay)

        def undo() -> None:
            for n in targets:
                if n.running:
                    self.cluster.ctl(n.name, "set_disk_delay", "0")
        return params, undo

    def _start_mem_alarm(self, targets: list[NodeSpec], params: dict[str, Any]) -> Any:
        on, off = str(params.get("watermark", 0.0)), str(params.get("restore", 0.4))
        for n in targets:
            self.cluster.ctl(n.name, "set_vm_memory_high_watermark", on)

        def undo() -> None:
            for n in targets:
                if n.running:
                    self.cluster.ctl(n.name, "set_vm_memory_high_watermark", off)
        return params, undo

    # ----------------------------------------------------------- schedule

    def run(self, schedule: list[FaultSpec], t0: float,
            stopped: Callable[[], bool] = lambda: False,
            tick: Callable[[], None] = lambda: None) -> None:
        """Play `schedule` (times relative to the monotonic `t0`); heal what remains open.

        `tick` is called about ten times a second (the runner's progress bar);
        `stopped` ends the schedule early.
        """
        starts = sorted(schedule, key=lambda f: f.at_s)
        ends: list[tuple[float, ActiveFault]] = []
        try:
            while (starts or ends) and not stopped():
                now = time.monotonic() - t0
                for end_at, active in [e for e in ends if e[0] <= now]:
                    ends.remove((end_at, active))
                    self.stop(active)
                while starts and starts[0].at_s <= now:
                    spec = starts.pop(0)
                    try:
                        active = self.start(spec)
                    except FaultError as exc:
                        self.errors.append(str(exc))
                        log.warning("fault not injected: %s", exc)
                        continue
                    ends.append((spec.at_s + spec.for_s, active))
                tick()
                time.sleep(0.1)
        finally:
            self.heal_all()
