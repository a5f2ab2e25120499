"""The supervision tree of one AMQP connection (`rabbit_connection_sup`).

RabbitMQ gives every connection this tree so that a failure stays inside the
connection and a shutdown stops things in the right order:

```
connection_sup            one_for_all, 0 / 1 s, auto_shutdown any_significant
├── helper_sup            one_for_one, 10 / 10 s, any_significant (transient, significant)
│   ├── channel_sup_sup   simple_one_for_one, 0 / 1 s (started at connection.open)
│   │   └── channel_sup   one_for_all, 0 / 1 s, any_significant (one per channel)
│   │       ├── writer    transient, significant
│   │       ├── limiter   transient, significant
│   │       └── channel   transient, significant (added once the two above run)
│   ├── collector         the connection's exclusive queues (started at tune-ok)
│   ├── heartbeat_sender  transient (tune-ok, heartbeat > 0)
│   └── heartbeat_monitor transient (idem)
└── reader                transient, significant
```

The reader is started last, so it is stopped first and can close its
channels itself; the channels' supervisors are below the helper supervisor,
which stops after it. With intensity 0 nothing is ever restarted: a crashing
channel takes its writer and limiter down, the reader sees the channel's
abnormal `DOWN` and closes the connection with 541; a reader that ends takes
the whole connection with it (`any_significant`).

`connections_sup` is the listener's own supervisor (ranch's `conns_sup`):
one temporary `connection_sup` per accepted socket.
"""

from __future__ import annotations

from typing import Any

import actors
from channel.connection import queue_collector
from channel.connection.channel import channel_main
from channel.limits import limiter
from channel.protocol import heartbeat
from channel.protocol import writer as wr
from supervision import supervisor

__all__ = [
    "FAIR_WAIT",
    "WORKER_WAIT",
    "start_channel",
    "start_channel_sup_sup",
    "start_collector",
    "start_connection",
    "start_connections_sup",
    "start_heartbeats",
]

FAIR_WAIT = 70_000
"""Shutdown time of a channel, its writer and limiter (rabbit.hrl ?FAIR_WAIT)."""
WORKER_WAIT = 300_000
"""Shutdown time of the reader and the collector (?WORKER_WAIT default)."""


class _Sup:
    """A supervisor callback module with fixed flags and initial children."""

    def __init__(self, flags: dict[str, Any], children: list[Any] | None = None) -> None:
        self.flags, self.children = flags, children or []

    def init(self, _args: Any) -> Any:
        return ("ok", (self.flags, list(self.children)))


def _flags(strategy: str, intensity: int, period: int, auto_shutdown: str) -> dict[str, Any]:
    return {"strategy": strategy, "intensity": intensity, "period": period,
            "auto_shutdown": auto_shutdown}


def _spawned(fn: Any, *args: Any) -> Any:
    """Start function of a plain process child: linked to its supervisor."""
    return ("ok", actors.spawn_link(fn, *args))


# ----------------------------------------------------------------- listener


def start_connections_sup(reader_main: Any, ctx: Any, registry: Any) -> Any:
    """The listener's supervisor: `start_child(sup, [sock])` starts one connection."""
    template = {"id": "connection_sup", "type": "supervisor", "restart": "temporary",
                "shutdown": "infinity",
                "start": (start_connection, [reader_main, ctx, registry])}
    return supervisor.start_link(_Sup(_flags("simple_one_for_one", 0, 1, "never"),
                                      [template]))


# --------------------------------------------------------------- connection


def start_connection(reader_main: Any, ctx: Any, registry: Any, sock: Any) -> Any:
    """`rabbit_connection_sup:start_link`: the helper supervisor, then the reader."""
    started = supervisor.start_link(_Sup(_flags("one_for_all", 0, 1, "any_significant")))
    if started[0] != "ok":
        return started
    sup = started[1]
    helper = supervisor.start_child(sup, {
        "id": "helper_sup", "type": "supervisor", "restart": "transient",
        "significant": True, "shutdown": "infinity",
        "start": (supervisor.start_link,
                  [_Sup(_flags("one_for_one", 10, 10, "any_significant"))])})
    if helper[0] != "ok":
        _give_up(sup)
        return ("error", ("helper_sup", helper))
    reader = supervisor.start_child(sup, {
        "id": "reader", "restart": "transient", "significant": True,
        "shutdown": WORKER_WAIT,
        "start": (_spawned, [reader_main, ctx, sock, sup, helper[1], registry])})
    if reader[0] != "ok":
        _give_up(sup)
        return ("error", ("reader", reader))
    return ("ok", sup, reader[1])


def _give_up(sup: Any) -> None:
    """`rabbit_misc:shutdown_supervisor`: unlink and stop a half-built supervisor."""
    actors.unlink(sup)
    actors.exit(sup, "shutdown")


def start_channel_sup_sup(helper_sup: Any) -> Any:
    """At connection.open: the supervisor of the connection's channel supervisors."""
    template: dict[str, Any] = {"id": "channel_sup", "type": "supervisor", "restart": "transient",
                "shutdown": "infinity", "start": (start_channel_sup, [])}
    return supervisor.start_child(helper_sup, {
        "id": "channel_sup_sup", "type": "supervisor", "restart": "transient",
        "significant": True, "shutdown": "infinity",
        "start": (supervisor.start_link,
                  [_Sup(_flags("simple_one_for_one", 0, 1, "never"), [template])])})


def start_collector(helper_sup: Any, backend: Any, owner: Any) -> Any:
    """At tune-ok: the process that deletes the connection's exclusive queues."""
    return supervisor.start_child(helper_sup, {
        "id": "collector", "restart": "transient", "significant": True,
        "shutdown": WORKER_WAIT,
        "start": (_spawned, [queue_collector.collector_main, backend, owner])})


def start_heartbeats(helper_sup: Any, wire: Any, heartbeat_s: int, reader: Any) -> Any:
    """At tune-ok with a heartbeat > 0: sender and monitor; the monitor's pid."""
    for id_, fn in (("heartbeat_sender", heartbeat.sender_main),
                    ("heartbeat_receiver", heartbeat.monitor_main)):
        result = supervisor.start_child(helper_sup, {
            "id": id_, "restart": "transient", "shutdown": WORKER_WAIT,
            "start": (_spawned, [fn, wire, heartbeat_s, reader])})
        if result[0] != "ok":
            return result
    return result


# ------------------------------------------------------------------ channel


def start_channel(channel_sup_sup: Any, ctx: Any, number: int, reader: Any, wire: Any,
                  conn: Any) -> Any:
    """From the reader: ``("ok", channel_sup, channel_pid)`` or ``("error", reason)``."""
    return supervisor.start_child(channel_sup_sup, [ctx, number, reader, wire, conn])


def start_channel_sup(ctx: Any, number: int, reader: Any, wire: Any, conn: Any) -> Any:
    """`rabbit_channel_sup:start_link`: writer and limiter, then the channel with both."""
    children = [
        {"id": "writer", "restart": "transient", "significant": True, "shutdown": FAIR_WAIT,
         "start": (_spawned, [wr.writer_main, wire, number, reader])},
        {"id": "limiter", "restart": "transient", "significant": True, "shutdown": FAIR_WAIT,
         "start": (_spawned, [limiter.limiter_main])},
    ]
    started = supervisor.start_link(
        _Sup(_flags("one_for_all", 0, 1, "any_significant"), children))
    if started[0] != "ok":
        return started
    sup = started[1]
    pids = {id_: pid for id_, pid, _t, _m in supervisor.which_children(sup)}
    channel = supervisor.start_child(sup, {
        "id": "channel", "restart": "transient", "significant": True, "shutdown": FAIR_WAIT,
        "start": (_spawned, [channel_main, ctx, number, reader, pids["writer"],
                             pids["limiter"], conn])})
    if channel[0] != "ok":
        _give_up(sup)
        return ("error", channel[1])
    return ("ok", sup, channel[1])
