"""Run one bare warren node in its own OS process, and start such processes.

A bare node runs no processes of its own; the node that talks to it spawns
whatever it needs there (remote spawn ships closures with cloudpickle). That
is all multi-process tests and benchmarks need:

    proc, creation = start_node_process("b@127.0.0.1:7001", cookie="secret",
                                        net_ticktime=1.0)
    ...
    stop_node_process(proc)

``python -m transports.zmq_node NAME`` runs one in the foreground; it prints
``ready <creation>`` once it listens and exits on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import os
import random
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["free_port", "main", "port_free", "start_node_process", "stop_node_process"]

_ROOT = Path(__file__).resolve().parent.parent


PORT_RANGE = (20000, 32000)  # below Linux's ephemeral range: outgoing sockets never take these
_ports = random.Random()
_given: set[int] = set()


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether `port` on `host` can be bound right now (nothing listens on it)."""
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A listening port that was free a moment ago, never the same one twice.

    Drawn at random below the kernel's ephemeral range, so that no outgoing
    connection (a ZeroMQ peer link, a client) can take it between this check
    and the node's bind: `bind(0)` hands out exactly the ports those use. A
    port is handed out once per process: a cluster's ports are drawn before
    any node binds one, so a repeated draw would give two nodes one port.
    """
    if len(_given) > (PORT_RANGE[1] - PORT_RANGE[0]) // 2:
        _given.clear()  # long-lived process: the earliest ports are long since closed
    for _ in range(200):
        port = _ports.randrange(*PORT_RANGE)
        if port in _given:
            continue
        if not port_free(port, host):
            continue
        _given.add(port)
        return port
    raise OSError(f"no free port in {PORT_RANGE} on {host}")


def start_node_process(
    name: str,
    *,
    cookie: str | None = None,
    net_ticktime: float | None = None,
    net_setuptime: float | None = None,
    ping: str | None = None,
    timeout: float = 20.0,
    env: dict[str, str] | None = None,
) -> tuple[subprocess.Popen[bytes], int]:
    """Start a node process and wait until it listens; returns ``(popen, creation)``.

    With `ping` the new node connects to that node before reporting ready
    (so the new node is the side that dialled). Raises `RuntimeError` (after
    killing the child) if it does not come up within `timeout`.
    """
    cmd = [sys.executable, "-m", "transports.zmq_node", name]
    if net_ticktime is not None:
        cmd += ["--net-ticktime", str(net_ticktime)]
    if net_setuptime is not None:
        cmd += ["--net-setuptime", str(net_setuptime)]
    if ping is not None:
        cmd += ["--ping", ping]
    child_env = dict(os.environ if env is None else env)
    if cookie is not None:
        child_env["WARREN_COOKIE"] = cookie
    child_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(_ROOT), child_env.get("PYTHONPATH", "")) if p)
    # stderr goes to a file, never to a pipe nobody drains (a full pipe would
    # stop the node in the middle of a log line).
    log_file = tempfile.NamedTemporaryFile(  # noqa: SIM115 - lives as long as the child
        prefix="warren-node-", suffix=".log", delete=False)
    proc = subprocess.Popen(cmd, cwd=_ROOT, env=child_env, stdout=subprocess.PIPE,
                            stderr=log_file)
    log_file.close()
    proc.log_path = log_file.name  # type: ignore[attr-defined]
    deadline = time.monotonic() + timeout
    try:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        buf = b""
        while time.monotonic() < deadline:
            readable, _, _ = select.select([fd], [], [], 0.05)
            if readable:
                chunk = os.read(fd, 4096)
                if not chunk:
                    proc.wait(timeout=1)
                    raise RuntimeError(f"node {name} exited with {proc.returncode}")
                buf += chunk
                while b"\n" in buf:
                    raw, buf = buf.split(b"\n", 1)
                    line = raw.decode(errors="replace").strip()
                    if line.startswith("ready "):
                        return proc, int(line.split()[1])
                    if line.startswith("failed"):
                        raise RuntimeError(f"node {name} failed to start: {line}")
            elif proc.poll() is not None:
                raise RuntimeError(f"node {name} exited with {proc.returncode}")
        raise RuntimeError(f"node {name} not ready within {timeout}s")
    except BaseException:
        stop_node_process(proc)
        raise


def stop_node_process(proc: subprocess.Popen[bytes], timeout: float = 5.0,
                      keep_log: bool = False) -> None:
    """Kill a node process for sure (resuming it first if it was stopped).

    Its stderr log (``proc.log_path``) is deleted unless `keep_log`.
    """
    if proc.poll() is None:
        try:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        pass
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    log_path = getattr(proc, "log_path", None)
    if log_path and not keep_log:
        try:
            os.unlink(log_path)
        except FileNotFoundError:
            pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="run one bare warren node")
    parser.add_argument("name", help="name@host:port")
    parser.add_argument("--net-ticktime", type=float, default=None)
    parser.add_argument("--net-setuptime", type=float, default=None)
    parser.add_argument("--ping", default=None, help="connect to this node first")
    args = parser.parse_args(argv)

    import logging

    from gevent import signal_handler
    from gevent.event import Event

    from actors.gc_policy import tune_node_process
    from actors.node import Node
    from transports.tick import TickConfig
    from transports.zmq import DEFAULT_NET_SETUPTIME, ZmqTransport, node_process_io

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(name)s %(levelname)s %(message)s")
    try:
        tune_node_process()
    except ValueError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    tick = TickConfig(args.net_ticktime) if args.net_ticktime else TickConfig()
    transport = ZmqTransport(tick=tick, net_setuptime=args.net_setuptime or DEFAULT_NET_SETUPTIME,
                             io=node_process_io())
    node = Node(args.name, transport=transport).start()
    if args.ping is not None and node.ping(args.ping) != "pong":
        print(f"failed ping {args.ping}", flush=True)
        return 1
    stop = Event()
    signal_handler(signal.SIGTERM, stop.set)
    signal_handler(signal.SIGINT, stop.set)
    print(f"ready {node.creation}", flush=True)
    stop.wait()
    node.stop("shutdown")
    from gevent import sleep

    sleep(0.2)  # let the CLOSE frames leave
    return 0


if __name__ == "__main__":
    sys.exit(main())
