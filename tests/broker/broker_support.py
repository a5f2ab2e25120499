"""Start real `warren node start` processes on loopback and run `warren ctl` against them."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pika

from transports.zmq_node import free_port, stop_node_process

ROOT = Path(__file__).resolve().parents[2]
COOKIE = "warren-broker-tests"
#: every node of a test serves its management API and metrics on free ports, so
#: nodes side by side (and tests run side by side) never want RabbitMQ's 15672 / 15692;
#: given first, a test's own flags win
FREE_HTTP_PORTS = ("--management-port", "0", "--prometheus-port", "0")


def env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT), WARREN_COOKIE=COOKIE)


@dataclass
class BrokerProc:
    name: str
    amqp_port: int
    data_dir: Path
    proc: subprocess.Popen[bytes] | None = None
    ready_line: str = ""


def permit_transient_queues(base: Path) -> list[str]:
    """The `--config` of a node that permits transient non-exclusive queues (4.3 denies
    them by default), for tests that show what becomes of such a queue."""
    base.mkdir(parents=True, exist_ok=True)
    cfg = base / "permit_transient.json"
    cfg.write_text(json.dumps({"amqp": {
        "deprecated_features_permit": {"transient_nonexcl_queues": True}}}))
    return ["--config", str(cfg)]


def plan(count: int, base: Path) -> list[BrokerProc]:
    return [BrokerProc(f"n{i}@127.0.0.1:{free_port()}", free_port(), base / f"n{i}")
            for i in range(1, count + 1)]


def launch(b: BrokerProc, args: list[str]) -> None:
    """Start `b`'s node; its stderr goes to a log beside its data dir (the test's
    tmp_path), so a node that is killed and started again leaves no file elsewhere."""
    b.data_dir.parent.mkdir(parents=True, exist_ok=True)
    log = tempfile.NamedTemporaryFile(  # noqa: SIM115 - lives as long as the child
        prefix=f"{b.data_dir.name}-", suffix=".log", dir=b.data_dir.parent, delete=False)
    b.proc = subprocess.Popen([sys.executable, "-m", "warren_cli", "node", "start",
                               *FREE_HTTP_PORTS, *args],
                              cwd=ROOT, env=env(), stdout=subprocess.PIPE, stderr=log)
    log.close()
    b.proc.log_path = log.name  # type: ignore[attr-defined]


def wait_ready(b: BrokerProc, timeout: float = 60.0) -> str:
    """The node's `ready ...` line; raises with its log if it fails first."""
    assert b.proc is not None and b.proc.stdout is not None
    fd, buf = b.proc.stdout.fileno(), b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if select.select([fd], [], [], 0.1)[0]:
            chunk = os.read(fd, 4096)
            buf += chunk
            for line in buf.decode().splitlines():
                if line.startswith("ready "):
                    b.ready_line = line
                    return line
            if not chunk or "failed" in buf.decode():
                break
    log = Path(b.proc.log_path).read_text()  # type: ignore[attr-defined]
    raise RuntimeError(f"{b.name} not ready: {buf.decode()!r}\n{log[-3000:]}")


def start_cluster(nodes: list[BrokerProc], backend: str = "quorum",
                  net_ticktime: float = 2, extra: list[str] | None = None) -> None:
    peers = ",".join(b.name for b in nodes)
    for b in nodes:
        launch(b, [*(extra or []), "--name", b.name, "--amqp-port", str(b.amqp_port),
                   "--peers", peers, "--net-ticktime", str(net_ticktime),
                   "--data-dir", str(b.data_dir), "--backend", backend])
    for b in nodes:
        wait_ready(b)


@contextmanager
def running_cluster(base: Path, count: int = 3, backend: str = "quorum",
                    net_ticktime: float = 2, extra: list[str] | None = None,
                    ) -> Iterator[list[BrokerProc]]:
    """`count` nodes on loopback under `base`; every process is killed on the way out.

    A port can still be taken by another process between the draw and the node's
    bind; such a start is retried on fresh ports (any other failure is raised)."""
    for attempt in range(3):
        nodes = plan(count, base / f"try{attempt}" if attempt else base)
        try:
            start_cluster(nodes, backend=backend, net_ticktime=net_ticktime, extra=extra)
        except RuntimeError:
            clash = any("Address already in use" in _log(b) for b in nodes)
            stop_all(nodes)  # (removes the logs)
            if clash and attempt < 2:
                continue
            raise
        break
    try:
        yield nodes
    finally:
        stop_all(nodes)


def connect(b: BrokerProc, user: str = "guest", password: str = "guest",
            ) -> pika.BlockingConnection:
    """A pika connection to node `b` (one attempt)."""
    return pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", b.amqp_port, connection_attempts=1,
        credentials=pika.PlainCredentials(user, password)))


def _log(b: BrokerProc) -> str:
    path = getattr(b.proc, "log_path", None)
    try:
        return Path(path).read_text(errors="replace") if path else ""
    except FileNotFoundError:
        return ""


def stop_all(nodes: list[BrokerProc]) -> None:
    for b in nodes:
        if b.proc is not None:
            stop_node_process(b.proc)


def ctl(node: str, *args: str, timeout: float = 10.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "warren_cli", "ctl", "--node", node, "--timeout", str(timeout),
         *args], cwd=ROOT, env=env(), capture_output=True, text=True, timeout=60)


def ctl_json(node: str, *args: str) -> Any:
    out = ctl(node, "--formatter", "json", *args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def eventually(check: Any, timeout: float = 15.0) -> Any:
    """Poll `check` until it returns a truthy value (no timing is asserted)."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.2)
