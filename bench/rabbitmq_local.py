"""A throwaway RabbitMQ cluster on loopback, so bench/e2e.py can measure its reference.

Why: a ratio against figures measured elsewhere says little on a machine whose disk
and cores drift by the hour. When a RabbitMQ server is installed (Debian's
``rabbitmq-server`` package, 3.10.8 on bookworm), the e2e bench starts this cluster
in the same run and puts warren's figures beside RabbitMQ's, measured with the same
pika clients a few minutes apart.

Each node gets its own directory (data, logs, config, an empty plugin list), binds
AMQP and distribution on 127.0.0.1 only, and shares a fresh cookie through a private
``HOME``; nodes 2..N join node 1 with ``rabbitmqctl join_cluster``. Everything is
stopped and the directory removed on exit; an ``epmd`` this cluster started is
stopped too.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import procs
from transports.zmq_node import free_port

HOST = "127.0.0.1"
START_TIMEOUT_S = 120.0


class RabbitMQUnavailable(RuntimeError):
    """No RabbitMQ server on this machine."""


def sbin_dir() -> Path:
    """Where the real ``rabbitmq-server``/``rabbitmqctl`` scripts are.

    Debian's ``/usr/sbin`` entries are a wrapper that switches to the ``rabbitmq``
    user; the scripts beside the wrapper run as the caller, which a private cluster
    in a temporary directory needs.
    """
    found = shutil.which("rabbitmq-server")
    if found is None:
        raise RabbitMQUnavailable("rabbitmq-server is not on PATH "
                                  "(Debian: apt-get install rabbitmq-server)")
    beside = Path(os.path.realpath(found)).parent
    if (beside / "rabbitmqctl").exists() and (beside / "rabbitmq-server").exists():
        return beside
    return Path(found).parent


@dataclass
class RabbitNode:
    name: str  # warrenbench1x1a2b3c@localhost
    amqp_port: int
    dist_port: int
    base: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@{HOST}:{self.amqp_port}/%2F"


class RabbitCluster:
    """N RabbitMQ nodes on loopback; `start()` returns once they form one cluster."""

    def __init__(self, root: Path, nodes: int = 3, ra: dict[str, Any] | None = None) -> None:
        self.root = root
        #: Ra application env of every node (``advanced.config``), such as wal_pre_allocate
        self.ra = dict(ra or {})
        self.sbin = sbin_dir()
        self.home = root / "home"
        self.cookie = secrets.token_hex(16)
        # names unique to this cluster: two clusters on one host (two benches at
        # once) share its epmd, which refuses a name that is already registered
        tag = secrets.token_hex(3)
        self.nodes = [RabbitNode(f"warrenbench{i}x{tag}@localhost", free_port(HOST),
                                 free_port(HOST), root / f"rabbit{i}")
                      for i in range(1, nodes + 1)]
        self._epmd_before = self._epmd_running()

    # -- environment ----------------------------------------------------------------

    def _env(self, node: RabbitNode) -> dict[str, str]:
        env = dict(os.environ)
        env.update({
            "HOME": str(self.home),
            "RABBITMQ_NODENAME": node.name,
            "RABBITMQ_NODE_IP_ADDRESS": HOST,
            "RABBITMQ_NODE_PORT": str(node.amqp_port),
            "RABBITMQ_DIST_PORT": str(node.dist_port),
            "RABBITMQ_MNESIA_BASE": str(node.base / "mnesia"),
            "RABBITMQ_LOG_BASE": str(node.base / "log"),
            "RABBITMQ_PID_FILE": str(node.base / "pid"),
            "RABBITMQ_CONFIG_FILE": str(node.base / "rabbitmq.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(node.base / "enabled_plugins"),
            "RABBITMQ_CONF_ENV_FILE": str(node.base / "rabbitmq-env.conf"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(node.base / "advanced.config"),
            # a node that fails to boot writes its crash dump here, not into the cwd
            "ERL_CRASH_DUMP": str(node.base / "erl_crash.dump"),
            "ERL_EPMD_ADDRESS": HOST,
        })
        return env

    def _write_files(self, node: RabbitNode) -> None:
        for sub in ("mnesia", "log"):
            (node.base / sub).mkdir(parents=True, exist_ok=True)
        (node.base / "rabbitmq.conf").write_text(
            f"listeners.tcp.1 = {HOST}:{node.amqp_port}\n"
            "log.console = false\nlog.file.level = warning\n")
        (node.base / "enabled_plugins").write_text("[].\n")
        (node.base / "rabbitmq-env.conf").write_text("")
        (node.base / "advanced.config").write_text(advanced_config(self.ra) + "\n")

    def ctl(self, node: RabbitNode, *args: str, timeout_s: float = 60.0) -> str:
        out = subprocess.run([str(self.sbin / "rabbitmqctl"), "-n", node.name, *args],
                             env=self._env(node), capture_output=True, text=True,
                             timeout=timeout_s)
        if out.returncode != 0:
            raise RuntimeError(f"rabbitmqctl {' '.join(args)} on {node.name} exited "
                               f"{out.returncode}: {(out.stderr or out.stdout).strip()[-800:]}")
        return out.stdout

    def version(self) -> str:
        """The server's version, as the first node reports it."""
        out = self.ctl(self.nodes[0], "eval", "rabbit_misc:version().")
        return out.strip().strip('"') or "?"

    def vm_pids(self) -> list[int]:
        """The Erlang VM (beam) process of each node, for CPU figures; 0 if not found.

        Each node's script runs in a session of its own, so its VM is the beam
        process in that session."""
        beams: dict[int, int] = {}  # session id -> pid
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                exe = (entry / "cmdline").read_bytes().split(b"\0", 1)[0]
                if b"beam" in Path(exe.decode(errors="replace")).name.encode():
                    beams[os.getsid(int(entry.name))] = int(entry.name)
            except (OSError, ProcessLookupError):
                continue
        return [beams.get(n.proc.pid, 0) if n.proc is not None else 0 for n in self.nodes]

    # -- lifecycle ------------------------------------------------------------------

    def start(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        cookie = self.home / ".erlang.cookie"
        cookie.write_text(self.cookie)
        cookie.chmod(0o400)
        for node in self.nodes:
            self._write_files(node)
            node.proc = procs.spawn([str(self.sbin / "rabbitmq-server")],
                                    node.base / "stdout.log", self._env(node))
        for node in self.nodes:
            self._await(node)
        first = self.nodes[0]
        for node in self.nodes[1:]:
            self.ctl(node, "stop_app")
            self.ctl(node, "join_cluster", first.name)
            self.ctl(node, "start_app")
        for node in self.nodes:
            self._await(node)

    def _await(self, node: RabbitNode) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        last = ""
        while time.monotonic() < deadline:
            if node.proc is not None and node.proc.poll() is not None:
                raise RuntimeError(f"{node.name} exited ({node.proc.returncode}):\n"
                                   + self._tail(node))
            try:
                self.ctl(node, "await_startup", "--timeout", "5", timeout_s=30.0)
                return
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                last = str(exc)
                time.sleep(0.5)
        raise RuntimeError(f"{node.name} not up in {START_TIMEOUT_S:.0f} s: {last}\n"
                           + self._tail(node))

    def _tail(self, node: RabbitNode) -> str:
        try:
            return (node.base / "stdout.log").read_bytes()[-2000:].decode(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        for node in self.nodes:
            if node.proc is not None:
                procs.stop_group(node.proc, grace_s=30.0)
        if not self._epmd_before and shutil.which("epmd"):
            subprocess.run(["epmd", "-kill"], capture_output=True, timeout=10,
                           env={**os.environ, "ERL_EPMD_ADDRESS": HOST})

    @staticmethod
    def _epmd_running() -> bool:
        if shutil.which("epmd") is None:
            return False
        out = subprocess.run(["epmd", "-names"], capture_output=True, timeout=10)
        return out.returncode == 0


def advanced_config(ra: dict[str, Any]) -> str:
    """An ``advanced.config`` that sets Ra's application env to `ra`."""
    terms = ", ".join(f"{{{k}, {_erlang(v)}}}" for k, v in sorted(ra.items()))
    return f"[{{ra, [{terms}]}}]."


def _erlang(value: Any) -> str:
    """A Ra setting as an Erlang term: booleans and names are atoms, numbers numbers."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.isidentifier():
        return value
    raise ValueError(f"cannot write {value!r} as an Erlang term")


def installed_version() -> str | None:
    """The installed package's upstream version (``3.10.8``), without starting a node;
    None where dpkg does not know it."""
    try:
        done = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "rabbitmq-server"],
                              capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    version = done.stdout.strip().split(":")[-1].split("-")[0]
    return version if done.returncode == 0 and version else None


def available() -> bool:
    try:
        sbin_dir()
    except RabbitMQUnavailable:
        return False
    return True


@contextmanager
def rabbitmq_cluster(root: Path, nodes: int = 3,
                     ra: dict[str, Any] | None = None) -> Iterator[RabbitCluster]:
    cluster = RabbitCluster(root, nodes, ra)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
