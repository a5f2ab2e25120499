"""The node's `rabbit_alarm` process and its resource monitors.

It owns the node's `channel.limits.alarm.Alarm` hub. As `vm_memory_monitor` and
`rabbit_disk_monitor`, every `check_interval_ms` it compares this OS process's
resident memory with `vm_memory_high_watermark` × total memory, and the free
space of the data directory with `disk_free_limit`, and sets or clears this
node's `memory` / `disk` alarm. Operators (and tests) change the thresholds at
run time, as with `rabbitmqctl set_vm_memory_high_watermark 0`, which raises
the memory alarm at once; restoring the threshold clears it on the next check.

Alarms are cluster-wide, so this process is also what the other nodes' alarm
processes talk to (`rabbit_alarm`'s node_up / remote_conserve_resources): when
a cluster node comes up (or is already up when this process starts) it sends
that node's `rabbit_alarm` a `("register", self(), True)`; the receiver
replays its own alarms to the sender, from then on sends it every change of
them as `("set_alarm" | "clear_alarm", ("resource_limit", resource, node))`,
and answers with `("register", self(), False)` so that it hears the sender's
alarms too. The answer matters when the two processes start at different
times: a register sent to a node whose alarm process is not running yet is
lost, and the one that process sends when it starts repairs both directions.
A `nodedown`, or the DOWN of a registered peer, clears that node's alarms.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Collection
from typing import Any

import actors
from actors import Pid
from actors.gen_server import GenServer
from channel.limits.alarm import RESOURCES, Alarm

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
    """State: dict with the alarm hub, thresholds, the watched directory and the
    other nodes of the cluster (whose alarm processes it registers with)."""

    def init(self, args: tuple[Alarm, str, Collection[str]]) -> Any:
        alarm, directory, members = args
        state: dict[str, Any] = {"alarm": alarm, "dir": directory, "watermark": DEFAULT_WATERMARK,
                 "disk_free_limit": DEFAULT_DISK_FREE_LIMIT,
                 "members": set(members) - {actors.node()}}
        actors.monitor_nodes(True)
        for peer in actors.nodes():
            if peer in state["members"]:
                self._register_with(peer, answer=True)
        actors.send_after(CHECK_INTERVAL_MS, actors.self(), "check")
        return ("ok", state)

    def handle_call(self, request: Any, _from: Any, state: dict[str, Any]) -> Any:
        alarm: Alarm = state["alarm"]
        match request:
            case ("set_vm_memory_high_watermark", float() | int() as value):
                state["watermark"] = float(value)
            case ("set_disk_free_limit", int() as value):
                state["disk_free_limit"] = value
            case "get_alarms":
                return ("reply", alarm.alarms(), state)
            case "get_local_alarms":
                return ("reply", sorted(alarm.hub.local()), state)
            case "status":
                return ("reply", {k: state[k] for k in ("dir", "watermark", "disk_free_limit")}
                        | {"alarms": sorted(alarm.hub.local()),
                           "cluster_alarms": alarm.alarms()}, state)
            case _:
                return ("reply", ("error", "badarg"), state)
        self._check(state)
        return ("reply", "ok", state)

    def handle_info(self, msg: Any, state: dict[str, Any]) -> Any:
        alarm: Alarm = state["alarm"]
        me = actors.node()
        match msg:
            case "check":
                self._check(state)
                actors.send_after(CHECK_INTERVAL_MS, actors.self(), "check")
            case ("nodeup", peer, *_):
                if peer in state["members"]:
                    self._register_with(peer, answer=True)
            case ("nodedown", peer, *_):
                alarm.node_down(peer)
            case ("register", Pid() as peer, bool() as answer) if peer.node != me:
                if peer not in alarm.hub.peers:
                    actors.monitor(peer)
                alarm.register_peer(peer)
                if answer:
                    self._register_with(peer.node, answer=False)
            case ("set_alarm", ("resource_limit", str() as resource, str() as node)) \
                    if node != me and resource in RESOURCES:
                alarm.set_alarm(resource, node)
            case ("clear_alarm", ("resource_limit", str() as resource, str() as node)) \
                    if node != me and resource in RESOURCES:
                alarm.clear_alarm(resource, node)
            case ("DOWN", _ref, "process", Pid() as peer, _reason):
                alarm.peer_down(peer)
        return ("noreply", state)

    @staticmethod
    def _register_with(peer: str, *, answer: bool) -> None:
        """`rabbit_alarm:on_node_up`: ask `peer`'s alarm process to tell us its alarms
        (and, with `answer`, to register with us in turn)."""
        actors.send((ALARM_SERVER, peer), ("register", actors.self(), answer))

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
