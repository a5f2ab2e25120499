"""Resource samples of one process for the history (`samples`).

Why: the report's CPU and memory plots, and a reader of a failed run asking whether a
node was starved or swelling, need the process's own view every second: CPU seconds
used (user and system, cumulative), resident memory, the longest mailbox and the open
channels. A native thread takes the samples, so they keep coming while the node's
hub is busy (a hub that stops answering is when they matter most); the thread only
reads counters and emits through the `emit` it is given: a node passes
`actors.trace.emit`, whose sink (the recorder) takes calls from any thread, a client
its recorder's `record`. Like the rest of the history side, the sampler imports
nothing of the runtime: what it reads of a node comes in as arguments.
"""

from __future__ import annotations

import os
import resource
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["SAMPLE_INTERVAL_S", "Sampler", "read_sample", "resident_bytes"]

#: seconds between two samples (one a second)
SAMPLE_INTERVAL_S = 1.0

def resident_bytes() -> int:
    """The OS process's resident set size, as the memory alarm's ``rss`` strategy reads it."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def read_sample(node: Any = None, open_channels: Callable[[], int] | None = None,
                ) -> dict[str, Any]:
    """One `sample` row's fields: CPU seconds, RSS, the longest mailbox of `node`'s
    processes (None without a node) and `open_channels()` (None without one)."""
    times = os.times()
    mailbox_max = None
    if node is not None:
        # a C-level copy of the process table: consistent while the hub changes it
        procs = list(node.procs.values())
        mailbox_max = max((len(p.actor_inbox) for p in procs), default=0)
    return {"cpu_user_s": times.user, "cpu_sys_s": times.system, "rss_bytes": resident_bytes(),
            "mailbox_max": mailbox_max,
            "open_channels": None if open_channels is None else open_channels()}


class Sampler:
    """Emits a `sample` every `interval_s` from a daemon thread until `stop`, through
    `emit` (``emit(kind, **fields)``: `actors.trace.emit` in a node, whose recorder is
    the sink, or `Recorder.record` in a client that holds its recorder)."""

    def __init__(self, node: Any = None, open_channels: Callable[[], int] | None = None,
                 interval_s: float = SAMPLE_INTERVAL_S, *,
                 emit: Callable[..., None]) -> None:
        self.node = node
        self.emit = emit
        #: one emitter per OS process: a restarted node (same name, counters from zero)
        #: starts a series of its own, so no CPU delta spans the restart
        self.emitter = f"sampler/{os.getpid()}"
        self.open_channels = open_channels
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Sampler:
        self._thread = threading.Thread(target=self._run, name="warren-sampler", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.interval_s):
                self.sample()
                return

    def sample(self) -> None:
        try:
            self.emit("sample", emitter=self.emitter,
                      **read_sample(self.node, self.open_channels))
        except Exception:  # a sample is never worth a crash: skip this one
            pass

    def stop(self) -> None:
        """Stop after a last sample (so a short run still has one at its end)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
