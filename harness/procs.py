"""Child processes in process groups of their own, and how to end them for sure.

Every node and workload client runs in its own session, so a signal reaches the
whole group (a node's helpers included) and a stopped group can be woken before it
is killed: SIGKILL is delivered to a stopped process, but SIGCONT first makes the
order of events on the way down the same as for a running one.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["kill_group", "signal_group", "spawn", "stop_group"]


def spawn(argv: Sequence[str], log: Path, env: Mapping[str, str] | None = None,
          cwd: Path | None = None) -> subprocess.Popen[bytes]:
    """Start `argv` in a new session, stdout and stderr appended to `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        return subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=dict(env) if env else None,
                                cwd=cwd, start_new_session=True)


def signal_group(proc: subprocess.Popen[bytes], sig: int) -> bool:
    """Send `sig` to the process group of `proc`; False when it is already gone."""
    if proc.poll() is not None:
        return False
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        return False
    return True


def kill_group(proc: subprocess.Popen[bytes], wait_s: float = 10.0) -> None:
    """SIGCONT then SIGKILL the whole group, and reap the leader."""
    for sig in (signal.SIGCONT, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
    try:
        proc.wait(wait_s)
    except subprocess.TimeoutExpired:
        pass


def stop_group(proc: subprocess.Popen[bytes], grace_s: float = 10.0,
               signalled: bool = False) -> int | None:
    """SIGCONT + SIGTERM (unless the caller already sent them), wait up to `grace_s`,
    then kill; the exit status.

    A second SIGTERM must not follow the first: a Python process that has begun to
    exit has its default handlers back, and would die of it (status -15) instead of
    finishing its clean stop.
    """
    if proc.poll() is None:
        if not signalled:
            signal_group(proc, signal.SIGCONT)
            signal_group(proc, signal.SIGTERM)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            pass
    kill_group(proc)
    return proc.returncode
