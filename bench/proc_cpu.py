"""CPU seconds read from Linux /proc, for the bench scripts that report CPU next to wall
time (per node, per message, per JVM thread kind)."""

from __future__ import annotations

import os


def stat_cpu_s(stat: str) -> float:
    """User + system CPU seconds in the text of a `/proc/<pid>[/task/<tid>]/stat` file.
    The fields are counted after the command name, which may itself hold spaces."""
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far; OSError once it is gone."""
    with open(f"/proc/{pid}/stat") as f:
        return stat_cpu_s(f.read())
