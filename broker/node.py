"""A warren node: the supervision tree under `warren_sup` (docs/broker.md).

```
warren_sup                   one_for_all, 0 / 1 s (rabbit_sup: a failed core child stops the node)
├── net                      node monitor: which peers are up (nodeup / nodedown)
├── queue_deleter            deletes the quorum queues this node leads once they expire
├── ra_systems_sup           the Ra system: WAL, segment writer, ra_server_sup_sup
├── warren_metadata_view     joins or forms the metadata cluster, keeps the node's copy
├── rabbit_alarm             memory and disk monitors -> alarm hub (cluster-wide)
├── rabbit_fifo_dlx_sup      simple_one_for_one: at-least-once dead-letter workers
├── rabbit_amqqueue_sup_sup  simple_one_for_one: one supervisor per classic queue, which
│                            restarts the queue's process when it crashes
├── amqp_listener            TCP acceptor -> one reader (connection tree) per connection
├── rabbit_mgmt_sup          the management plugin's HTTP API and Prometheus listeners
└── recorder                 history sink (only records when a history_dir is configured)
```

Children start in this order and stop in reverse. The `BrokerNode` object
keeps what the children share (the metadata view, the queue registry, the
channel context); `broker.running` finds it by node name, which is how operator
commands executed on the node (`broker.ctl`) reach it.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import actors
from actors import Node, gen_server
from actors.gen_server import GenServer
from broker import queue_expiry
from broker.alarms import ALARM_SERVER, AlarmServer
from broker.classic_directory import MetadataDirectory
from broker.config import NodeConfig
from broker.formation import form_or_join
from broker.limits import ReplicatedVhostLimits, peer_counter
from broker.metadata import CLUSTER_NAME, PROJECTION
from broker.queue_code import machine_for_code
from broker.registry import MetadataRegistry
from broker.running import RUNNING, broker_of
from broker.startup import posix_reason
from broker.store import Metadata, MetadataView, ProjectionServer
from broker.topology import ReplicatedTopology
from broker.users import ReplicatedUsers
from channel.connection.config import BrokerContext, Config
from channel.connection.listener import Listener
from channel.queue_types.classic import classic_store
from classic import queue_sup
from fifo.machine import SUPPORTED_VERSIONS
from ra import api
from ra import system as ra_system
from ra.durable import make_dirs, open_private
from ra.system import disk_system_config, registered_servers_local
from releases import RELEASES, lookup
from supervision import supervisor

__all__ = ["BrokerNode", "BrokerStartError"]

log = logging.getLogger("warren.broker")

SUP = "warren_sup"
NET = "warren_net"
RA_SYSTEM = "default"
#: Ra keys a node sets unless its config does. Ra leaves ``wal_max_entries`` undefined,
#: so its memtables hold a WAL file's entries until the file reaches 512 MiB; an entry
#: in Python memory costs more than its Erlang term, so a node rolls over every 16384
#: entries as well and a queue's backlog lives in segments, not in memory.
RA_DEFAULTS: dict[str, Any] = {"wal_max_entries": 16384}


def ra_system_config(config: NodeConfig) -> dict[str, Any]:
    """The Ra system config: durable in ``<data-dir>/ra`` when the node has a data dir
    (WAL, segments, snapshots, term and vote survive a restart), else in memory;
    with the node's ``ra`` keys over `RA_DEFAULTS` and the defaults of its release
    (WAL and segment keys only matter on disk)."""
    release = RELEASES.get(config.rabbitmq_version)
    defaults = {} if release is None else {
        "min_recovery_checkpoint_interval": release.quorum_min_recovery_checkpoint_interval}
    if config.data_dir is None:
        return {"name": RA_SYSTEM, **defaults, **config.ra}
    return disk_system_config(str(Path(config.data_dir) / "ra"), name=RA_SYSTEM,
                              **{**RA_DEFAULTS, **defaults, **config.ra})
DLX_SUP = "rabbit_fifo_dlx_sup"


class BrokerStartError(RuntimeError):
    """`warren_sup` did not start; `reason` is the supervisor's error reason."""

    def __init__(self, node: str, reason: Any) -> None:
        super().__init__(f"node {node} failed to start: {reason!r}")
        self.reason = reason


class _Flags:
    """A supervisor callback module with fixed flags and children."""

    def __init__(self, flags: Any, children: list[Any]) -> None:
        self.flags, self.children = flags, children

    def init(self, _args: Any) -> Any:
        return ("ok", (self.flags, self.children))


# ------------------------------------------------------------------ children


class NetServer(GenServer):
    """Keeps which nodes are connected (`net_kernel`'s view) for status commands."""

    def init(self, broker: BrokerNode) -> Any:
        actors.monitor_nodes(True)
        broker.up_nodes = set(actors.get_node().nodes())
        return ("ok", broker)

    def handle_info(self, msg: Any, broker: BrokerNode) -> Any:
        match msg:
            case ("nodeup", peer):
                broker.up_nodes.add(peer)
            case ("nodedown", peer):
                broker.up_nodes.discard(peer)
                log.warning("node %s down", peer)
                actors.spawn(broker.classic_directory.node_down, peer)
        return ("noreply", broker)


def _start_ra(config: dict[str, Any]) -> Any:
    result = supervisor.start_link(_Flags(("one_for_one", 1, 5), []), None,
                                   name=ra_system.SYSTEMS_SUP)
    if result[0] != "ok":
        return result
    started = ra_system.start(config)
    if started[0] != "ok":
        return ("error", ("ra_system", started))
    return result


class MetadataServer(ProjectionServer):
    """Forms or joins the metadata cluster in `init`, then keeps the node's copy."""

    def init(self, broker: BrokerNode) -> Any:  # type: ignore[override]  # starts from the node
        how = form_or_join(broker.config.all_nodes, RA_SYSTEM, broker.config.formation_timeout)
        result = api.local_query((CLUSTER_NAME, broker.node.name), lambda s: s, 5000)
        if result[0] == "ok":
            (index, _term), state = result[1]
            broker.view.update(index, state)
        broker.formation = how
        log.info("metadata store: %s", how)
        _recover_queue_members(broker)
        # transient classic queues of this node's earlier life are gone (a process:
        # the command's reply waits for this server to apply it)
        actors.spawn(broker.classic_directory.node_down, broker.node.name)
        return ("ok", broker.view)


def _recover_queue_members(broker: BrokerNode) -> None:
    """As ``rabbit_quorum_queue:recover`` at boot: restart every queue member this node
    has durable state for (a node without a data dir has none), on the ``rabbit_fifo``
    code of this node's release (the Ra system's ``machine_code``)."""
    me = broker.node.name
    for name in registered_servers_local(RA_SYSTEM):
        if name == CLUSTER_NAME or actors.whereis(name) is not None:
            continue
        result = api.restart_server(RA_SYSTEM, (name, me))
        if result != "ok":
            log.warning("queue member %s not restarted: %r", name, result)


class ListenerServer(GenServer):
    """The AMQP listener. A port it cannot bind stops the node's start with
    `rabbit_networking`'s reason, ``("could_not_start_listener", host, port, posix)``."""

    def init(self, broker: BrokerNode) -> Any:
        actors.process_flag("trap_exit", True)
        cfg = broker.config
        try:
            broker.listener = Listener(broker.ctx, cfg.amqp_host, cfg.amqp_port).start()
        except OSError as exc:
            return ("stop", ("could_not_start_listener", cfg.amqp_host, cfg.amqp_port,
                             posix_reason(exc)))
        return ("ok", broker)

    def terminate(self, _reason: Any, broker: BrokerNode) -> None:
        if broker.listener is not None:
            broker.listener.stop()


class RecorderServer(GenServer):
    """Installs the history recorder as the node's trace sink while it runs."""

    def init(self, broker: BrokerNode) -> Any:
        actors.process_flag("trap_exit", True)
        cfg = broker.config
        if cfg.history_dir is None:
            return ("ok", None)
        from actors import trace
        from analysis.recorder import Recorder
        from analysis.sampler import Sampler

        if cfg.state_digest_every is not None:
            from fifo import replica_trace

            replica_trace.set_digest_every(cfg.state_digest_every)
        recorder = Recorder(cfg.history_dir, cfg.run_id, broker.node.name)
        trace.set_sink(recorder.sink)
        sampler = Sampler(broker.node, broker.open_channels, emit=trace.emit).start()
        return ("ok", (recorder, sampler))

    def terminate(self, _reason: Any, state: Any) -> None:
        if state is not None:
            from actors import trace

            recorder, sampler = state
            sampler.stop()
            trace.set_sink(None)
            recorder.close()


def _start_dlx_worker(queue_ref: Any, server_id: Any) -> Any:
    """A `rabbit_fifo_dlx_worker` under this node's `rabbit_fifo_dlx_sup`."""
    from fifo import dlx_worker

    env = broker_of().dlx_env
    if env is None:
        return ("error", "no_dead_letter_router")
    return gen_server.start_link(dlx_worker.DlxWorker, (env, queue_ref, server_id))


def _start_gen(module: Any, arg: Any, name: str) -> Any:
    return gen_server.start_link(module, arg, name=name)


def _gen(module: Any, arg: Any, name: str) -> dict[str, Any]:
    return {"id": name, "start": (_start_gen, [module, arg, name])}


# --------------------------------------------------------------------- node


Plugin = Callable[["BrokerNode"], list[dict[str, Any]]]
"""An enabled plugin: the child specs it adds to `warren_sup` for a node."""


class BrokerNode:
    """One node: its config, shared objects and supervision tree."""

    def __init__(self, config: NodeConfig, node: Node, plugins: Sequence[Plugin] = ()) -> None:
        self.config = config
        self.node = node
        self.plugins = tuple(plugins)
        self.view = MetadataView()
        self.metadata = Metadata(node.name, self.view, config.all_nodes)
        self.topology = ReplicatedTopology(self.metadata)
        #: the RabbitMQ release this node behaves as; the channel side reads it from
        #: its config, the queues it starts from the registry
        self.release = lookup(config.rabbitmq_version, SUPPORTED_VERSIONS)
        self.registry = MetadataRegistry(self.metadata, self.release, RA_SYSTEM,
                                         config.quorum_cluster_size)
        #: the cluster's classic queues, by (vhost, name)
        self.classic_directory = MetadataDirectory(self.metadata)
        self.up_nodes: set[str] = set()
        self.formation = ""
        self.listener: Any = None
        #: `fifo.dlx_worker.DlxWorkerEnv` with the broker's dead-letter router (`rabbit` backend)
        self.dlx_env: Any = None
        #: `channel.queue_types.quorum.qq_dead_letter.DeadLetterPublisher` (`rabbit` backend):
        #: at-most-once
        self.dead_letter_publisher: Any = None
        self.backend = _make_backend(config.backend, self)
        self._wire_dead_lettering()
        amqp = Config(**config.amqp, release=self.release)
        self.ctx = BrokerContext(node, self.backend, amqp, topology=self.topology,
                                 users=ReplicatedUsers(self.metadata),
                                 vhost_limits=ReplicatedVhostLimits(self.metadata))
        self.ctx.peer_count = peer_counter(self)
        self.sup: Any = None
        #: the ports the management child bound (None: not serving)
        self.management_port: int | None = None
        self.prometheus_port: int | None = None

    def open_channels(self) -> int:
        """AMQP channels open on this node's connections (the history's `samples`)."""
        return sum(len(r.channels) for r in list(self.ctx.readers.values()))

    def _wire_dead_lettering(self) -> None:
        """Quorum queues dead-letter through this node's exchanges: at-most-once in the
        source leader's hook, at-least-once by a worker under `rabbit_fifo_dlx_sup`."""
        from channel.queue_types.quorum.quorum_queue import QuorumBackend

        if not isinstance(self.backend, QuorumBackend):
            return
        from channel.queue_types.quorum.qq_dead_letter import DeadLetterPublisher
        from channel.queue_types.quorum.qq_dlx_router import router_factory
        from fifo.dlx_worker import DlxWorkerEnv

        self.dead_letter_publisher = DeadLetterPublisher(self.topology, self.registry,
                                                         self.backend.classic)
        self.dlx_env = DlxWorkerEnv(
            router_factory(self.backend, self.topology),
            prefetch=self.config.dead_letter_worker_consumer_prefetch,
            settle_timeout=self.config.dead_letter_worker_publisher_confirm_timeout)

    def ra_config(self) -> dict[str, Any]:
        """The Ra system config; every member on this node runs the ``rabbit_fifo``
        code of the node's release (`broker.queue_code`), whoever started it."""
        return {**ra_system_config(self.config),
                "machine_code": partial(machine_for_code,
                                        code_version=self.release.machine_version)}

    def children(self) -> list[dict[str, Any]]:
        data_dir = self.config.data_dir or "."
        dlx = _Flags(("simple_one_for_one", 10, 10), [
            {"id": "rabbit_fifo_dlx_worker", "start": (_start_dlx_worker, []),
             "restart": "temporary"}])
        return [
            # the recorder first: what Ra recovers at boot is history too
            _gen(RecorderServer, self, "recorder"),
            _gen(NetServer, self, NET),
            *queue_expiry.child_specs(self.backend),
            {"id": "ra_systems_sup", "type": "supervisor",
             "start": (_start_ra, [self.ra_config()])},
            {**_gen(MetadataServer, self, PROJECTION), "shutdown": 5000},
            _gen(AlarmServer, (self.ctx.alarm, data_dir, self.config.all_nodes),
                 ALARM_SERVER),
            {"id": DLX_SUP, "type": "supervisor",
             "start": (supervisor.start_link, [dlx, None, DLX_SUP])},
            queue_sup.child_spec(),
            *classic_store.child_specs(self.backend, self.config.data_dir,
                                       self.release.classic_confirm_after_fsync),
            _gen(ListenerServer, self, "amqp_listener"),
            *self._plugin_children(),
        ]

    def _plugin_children(self) -> list[dict[str, Any]]:
        """The enabled plugins' children, after the core's as RabbitMQ starts its
        plugins' applications; the command starting the node hands the plugins in
        (they sit above `broker` in the layers)."""
        return [spec for plugin in self.plugins for spec in plugin(self)]

    def start(self) -> BrokerNode:
        """Start `warren_sup` (from a process of the node); blocks until formed.

        A child that fails to start stops the children started before it, and this
        raises `BrokerStartError` with the supervisor's reason; the calling process
        lives on (it traps the supervisor's exit while starting it)."""
        RUNNING[self.node.name] = self
        if self.dlx_env is not None:
            from channel.queue_types.quorum import qq_dead_letter

            qq_dead_letter.install(self.node.name, self.dead_letter_publisher)
        sup = _Flags(("one_for_all", 0, 1), self.children())
        trapping = actors.process_flag("trap_exit", True)
        try:
            result = supervisor.start_link(sup, None, name=SUP)
        finally:
            actors.process_flag("trap_exit", trapping)
        if result[0] != "ok":
            RUNNING.pop(self.node.name, None)
            if self.dlx_env is not None:
                from channel.queue_types.quorum import qq_dead_letter

                qq_dead_letter.uninstall(self.node.name)
            raise BrokerStartError(self.node.name, result[1] if len(result) > 1 else result)
        self.sup = result[1]
        return self

    @property
    def amqp_port(self) -> int:
        return int(self.listener.port) if self.listener is not None else self.config.amqp_port

    def write_ready(self) -> None:
        """`<data_dir>/ready`: what scripts wait for (node, AMQP port, creation)."""
        if self.config.data_dir is None:
            return
        import json

        path = Path(self.config.data_dir)
        make_dirs(str(path))
        tmp = path / "ready.tmp"
        fd = open_private(str(tmp), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps({"node": self.node.name, "amqp_port": self.amqp_port,
                                "creation": self.node.creation, "formation": self.formation,
                                "management_port": self.management_port,
                                "prometheus_port": self.prometheus_port}))
        tmp.replace(path / "ready")


def _make_backend(spec: str, broker: BrokerNode) -> Any:
    """The queue backend `spec` names (`broker.backends.NAMES`, or `module:factory`)."""
    from broker.backends import NAMES, canonical

    factory = NAMES.get(canonical(spec), spec)
    module, _, attr = factory.partition(":")
    return getattr(importlib.import_module(module), attr)(broker)
