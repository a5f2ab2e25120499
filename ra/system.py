"""The Ra system supervision tree of one node (docs/ra.md, "The system tree").

```
ra_systems_sup                     one_for_one, 1 / 5 s   (started once per node)
└─ ra_system_sup_<sys>             one_for_all, 1 / 5 s
   ├─ ra_log_sup                   one_for_all, 5 / 5 s
   │  ├─ ra_log_segment_writer     only when the system config starts one
   │  └─ ra_log_wal_sup            one_for_one, 2 / 5 s
   │     └─ ra_log_wal
   └─ ra_server_sup_sup            simple_one_for_one, children temporary
      └─ ra_server_sup (per member)  one_for_all, 2 / 5 s
         └─ ra_server_proc         transient
```

So a crashed server is restarted by its own ``ra_server_sup``; a third crash
within 5 s ends that supervisor, and as a temporary child it is not brought
back: the member stays down until ``restart_server``. A server stopping with
reason ``normal`` (a removed leader) is not restarted. The WAL is chosen by
the system config (``wal_start``), so servers never depend on which WAL
runs. A config with a ``data_dir`` (see `disk_system_config`) runs the disk
WAL and segment writer over a `ra.disk_store.DiskStore`, and a node started
again on the same data dir recovers every registered server from it with
``restart_server``. Functions named ``*_local`` run on the node that owns the system and
are what the `ra.api` calls execute there.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import actors
from actors.pid import CallExit
from ra import proc, versioning, wal_memory
from ra.directory import SystemHandle, lookup, register_system, system_names
from ra.disk_store import DiskStore, disk_segment_writer_start, disk_wal_start
from ra.memory_disk import MemoryDisk
from supervision import supervisor

SYSTEMS_SUP = "ra_systems_sup"
#: ``ra_server_sup`` restart intensity: 2 restarts in 5 s.
SERVER_SUP_INTENSITY = 2
SERVER_SUP_PERIOD = 5

WalStart = Callable[[SystemHandle], Any]


def default_config(name: str = "default") -> dict[str, Any]:
    """``ra_system:default_config/0`` for the keys warren uses."""
    return {
        "name": name,
        "names": system_names(name),
        "wal_max_batch_size": wal_memory.DEFAULT_MAX_BATCH_SIZE,
        "snapshot_chunk_size": 1_000_000,
        "receive_snapshot_timeout": 30_000,
        "default_max_pipeline_count": 4096,
        "default_max_append_entries_rpc_batch_size": 128,
        "low_priority_commands_flush_size": 16,
        "machine_upgrade_strategy": "all",
    }


def memory_wal_start(handle: SystemHandle) -> Any:
    """The default ``wal_start``: the in-memory WAL on the system's disk."""
    assert isinstance(handle.disk, MemoryDisk)  # durable systems start `disk_wal_start`
    return wal_memory.start_link(handle.disk, handle.wal_name,
                                 int(handle.config.get("wal_max_batch_size", 8192)))


def disk_system_config(data_dir: str, name: str = "default", **keys: Any) -> dict[str, Any]:
    """A system config whose servers are durable in `data_dir` (one per node).

    Further keys are system config keys (``wal_max_size_bytes``, ``wal_sync_method``,
    ``segment_max_entries`` ...); a broker node declares which it takes, with their
    ranges, in `broker.config_schema.RA_KEYS`, as RabbitMQ's schema declares ``raft.*``.
    """
    return {"name": name, "data_dir": data_dir, **keys}


# ------------------------------------------------------------ starting


def start(config: dict[str, Any] | None = None) -> Any:
    """``ra_system:start/1`` on the calling process's node: ``("ok", pid)``.

    Keys beyond `default_config`: ``data_dir`` (durable mode: the disk WAL,
    segment writer and logs in that directory), ``disk`` (a `MemoryDisk` to
    recover from, standing in for the data dir), ``wal_start`` and
    ``segment_writer_start`` (start functions taking the `SystemHandle`).
    """
    cfg = {**default_config((config or {}).get("name", "default")), **(config or {})}
    if "data_dir" in cfg:
        cfg.setdefault("wal_start", disk_wal_start)
        cfg.setdefault("segment_writer_start", disk_segment_writer_start)
    node = actors.get_node()
    known = lookup(node, cfg["name"])
    if known is None or "disk" in cfg or _other_data_dir(known, cfg):
        handle = SystemHandle(name=cfg["name"], config=cfg, disk=_store(cfg),
                              names=dict(cfg["names"]))
        register_system(node, handle)
    _ensure_systems_sup()
    spec = {"id": cfg["name"], "start": (_start_system_sup, [cfg["name"]]),
            "type": "supervisor", "restart": "permanent"}
    return supervisor.start_child(SYSTEMS_SUP, spec)


def _store(cfg: dict[str, Any]) -> Any:
    if "data_dir" in cfg:
        return DiskStore(cfg["data_dir"], cfg.get("wal_sync_method", "datasync"))
    return cfg.get("disk") or MemoryDisk()


def _other_data_dir(known: SystemHandle, cfg: dict[str, Any]) -> bool:
    current = getattr(known.disk, "data_dir", None)
    return "data_dir" in cfg and current != os.path.abspath(cfg["data_dir"])


def stop(name: str = "default") -> Any:
    """``ra_system:stop/1``: every server of the system stops with it."""
    res = supervisor.terminate_child(SYSTEMS_SUP, name)
    supervisor.delete_child(SYSTEMS_SUP, name)
    return res


def _ensure_systems_sup() -> None:
    """``ra_sup``'s job: one long-lived top supervisor per node."""
    if actors.whereis(SYSTEMS_SUP) is not None:
        return
    me = actors.self()

    def app() -> None:
        result = supervisor.start_link(_Flags(("one_for_one", 1, 5), []), None, name=SYSTEMS_SUP)
        actors.send(me, ("ra_app_started", result))
        actors.receive(match=lambda _m: False)  # the application master lives on

    actors.spawn(app)
    actors.receive(match=lambda m: isinstance(m, tuple) and m[0] == "ra_app_started")


class _Flags:
    """A supervisor callback module with fixed flags and children."""

    def __init__(self, flags: Any, children: list[Any]) -> None:
        self.flags = flags
        self.children = children

    def init(self, _args: Any) -> Any:
        return ("ok", (self.flags, self.children))


def _start_system_sup(system: str) -> Any:
    handle = lookup(actors.get_node(), system)
    if handle is None:
        return ("error", "system_not_started")
    names = handle.names
    log_children: list[Any] = []
    seg_start = handle.config.get("segment_writer_start")
    if seg_start is not None:
        log_children.append({"id": "ra_log_segment_writer", "start": (seg_start, [handle]),
                             "shutdown": 30_000})
    wal_start = handle.config.get("wal_start") or memory_wal_start
    wal_sup = _Flags(("one_for_one", 2, 5), [{"id": "ra_log_wal", "start": (wal_start, [handle])}])
    log_children.append({"id": "ra_log_wal_sup", "type": "supervisor",
                         "start": (supervisor.start_link, [wal_sup, None, names["wal_sup"]])})
    log_sup = _Flags(("one_for_all", 5, 5), log_children)
    server_sup_sup = _Flags(("simple_one_for_one", 1, 5), [{
        "id": "ra_server_sup", "type": "supervisor", "restart": "temporary",
        "start": (_start_server_sup, [])}])
    system_sup = _Flags(("one_for_all", 1, 5), [
        {"id": "ra_log_sup", "type": "supervisor",
         "start": (supervisor.start_link, [log_sup, None, names["log_sup"]])},
        {"id": "ra_server_sup_sup", "type": "supervisor",
         "start": (supervisor.start_link, [server_sup_sup, None, names["server_sup_sup"]])},
    ])
    return supervisor.start_link(system_sup, None, names["system_sup"])


def _start_server_sup(config: dict[str, Any]) -> Any:
    """``ra_server_sup:start_link``: one server under its own supervisor."""
    child = {"id": config["id"][0], "start": (proc.start_link, [config]),
             "restart": "transient", "shutdown": 5000}
    return supervisor.start_link(
        _Flags(("one_for_all", SERVER_SUP_INTENSITY, SERVER_SUP_PERIOD), [child]), None)


# ------------------------------------------- server lifecycle, node-local


def _node_code(handle: SystemHandle, config: dict[str, Any]) -> dict[str, Any]:
    """The member's machine as this node's code runs it.

    In Erlang a machine is ``{module, Mod, Args}`` and the module is whatever the
    node has loaded, so the same config runs different code on nodes of different
    releases. Here the machine object is the code, and it travels with the config
    (from the node that starts a cluster, or from the persisted config at
    restart); a system config's ``machine_code`` (a function of the machine) gives
    the node's own, before the config is validated or the server started.
    """
    code = handle.config.get("machine_code")
    if code is None or "machine" not in config:
        return config
    return {**config, "machine": code(config["machine"])}


def start_server_local(system: str, config: dict[str, Any], new: bool = True) -> Any:
    """``ra_server_sup_sup:start_server``: ``"ok"`` or ``("error", reason)``."""
    handle = lookup(actors.get_node(), system)
    if handle is None:
        return ("error", "system_not_started")
    config = _node_code(handle, config)
    name = config["id"][0]
    running = actors.whereis(name)
    if running is not None:
        return ("error", ("already_started", running))
    disk = handle.disk
    if new:
        if disk.is_registered(config["uid"], name):
            return ("error", "not_new")
        valid = versioning.validate_config(config, handle.config)
        if valid != "ok":
            return valid
        disk.register_server(config["uid"], name, config)
    result = supervisor.start_child(handle.names["server_sup_sup"], [{**config, "system": system}])
    match result:
        case ("ok", _pid) | ("ok", _pid, _):
            return "ok"
        case ("error", ("shutdown", ("failed_to_start_child", _, reason))):
            return ("error", reason)
    return result


def restart_server_local(system: str, name: str, mutable: dict[str, Any] | None) -> Any:
    """Re-read the persisted config (mutable keys may be overridden) and start."""
    handle = lookup(actors.get_node(), system)
    if handle is None:
        return ("error", "system_not_started")
    persisted = handle.disk.config_for(name)
    if persisted is None:
        return ("error", "name_not_registered")
    config = {**persisted, **(mutable or {})}
    return start_server_local(system, config, new=False)


def registered_servers_local(system: str) -> list[str]:
    """Names of the servers the system on this node has durable state for."""
    handle = lookup(actors.get_node(), system)
    return [] if handle is None else handle.disk.registered_names()


def stop_server_local(system: str, name: str) -> Any:
    """Terminate the member's ``ra_server_sup``; idempotent."""
    handle = lookup(actors.get_node(), system)
    if handle is None:
        return ("error", "system_not_started")
    entry = handle.directory.get(name)
    if entry is None or entry.parent is None:
        return "ok"
    sup_sup = handle.names["server_sup_sup"]
    try:
        supervisor.terminate_child(sup_sup, entry.parent)
    except CallExit:
        pass
    entry.pid = None
    entry.parent = None
    return "ok"


def force_delete_server_local(system: str, name: str) -> Any:
    """Stop the member and delete its data, meta and directory entries."""
    res = stop_server_local(system, name)
    handle = lookup(actors.get_node(), system)
    if handle is None:
        return res
    uid = handle.disk.uid_of(name)
    if uid is not None:
        handle.disk.forget(uid)
    handle.directory.pop(name, None)
    return "ok"


def rpc(node: str, fun: Callable[..., Any], *args: Any, timeout: int = 5000) -> Any:
    """``rpc:call``: run `fun(*args)` in a process on `node`; ``("badrpc", why)`` on failure."""
    me = actors.self()
    tag = actors.make_ref()

    def run() -> None:
        actors.send(me, (tag, fun(*args)))

    if node == actors.node():
        pid, ref = actors.spawn_monitor(run)
    else:
        pid, ref = actors.spawn_monitor(run, node=node)
    while True:
        msg = actors.receive(timeout, match=lambda m: isinstance(m, tuple) and (
            m[0] == tag or (m[0] == "DOWN" and m[1] == ref)))
        if msg is actors.TIMEOUT:
            actors.demonitor(ref, flush=True)
            actors.exit(pid, "kill")
            return ("badrpc", "timeout")
        if msg[0] == tag:
            actors.demonitor(ref, flush=True)
            return msg[1]
        return ("badrpc", "nodedown" if msg[4] == "noconnection" else msg[4])

