"""A local cluster of warren node processes: the harness's only knowledge of the node.

Everything the harness needs to know about `warren node start` and `warren ctl` is
here, so a change in the broker's command line is absorbed in one place: how a node
is configured (one JSON config file per node, the keys of `broker.config.NodeConfig`),
how it says it is ready (`<data_dir>/ready`, a JSON object written once the node has
joined the cluster), how it is stopped (SIGTERM), and how operator commands reach it
(`warren ctl --formatter json`). Nodes share a cookie through `WARREN_COOKIE`.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import procs
from transports.zmq_node import free_port

__all__ = ["Cluster", "Ctl", "CtlError", "NodeSpec", "NodeStartError", "free_port"]

HOST = "127.0.0.1"
COOKIE_ENV = "WARREN_COOKIE"




class NodeStartError(RuntimeError):
    """A node exited or did not become ready in time."""


class CtlError(RuntimeError):
    """`warren ctl` refused or failed; `code` is its exit status (rabbitmqctl's)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"ctl exit {code}: {message.strip()}")
        self.code = code


@dataclass
class NodeSpec:
    """One node: its short name (`n1`), distribution and AMQP ports, files."""

    short: str
    dist_port: int
    amqp_port: int
    data_dir: Path
    log: Path
    config_file: Path
    proc: subprocess.Popen[bytes] | None = None
    ready: dict[str, Any] = field(default_factory=dict)
    paused: bool = False

    @property
    def name(self) -> str:
        return f"{self.short}@{HOST}:{self.dist_port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def _tail(path: Path, size: int = 20000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, path.stat().st_size - size))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


NodeArgv = Callable[[NodeSpec], list[str]]


def warren_node_argv(node: NodeSpec) -> list[str]:
    """`warren node start --config FILE` with this interpreter (no PATH lookup)."""
    return [sys.executable, "-m", "warren_cli", "node", "start", "--config",
            str(node.config_file)]


class Ctl:
    """`warren ctl --node N --formatter json ...` as a function returning parsed JSON."""

    def __init__(self, env: dict[str, str], timeout_s: float = 15.0,
                 argv: Sequence[str] = (sys.executable, "-m", "warren_cli", "ctl")) -> None:
        self.env = env
        self.timeout_s = timeout_s
        self.argv = list(argv)

    def __call__(self, node: str, *args: str, timeout_s: float | None = None) -> Any:
        t = timeout_s or self.timeout_s
        cmd = [*self.argv, "--node", node, "--formatter", "json", "--timeout", str(t), *args]
        try:
            done = subprocess.run(cmd, capture_output=True, env=self.env, timeout=t + 15,
                                  check=False)
        except subprocess.TimeoutExpired:
            raise CtlError(69, f"{' '.join(args)} on {node}: no answer")
        if done.returncode != 0:
            raise CtlError(done.returncode, done.stderr.decode(errors="replace"))
        text = done.stdout.decode().strip()
        return json.loads(text) if text else None


class Cluster:
    """N node processes on loopback under `root`; `close()` ends every one of them."""

    def __init__(self, root: Path, size: int = 3, *, backend: str = "rabbit",
                 net_ticktime: float = 2.0, run_id: str = "run",
                 history_dir: Path | None = None, amqp: dict[str, Any] | None = None,
                 extra_config: dict[str, Any] | None = None,
                 node_argv: NodeArgv = warren_node_argv, cookie: str | None = None,
                 ctl: Callable[..., Any] | None = None) -> None:
        self.root = Path(root)
        self.node_argv = node_argv
        self.cookie = cookie or secrets.token_hex(16)
        self.env = {**os.environ, COOKIE_ENV: self.cookie}
        self.ctl = ctl or Ctl(self.env)
        self.size = size
        self.settings: dict[str, Any] = {
            "net_ticktime": net_ticktime, "backend": backend, "run_id": run_id,
            "amqp": dict(amqp or {}),
            # several nodes on one host: none serves RabbitMQ's fixed HTTP ports
            # unless the caller's extra_config gives them ports (0: free ones)
            "management_port": None, "prometheus_port": None, **(extra_config or {})}
        if history_dir is not None:
            self.settings["history_dir"] = str(history_dir)
        self.nodes: list[NodeSpec] = []
        self._assign_ports()

    def _assign_ports(self) -> None:
        """Fresh ports for every node and the config files that name them."""
        self.nodes = [self._spec(f"n{i + 1}") for i in range(self.size)]
        peers = [n.name for n in self.nodes]
        for n in self.nodes:
            config = {"name": n.name, "amqp_port": n.amqp_port, "amqp_host": HOST,
                      "data_dir": str(n.data_dir), "peers": peers, **self.settings}
            n.config_file.parent.mkdir(parents=True, exist_ok=True)
            n.config_file.write_text(json.dumps(config, indent=1))

    def _spec(self, short: str) -> NodeSpec:
        d = self.root / "nodes" / short
        return NodeSpec(short, free_port(), free_port(), d / "data", d / "node.log",
                        d / "node.json")

    # -------------------------------------------------------------- lookups

    def node(self, key: str) -> NodeSpec:
        """A node by short name (`n2`) or full name (`n2@127.0.0.1:PORT`)."""
        for n in self.nodes:
            if key in (n.short, n.name):
                return n
        raise KeyError(f"no node {key!r} in this cluster")

    @property
    def names(self) -> list[str]:
        return [n.name for n in self.nodes]

    def amqp_endpoints(self) -> list[tuple[str, int]]:
        return [(HOST, n.amqp_port) for n in self.nodes]

    def live(self) -> list[NodeSpec]:
        """Nodes whose process runs and is not stopped by SIGSTOP."""
        return [n for n in self.nodes if n.running and not n.paused]

    # ------------------------------------------------------------ lifecycle

    def start(self, timeout_s: float = 60.0, attempts: int = 3) -> None:
        """Start every node, then wait until each has written its ready file.

        A port taken between choosing and binding it makes a node exit; the whole
        cluster is then started again on fresh ports (names include ports).
        """
        for attempt in range(attempts):
            for n in self.nodes:
                self.start_node(n, wait=False)
            try:
                for n in self.nodes:
                    self.wait_ready(n, timeout_s)
                return
            except NodeStartError:
                clash = any("Address already in use" in _tail(n.log) for n in self.nodes)
                if not clash or attempt == attempts - 1:
                    raise
                self.close()
                self._assign_ports()

    def start_node(self, node: NodeSpec, wait: bool = True, timeout_s: float = 60.0) -> None:
        if node.running:
            raise NodeStartError(f"{node.name} is already running")
        node.data_dir.mkdir(parents=True, exist_ok=True)
        (node.data_dir / "ready").unlink(missing_ok=True)
        node.ready = {}
        node.paused = False
        node.proc = procs.spawn(self.node_argv(node), node.log, self.env)
        if wait:
            self.wait_ready(node, timeout_s)

    def wait_ready(self, node: NodeSpec, timeout_s: float = 60.0) -> dict[str, Any]:
        """Block until `<data_dir>/ready` exists; raise if the process exits first."""
        ready = node.data_dir / "ready"
        deadline = time.monotonic() + timeout_s
        while not ready.exists():
            if node.proc is None or node.proc.poll() is not None:
                code = None if node.proc is None else node.proc.returncode
                raise NodeStartError(f"{node.name} exited ({code}) before it was ready; "
                                     f"see {node.log}")
            if time.monotonic() > deadline:
                raise NodeStartError(f"{node.name} not ready after {timeout_s} s; "
                                     f"see {node.log}")
            time.sleep(0.05)
        node.ready = json.loads(ready.read_text())
        return node.ready

    def stop_node(self, node: NodeSpec, grace_s: float = 10.0,
                  signalled: bool = False) -> int | None:
        """SIGTERM (after SIGCONT; not again if `signalled`), then SIGKILL after `grace_s`."""
        if node.proc is None:
            return None
        node.paused = False
        return procs.stop_group(node.proc, grace_s, signalled)

    def kill_node(self, node: NodeSpec) -> None:
        """SIGKILL: the node's unflushed history and in-memory state are lost."""
        if node.proc is not None:
            procs.kill_group(node.proc)
        node.paused = False

    def pause_node(self, node: NodeSpec) -> None:
        """SIGSTOP: the process keeps its sockets but answers nothing."""
        if node.proc is not None and procs.signal_group(node.proc, signal.SIGSTOP):
            node.paused = True

    def resume_node(self, node: NodeSpec) -> None:
        if node.proc is not None:
            procs.signal_group(node.proc, signal.SIGCONT)
        node.paused = False

    def stop(self, grace_s: float = 10.0) -> None:
        """Stop every node gracefully (their recorders flush on the way down)."""
        for n in self.nodes:
            if n.proc is not None:
                n.paused = False
                procs.signal_group(n.proc, signal.SIGCONT)
                procs.signal_group(n.proc, signal.SIGTERM)
        for n in self.nodes:
            self.stop_node(n, grace_s, signalled=True)

    def close(self) -> None:
        """Kill whatever still runs; safe to call at any time, any number of times."""
        for n in self.nodes:
            if n.proc is not None:
                procs.kill_group(n.proc)
            n.paused = False

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ operator

    def ctl_any(self, *args: str, timeout_s: float | None = None) -> Any:
        """Run a ctl command on the first live node that answers."""
        errors = []
        for n in self.live():
            try:
                return self.ctl(n.name, *args, timeout_s=timeout_s)
            except CtlError as exc:
                if exc.code != 69:  # refused by a reachable node: a real answer
                    raise
                errors.append(str(exc))
        raise CtlError(69, "; ".join(errors) or "no live node")

    def leader_of(self, queue: str, vhost: str = "/") -> NodeSpec | None:
        """The node holding the leader of `queue`, as a live member reports it."""
        rows = self.ctl_any("--vhost", vhost, "quorum_status", queue) or []
        leaders = [r for r in rows if r.get("raft_state") == "leader"]
        if not leaders:
            return None
        # a deposed leader cut off from the rest may still say so: the newest term wins
        best = max(leaders, key=lambda r: int(r.get("term") or 0))
        return self.node(best["node"])
