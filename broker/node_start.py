"""`warren node start`: run one broker node in this OS process until told to stop.

    warren node start --name N@H:P    run one broker node until SIGTERM / SIGINT
        [--amqp-port P] [--data-dir D] [--peers a@h:p,b@h:p] [--config FILE]
        [--bare]                      (just the node and its links, as the demo uses)

The `warren` command (`warren_cli`) registers this subcommand with `add_parser`,
as it registers `broker.ctl`'s. A node that cannot start says why in one line on
stderr and exits with `broker.startup`'s status.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any

import gevent

import actors
from actors import Node
from actors.gc_policy import tune_node_process
from broker.held_log import HeldLog
from broker.startup import (
    EX_CONFIG,
    EX_SOFTWARE,
    StartupError,
    distribution_failure,
    listener_failure,
    prepare_data_dir,
)
from transports.tick import TickConfig

__all__ = ["add_parser"]


def _node_config(args: argparse.Namespace) -> Any:
    """The node's configuration: the file's keys, the flags' text over them; both
    checked by `broker.config_schema`."""
    from broker import config

    flags = {"name": args.name, "amqp_port": args.amqp_port, "data_dir": args.data_dir,
             "peers": args.peers, "net_ticktime": args.net_ticktime, "backend": args.backend,
             "cookie": args.cookie, "rabbitmq_version": args.rabbitmq_version,
             "management_port": args.management_port, "prometheus_port": args.prometheus_port}
    return config.load(args.config, flags)


def _open_node(cfg: Any) -> Node:
    """The node with its distribution port bound; `StartupError` when the port is not
    free (a node of this name already runs, say), with nothing left running."""
    import zmq

    from transports.zmq import ZmqTransport, node_process_io

    transport = ZmqTransport(tick=TickConfig(net_ticktime=cfg.net_ticktime),
                             cookie=cfg.cookie, io=node_process_io())
    node = Node(cfg.name, transport=transport, data_dir=cfg.data_dir)
    try:
        return node.start()
    except zmq.ZMQError as exc:
        node.stop("shutdown")
        raise distribution_failure(cfg.name, exc) from None


def _start_broker(cfg: Any, node: Node, plugins: Sequence[Any] = ()) -> Any:
    """`BrokerNode.start` from a process of `node`, with the enabled `plugins`;
    `StartupError` when it fails."""
    from broker.node import BrokerNode, BrokerStartError

    try:
        return BrokerNode(cfg, node, plugins).start()
    except BrokerStartError as exc:
        known = listener_failure(exc.reason)
        if known is not None:
            raise known from None
        raise StartupError(f"node {cfg.name} failed to start: {exc.reason!r}",
                           EX_SOFTWARE) from None


def _node_start(args: argparse.Namespace) -> int:
    """Run one node until SIGTERM / SIGINT. A node that cannot start prints one line
    (``warren: ...``) on stderr and exits with `broker.startup`'s status, having
    written no ``ready`` line or file; its log up to then is held (`broker.held_log`)."""
    from broker.config import ConfigError

    held = HeldLog()
    if not args.verbose:
        held.hold()
    try:
        return _run_node(args, lambda: held.release(write=True))
    except ConfigError as exc:
        held.release(write=False)
        print(f"warren: {exc}", file=sys.stderr, flush=True)
        return EX_CONFIG
    except StartupError as exc:
        held.release(write=False)
        print(f"warren: {exc}", file=sys.stderr, flush=True)
        return exc.code
    except Exception as exc:  # the start's own bug: its log, one line, the traceback with -v
        held.release(write=True)
        logging.getLogger("warren").debug("node start failed", exc_info=True)
        text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
        print(f"warren: cannot start the node: {text}", file=sys.stderr, flush=True)
        return EX_SOFTWARE


def _run_node(args: argparse.Namespace, up: Callable[[], None]) -> int:
    """Start the node (`up` is called once it is), then run it until told to stop."""
    from broker.config import ConfigError

    cfg = _node_config(args)
    try:
        tune_node_process()
    except ValueError as exc:  # WARREN_GC_THRESHOLDS unreadable: named in the text
        raise ConfigError(str(exc)) from None
    if cfg.data_dir is not None:
        prepare_data_dir(cfg.data_dir)
    node = _open_node(cfg)
    stop = gevent.event.Event()
    gevent.signal_handler(signal.SIGTERM, stop.set)
    gevent.signal_handler(signal.SIGINT, stop.set)
    log = logging.getLogger("warren")
    if args.bare:
        up()
        log.info("node %s up (creation %d)", node.name, node.creation)
        stop.wait()
        node.stop("shutdown")
        return 0
    try:
        with node.attached():
            broker = _start_broker(cfg, node, args.plugins)
            broker.write_ready()
            up()
            print(f"ready {node.creation} {broker.amqp_port} {broker.formation}", flush=True)
            log.info("node %s up (creation %d)", node.name, node.creation)
            stop.wait()
            actors.unlink(broker.sup)
            actors.exit(broker.sup, "shutdown")
            gevent.sleep(0.2)
    finally:
        node.stop("shutdown")
    return 0


def add_parser(subparsers: argparse._SubParsersAction,
               plugins: Sequence[Any] = ()) -> argparse.ArgumentParser:
    """Register `node start` on the `warren` command's subparsers; the nodes it starts
    run the `plugins` (`broker.node.Plugin`) the command enables."""
    node = subparsers.add_parser("node", help="node commands")
    node_sub = node.add_subparsers(dest="node_command", required=True)
    start = node_sub.add_parser("start", help="run one broker node")
    start.add_argument("--name", default=None, help="name@host:port")
    start.add_argument("--config", default=None, help="JSON or TOML file with the same keys")
    # flags are read as text and checked with the file's keys (broker.config_schema)
    start.add_argument("--amqp-port", default=None)
    start.add_argument("--data-dir", default=None)
    start.add_argument("--peers", default=None, help="comma-separated node names")
    start.add_argument("--net-ticktime", default=None)
    start.add_argument("--backend", default=None,
                       help="rabbit (default: quorum and classic queues; quorum is its "
                            "former name) | memory (test stand-in) | module:factory")
    start.add_argument("--cookie", default=None)
    start.add_argument("--rabbitmq-version", default=None,
                       help="the RabbitMQ release to behave as (default: the newest modelled)")
    start.add_argument("--management-port", default=None,
                       help="serve RabbitMQ's HTTP API here (15672 as RabbitMQ; 0: free port)")
    start.add_argument("--prometheus-port", default=None,
                       help="serve Prometheus metrics here (15692 as RabbitMQ; 0: free port)")
    start.add_argument("--bare", action="store_true",
                       help="only the node and its links: no broker (what the demo runs)")
    start.set_defaults(func=_node_start, plugins=tuple(plugins))
    return node
