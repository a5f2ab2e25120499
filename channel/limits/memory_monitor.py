"""The memory alarm of a node (RabbitMQ's `vm_memory_monitor`).

A node that keeps accepting publishes while its memory grows ends up killed by
the OS; RabbitMQ prevents that by raising the `memory` resource alarm when the
process uses more than `vm_memory_high_watermark` of the machine's memory,
which blocks every *publishing* connection (consumers keep draining queues)
until usage falls back under the limit. The check is periodic (1 s), strict
(`used > limit`) and has no hysteresis. The watermark is a fraction of total
memory (default 0.6) or an absolute byte value, and can be changed at run
time; 0 raises the alarm at the next check, the documented way to stop all
publishing. `force_reading` overrides the measured usage for tests.
"""

from __future__ import annotations

import os
import re
import resource
from collections.abc import Callable
from typing import Any

import actors
from actors import Node
from channel.limits.alarm import Alarm

__all__ = [
    "DEFAULT_WATERMARK",
    "MemoryMonitor",
    "parse_absolute",
    "process_rss",
    "total_memory",
]

DEFAULT_WATERMARK = 0.6
#: RabbitMQ's fallback when the configured watermark cannot be parsed
FALLBACK_WATERMARK = 0.4
CHECK_INTERVAL_MS = 1000

_UNITS = {
    "": 1, "b": 1,
    "k": 1024, "ki": 1024, "kib": 1024, "kb": 1000,
    "m": 1024**2, "mi": 1024**2, "mib": 1024**2, "mb": 1000**2,
    "g": 1024**3, "gi": 1024**3, "gib": 1024**3, "gb": 1000**3,
    "t": 1024**4, "ti": 1024**4, "tib": 1024**4, "tb": 1000**4,
}


def parse_absolute(value: int | str) -> int:
    """`vm_memory_high_watermark.absolute`: bytes, or a number with a unit (`1024MiB`)."""
    if isinstance(value, int):
        return value
    m = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", value)
    if m is None or m.group(2).lower() not in _UNITS:
        raise ValueError(f"invalid absolute memory limit {value!r}")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def total_memory() -> int:
    """The machine's memory in bytes (`MemTotal`, else pages × page size)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def process_rss() -> int:
    """The OS process's resident set size (`vm_memory_calculation_strategy = rss`)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class MemoryMonitor:
    """Sets and clears the node's `memory` alarm from periodic readings."""

    def __init__(self, alarm: Alarm, *, watermark: float | None = DEFAULT_WATERMARK,
                 absolute: int | str | None = None, total: int | None = None,
                 measure: Callable[[], int] = process_rss,
                 interval_ms: int = CHECK_INTERVAL_MS) -> None:
        self.alarm = alarm
        self.total = total if total is not None else total_memory()
        self.measure = measure
        self.interval_ms = interval_ms
        self.forced: int | None = None
        self.watermark: float = DEFAULT_WATERMARK
        self.absolute: int | None = None
        self.pid: Any = None
        self.set_watermark(watermark, absolute=absolute, check=False)

    # ------------------------------------------------------------ settings

    def set_watermark(self, fraction: float | None = None, *, absolute: int | str | None = None,
                      check: bool = True) -> None:
        """Change the limit at run time (`rabbitmqctl set_vm_memory_high_watermark`).

        An absolute value wins over a fraction; a fraction that is not a number
        in [0, 1] falls back to 0.4, as RabbitMQ does with a bad setting.
        """
        self.absolute = None if absolute is None else parse_absolute(absolute)
        if fraction is not None:
            ok = isinstance(fraction, int | float) and not isinstance(fraction, bool) \
                and 0 <= fraction <= 1
            self.watermark = float(fraction) if ok else FALLBACK_WATERMARK
        if check:
            self.check()

    def force_reading(self, used: int | None) -> None:
        """Test hook: report `used` bytes instead of measuring (None: measure again)."""
        self.forced = used
        self.check()

    @property
    def limit(self) -> int:
        if self.absolute is not None:
            return self.absolute
        return int(self.total * self.watermark)

    def used(self) -> int:
        return self.forced if self.forced is not None else self.measure()

    def check(self) -> bool:
        """Take a reading; set or clear the alarm. True when alarmed."""
        alarmed = self.used() > self.limit
        if alarmed:
            self.alarm.set_alarm("memory")
        else:
            self.alarm.clear_alarm("memory")
        return alarmed

    # ------------------------------------------------------------ process

    def start(self, node: Node) -> MemoryMonitor:
        """Run the periodic check as a process of `node`."""
        self.pid = node.spawn(self._loop)
        return self

    def stop(self) -> None:
        if self.pid is not None:
            self.alarm.node.send(self.pid, ("stop",))
            self.pid = None

    def _loop(self) -> None:
        while True:
            self.check()
            msg = actors.receive(self.interval_ms)
            if msg == ("stop",):
                return
