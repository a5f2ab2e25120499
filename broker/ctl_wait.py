"""`warren ctl wait --pid PID` and `warren ctl await_startup`: wait for a node to boot.

These are rabbitmqctl's two commands for scripts that start nodes and must not
talk to them too early. `await_startup` asks a reachable node to answer once its
broker has booted (the whole supervision tree up, the cluster formed);
a node that does not answer at all is unreachable at once (69), as
`rabbit:await_startup` over rpc is. `wait --pid` is for the moment right after the
node's OS process was started, when not even its distribution port is open: it
polls the node while that OS process lives, then waits as `await_startup` does. Both
give up after `--timeout` seconds (300 unless given, rabbitmqctl's default for
`await_startup`) with rabbitmqctl's text and `EX_TEMPFAIL` (75); an
OS process that is gone is `process_not_running` (69), as rabbitmqctl 3.10.8 says it.

The polling rule (`poll`) is pure: the clock and the sleep are passed in.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import Any

__all__ = [
    "COMMANDS", "DEFAULT_TIMEOUT", "EX_TEMPFAIL", "add_parsers", "command_timeout", "poll",
    "process_alive",
]

EX_UNAVAILABLE = 69
#: rabbitmqctl's status for an operation that timed out
EX_TEMPFAIL = 75
#: seconds `wait` and `await_startup` wait unless `--timeout` says otherwise
#: (rabbitmqctl's default for `await_startup`)
DEFAULT_TIMEOUT = 300.0
#: seconds between two looks at a node that is not up yet
INTERVAL = 0.2
#: rabbitmqctl's name for what it waits for, kept in the progress lines
APPS = "[rabbit_and_plugins]"


def poll(check: Callable[[], Any], timeout: float, clock: Callable[[], float],
         sleep: Callable[[float], None], interval: float = INTERVAL) -> Any:
    """`check()` until it returns something other than None; None when `timeout`
    seconds of `clock` pass first. `check` runs at least once."""
    deadline = clock() + timeout
    while True:
        result = check()
        if result is not None:
            return result
        left = deadline - clock()
        if left <= 0:
            return None
        sleep(min(interval, left))


def command_timeout(command: str, given: float | None, default: float) -> float:
    """The seconds `command` waits: `--timeout` when given, else 300 for the waiting
    commands (a cluster's first boot may take a while) and `default` for the others."""
    if given is not None:
        return given
    return DEFAULT_TIMEOUT if command in COMMANDS else default


def process_alive(pid: int) -> bool:
    """Whether an OS process `pid` exists (signal 0, as `kill -0`)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by someone else
        return True
    return True


def _booted() -> bool:
    """Runs on the target node: its broker is up (`BrokerNode.start` has returned)."""
    import actors
    from broker.running import RUNNING

    broker = RUNNING.get(actors.node())
    return broker is not None and broker.sup is not None


def _timed_out(operation: str, node: str, timeout: float) -> int:
    print(f"Error: operation {operation} on node {node} timed out. "
          f"Timeout value used: {int(timeout * 1000)}", file=sys.stderr)
    return EX_TEMPFAIL


def _await_booted(args: argparse.Namespace, operation: str, deadline: float,
                  alive: Callable[[], bool] = lambda: True) -> int:
    """Ask the node until its broker has booted or `deadline` (monotonic) passes;
    `process_not_running` as soon as `alive()` is false."""
    import gevent

    from ra import system as ra_system

    def booted() -> str | None:
        if not alive():
            return "process_not_running"
        left = deadline - time.monotonic()
        answer = ra_system.rpc(args.node, _booted, timeout=max(1, int(min(left, 2) * 1000)))
        return "ok" if answer is True else None

    found = poll(booted, deadline - time.monotonic(), time.monotonic, gevent.sleep)
    if found is None:
        return _timed_out(operation, args.node, args.timeout)
    if found == "process_not_running":
        return _not_running()
    return 0


def _not_running() -> int:
    print("Error:\nprocess_not_running", file=sys.stderr)
    return EX_UNAVAILABLE


def await_startup(args: argparse.Namespace, unreachable: Callable[[], int]) -> int:
    """`await_startup`: the node must answer now; then wait for its broker to boot."""
    from broker.formation import ping

    deadline = time.monotonic() + args.timeout
    if ping(args.node, int(min(args.timeout, 5) * 1000)) != "pong":
        return unreachable()
    return _await_booted(args, "await_startup", deadline)


def wait(args: argparse.Namespace, unreachable: Callable[[], int]) -> int:
    """`wait --pid PID`: while the OS process lives, wait for the node to answer and
    its broker to boot."""
    import gevent

    from broker.formation import ping

    deadline = time.monotonic() + args.timeout
    print(f"Waiting for erlang distribution on node '{args.node}' "
          f"while OS process '{args.pid}' is running", flush=True)

    def reachable() -> str | None:
        if not process_alive(args.pid):
            return "process_not_running"
        left = deadline - time.monotonic()
        return "ok" if ping(args.node, max(1, int(min(left, 1) * 1000))) == "pong" else None

    found = poll(reachable, args.timeout, time.monotonic, gevent.sleep)
    if found is None:
        return _timed_out("wait", args.node, args.timeout)
    if found == "process_not_running":
        return _not_running()
    print(f"Waiting for applications '{APPS}' to start on node '{args.node}'", flush=True)
    status = _await_booted(args, "wait", deadline, lambda: process_alive(args.pid))
    if status == 0:
        print(f"Applications '{APPS}' are running on node '{args.node}'")
    return status


#: the waiting commands, run instead of an operation on the node
COMMANDS: dict[str, Callable[[argparse.Namespace, Callable[[], int]], int]] = {
    "await_startup": await_startup,
    "wait": wait,
}


def add_parsers(cmds: Any) -> None:
    """Register `await_startup` and `wait` on `warren ctl`'s subcommands."""
    cmds.add_parser("await_startup", help="wait until the target node has booted")
    w = cmds.add_parser("wait", help="wait for a node whose OS process was just started")
    w.add_argument("--pid", "-P", type=int, required=True,
                   help="the node's operating system process id")
