"""The node's resource monitors (`vm_memory_monitor`, `rabbit_disk_monitor`).

They own the node's `channel.alarm.Alarm` hub: every `check_interval_ms` the
monitor compares this OS process's resident memory with
`vm_memory_high_watermark` × total memory, and the free space of the data
directory with `disk_free_limit`, and sets or clears the `memory` / `disk`
alarm. Operators (and tests) change the thresholds at run time, as with
`rabbitmqctl set_vm_memory_high_watermark 0`, which raises the memory alarm
at once; restoring the threshold clears it on the next check.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

import actors
from actors.gen_server import GenServer
from channel.alarm import Alarm

__all__ = ["ALARM_SERVER", "AlarmServer", "memory_total", "memory_used"]

ALARM_SERVER = "rabbit_alarm"
DEFAULT_WATERMARK = 0.6
DEFAULT_DISK_FREE_LIMIT = 50_000_000
CHECK_INTERVAL_MS = 1000


def memory_used() -> int:
    """Resident set size of this OS process (`vm_memory_calculation_strategy = rss`)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


def memory_total() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 1 << 34


class AlarmServer(GenServer):
    """State: dict with the alarm hub, thresholds and the watched directory."""

    def init(self, args: tuple[Alarm, str]) -> Any:
        alarm, directory = args
        state = {"alarm": alarm, "dir": directory, "watermark": DEFAULT_WATERMARK,
                 "disk_free_limit": DEFAULT_DISK_FREE_LIMIT}
        actors.send_after(CHECK_INTERVAL_MS, actors.self(), "check")
        return ("ok", state)

    def handle_call(self, request: Any, _from: Any, state: dict[str, Any]) -> Any:
        match request:
            case ("set_vm_memory_high_watermark", float() | int() as value):
                state["watermark"] = float(value)
            case ("set_disk_free_limit", int() as value):
                state["disk_free_limit"] = value
            case "get_alarms":
                return ("reply", sorted(state["alarm"].active), state)
            case "status":
                return ("reply", {k: v for k, v in state.items() if k != "alarm"}
                        | {"alarms": sorted(state["alarm"].active)}, state)
            case _:
                return ("reply", ("error", "badarg"), state)
        self._check(state)
        return ("reply", "ok", state)

    def handle_info(self, msg: Any, state: dict[str, Any]) -> Any:
        if msg == "check":
            self._check(state)
            actors.send_after(CHECK_INTERVAL_MS, actors.self(), "check")
        return ("noreply", state)

    @staticmethod
    def _check(state: dict[str, Any]) -> None:
        alarm: Alarm = state["alarm"]
        over = memory_used() > state["watermark"] * memory_total()
        (alarm.set_alarm if over else alarm.clear_alarm)("memory")
        try:
            free = shutil.disk_usage(state["dir"]).free
        except OSError:
            free = state["disk_free_limit"] + 1
        (alarm.set_alarm if free < state["disk_free_limit"] else alarm.clear_alarm)("disk")
