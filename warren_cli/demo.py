"""The foundation demo: three node processes that talk, watch each other and
survive a SIGKILL.

Each node runs a `greeter` process that answers pings, monitors the greeters
of the other nodes by name and reports every DOWN / nodedown / nodeup it sees
to the controller (the CLI's own node). The controller drives a ring of
messages, SIGKILLs one node, checks that the survivors saw `noconnection` and
`nodedown`, restarts it (a new creation: its old pids are dead) and drives the
ring again. The nodes are bare (`warren node start --bare`): the demo shows the
runtime under the broker, so it lives with the command line, which starts them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

import actors
from actors import Node
from transports.tick import TickConfig
from transports.zmq import ZmqTransport
from transports.zmq_node import free_port

__all__ = ["add_parser", "make_node", "run"]

GREETER = "greeter"


def greeter(controller: tuple[str, str]) -> None:
    """Body of the demo process on each node."""
    actors.register(GREETER)
    actors.monitor_nodes(True)
    watched: dict[Any, str] = {}
    actors.send(controller, ("ready", actors.node(), actors.self()))
    while True:
        msg = actors.receive()
        match msg:
            case ("ping", reply_to, hops):
                if hops:
                    actors.send((GREETER, hops[0]), ("ping", reply_to, hops[1:]))
                else:
                    actors.send(reply_to, ("pong", actors.node()))
            case ("watch", peer):
                watched[actors.monitor((GREETER, peer))] = peer
            case ("DOWN", ref, "process", obj, reason):
                watched.pop(ref, None)
                actors.send(controller, ("saw", actors.node(), "DOWN", obj, reason))
            case ("nodedown", peer) | ("nodeup", peer):
                actors.send(controller, ("saw", actors.node(), msg[0], peer, None))
            case "stop":
                return


class DemoCluster:
    """Node OS processes started with `warren node start --bare`, killed on exit."""

    def __init__(self, names: list[str], cookie: str, ticktime: float) -> None:
        self.names = names
        self.cookie = cookie
        self.ticktime = ticktime
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.data = tempfile.mkdtemp(prefix="warren-demo-")

    def start(self, name: str) -> None:
        env = dict(os.environ, WARREN_COOKIE=self.cookie)
        cmd = [sys.executable, "-m", "warren_cli", "node", "start", "--bare", "--name", name,
               "--data-dir", os.path.join(self.data, name.split("@")[0]),
               "--net-ticktime", str(self.ticktime)]
        self.procs[name] = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL)

    def kill(self, name: str) -> None:
        proc = self.procs.pop(name)
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs.values():
            proc.wait()
        self.procs.clear()
        shutil.rmtree(self.data, ignore_errors=True)


def expect(pred: Any, what: str, timeout_ms: int = 10_000) -> Any:
    msg = actors.receive(timeout_ms, match=pred)
    if msg is actors.TIMEOUT:
        raise SystemExit(f"demo: timed out waiting for {what}")
    return msg


def make_node(name: str, ticktime: float, data_dir: str | None = None,
              cookie: str | None = None, io: str | None = None) -> Node:
    """A node on the ZeroMQ transport, authenticated with the cookie."""
    transport = ZmqTransport(tick=TickConfig(net_ticktime=ticktime), cookie=cookie, io=io)
    return Node(name, transport=transport, data_dir=data_dir).start()


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register `demo` on the `warren` command's subparsers."""
    demo = subparsers.add_parser("demo",
                                 help="three nodes exchange messages and survive a SIGKILL")
    demo.add_argument("--net-ticktime", type=float, default=2.0,
                      help="seconds (Erlang's net_ticktime; default 2 for the demo)")
    demo.set_defaults(func=_command)
    return demo


def _command(args: argparse.Namespace) -> int:
    print("warren demo: three nodes on 127.0.0.1")
    return run(lambda name, tick: make_node(name, tick), ticktime=args.net_ticktime)


def run(make_node: Any, ticktime: float = 2.0) -> int:
    """Drive the demo; `make_node(name, data_dir)` builds the controller node."""
    host = "127.0.0.1"
    names = [f"n{i}@{host}:{free_port()}" for i in (1, 2, 3)]
    cookie = os.environ.get("WARREN_COOKIE") or os.urandom(16).hex()
    os.environ["WARREN_COOKIE"] = cookie
    cluster = DemoCluster(names, cookie, ticktime)
    ctl_name = f"ctl@{host}:{free_port()}"
    node: Node = make_node(ctl_name, ticktime)
    try:
        with node.attached() as me:
            for name in names:
                cluster.start(name)
            pids = {}
            for name in names:
                assert node.ping(name, 15_000) == "pong", f"{name} did not come up"
            actors.register("ctl")
            for name in names:
                actors.spawn(greeter, ("ctl", ctl_name), node=name)
            for _ in names:
                _, n, pid = expect(lambda m: m[0] == "ready", "greeters")
                pids[n] = pid
                print(f"  {n}: greeter {pid!r} up")
            for name in names:
                for peer in names:
                    if peer != name:
                        actors.send((GREETER, name), ("watch", peer))
            ring(names, me.pid)

            victim = names[1]
            print(f"SIGKILL {victim}")
            cluster.kill(victim)
            survivors = [n for n in names if n != victim]
            for n in survivors:
                expect(lambda m, n=n: m[:3] == ("saw", n, "DOWN") and m[3] == (GREETER, victim)
                       and m[4] == "noconnection", f"{n} to see noconnection")
                print(f"  {n}: DOWN {GREETER}@{victim} noconnection")
                expect(lambda m, n=n: m[:4] == ("saw", n, "nodedown", victim),
                       f"{n} to see nodedown")
                print(f"  {n}: nodedown {victim}")

            print(f"restart {victim}")
            cluster.start(victim)
            assert node.ping(victim, 15_000) == "pong", "restarted node did not come up"
            actors.spawn(greeter, ("ctl", ctl_name), node=victim)
            _, _n, new_pid = expect(lambda m: m[0] == "ready", "the new greeter")
            old_pid = pids[victim]
            print(f"  {victim}: new greeter {new_pid!r} (creation {new_pid.creation}, "
                  f"was {old_pid.creation})")
            ref = actors.monitor(old_pid)
            expect(lambda m: m[:2] == ("DOWN", ref) and m[4] == "noproc", "noproc for old pid")
            print(f"  old pid {old_pid!r}: noproc")
            for n in survivors:
                actors.send((GREETER, n), ("watch", victim))
                actors.send((GREETER, victim), ("watch", n))
            ring(names, me.pid)
            print("demo: ok")
            return 0
    finally:
        cluster.stop_all()
        node.stop()


def ring(names: list[str], me: actors.Pid) -> None:
    start = time.monotonic()
    rounds = 100
    for _ in range(rounds):
        actors.send((GREETER, names[0]), ("ping", me, names[1:]))
    for _ in range(rounds):
        expect(lambda m: m[0] == "pong", "the ring")
    ms = (time.monotonic() - start) * 1000
    print(f"  ring {' -> '.join(n.split('@')[0] for n in names)}: "
          f"{rounds} rounds in {ms:.0f} ms")
