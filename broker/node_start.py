"""The `warren` command line.

    warren demo                       three node processes, a ring of messages,
                                      a SIGKILL, a restart (the foundation demo)
    warren node start --name N@H:P    run one broker node until SIGTERM / SIGINT
        [--amqp-port P] [--data-dir D] [--peers a@h:p,b@h:p] [--config FILE]
        [--bare]                      (just the node and its links, as the demo uses)
    warren ctl --node N@H:P COMMAND   operate a running cluster (see broker.ctl)
    warren scenario list | run NAME   a local cluster, a workload, faults, the verdict
    warren analyze RUN_DIR            check a recorded run on Spark and write a report
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Callable
from typing import Any

import gevent

from actors import Node
from transports.tick import TickConfig

EX_USAGE = 64


def make_node(name: str, ticktime: float, data_dir: str | None = None,
              cookie: str | None = None, io: str | None = None) -> Node:
    """A node on the ZeroMQ transport, authenticated with the cookie."""
    from transports.zmq import ZmqTransport

    transport = ZmqTransport(tick=TickConfig(net_ticktime=ticktime), cookie=cookie, io=io)
    return Node(name, transport=transport, data_dir=data_dir).start()


def _node_config(args: argparse.Namespace) -> Any:
    """The node's configuration: the file's keys, the flags' text over them; both
    checked by `broker.config_schema`."""
    from broker import config

    flags = {"name": args.name, "amqp_port": args.amqp_port, "data_dir": args.data_dir,
             "peers": args.peers, "net_ticktime": args.net_ticktime, "backend": args.backend,
             "cookie": args.cookie, "rabbitmq_version": args.rabbitmq_version}
    return config.load(args.config, flags)


def _open_node(cfg: Any) -> Node:
    """The node with its distribution port bound; `StartupError` when the port is not
    free (a node of this name already runs, say), with nothing left running."""
    import zmq

    from broker.startup import distribution_failure
    from transports.zmq import ZmqTransport, node_process_io

    transport = ZmqTransport(tick=TickConfig(net_ticktime=cfg.net_ticktime),
                             cookie=cfg.cookie, io=node_process_io())
    node = Node(cfg.name, transport=transport, data_dir=cfg.data_dir)
    try:
        return node.start()
    except zmq.ZMQError as exc:
        node.stop("shutdown")
        raise distribution_failure(cfg.name, exc) from None


def _start_broker(cfg: Any, node: Node) -> Any:
    """`BrokerNode.start` from a process of `node`; `StartupError` when it fails."""
    from broker.node import BrokerNode, BrokerStartError
    from broker.startup import EX_SOFTWARE, StartupError, listener_failure

    try:
        return BrokerNode(cfg, node).start()
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
    from broker.held_log import HeldLog
    from broker.startup import EX_CONFIG, EX_SOFTWARE, StartupError

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
    from actors.gc_policy import tune_node_process
    from broker.config import ConfigError
    from broker.startup import prepare_data_dir

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
            broker = _start_broker(cfg, node)
            broker.write_ready()
            up()
            print(f"ready {node.creation} {broker.amqp_port} {broker.formation}", flush=True)
            log.info("node %s up (creation %d)", node.name, node.creation)
            stop.wait()
            import actors

            actors.unlink(broker.sup)
            actors.exit(broker.sup, "shutdown")
            gevent.sleep(0.2)
    finally:
        node.stop("shutdown")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from broker import demo

    print("warren demo: three nodes on 127.0.0.1")
    return demo.run(lambda name, tick: make_node(name, tick), ticktime=args.net_ticktime)


def main(argv: list[str] | None = None) -> int:
    from broker import ctl

    parser = argparse.ArgumentParser(prog="warren", description="warren: quorum queues, modelled")
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="three nodes exchange messages and survive a SIGKILL")
    demo.add_argument("--net-ticktime", type=float, default=2.0,
                      help="seconds (Erlang's net_ticktime; default 2 for the demo)")
    demo.set_defaults(func=_demo)

    node = sub.add_parser("node", help="node commands")
    node_sub = node.add_subparsers(dest="node_command", required=True)
    start = node_sub.add_parser("start", help="run one broker node")
    start.add_argument("--name", default=None, help="name@host:port")
    start.add_argument("--config", default=None, help="JSON or TOML file with the same keys")
    # flags are read as text and checked with the file's keys (broker.config_schema)
    start.add_argument("--amqp-port", default=None)
    start.add_argument("--data-dir", default=None)
    start.add_argument("--peers", default=None, help="comma-separated node names")
    start.add_argument("--net-ticktime", default=None)
    start.add_argument("--backend", default=None, help="memory | quorum | module:factory")
    start.add_argument("--cookie", default=None)
    start.add_argument("--rabbitmq-version", default=None,
                       help="the RabbitMQ release to behave as (default: the newest modelled)")
    start.add_argument("--bare", action="store_true",
                       help="only the node and its links: no broker (what the demo runs)")
    start.set_defaults(func=_node_start)

    ctl.add_parser(sub)
    from analysis import cli as analysis_cli
    from analysis import compact, jvm_archive
    from harness import cli as harness_cli

    harness_cli.add_parser(sub)
    analysis_cli.add_parser(sub)
    compact.add_parser(sub)
    jvm_archive.add_parser(sub)

    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: 2 on bad usage; rabbitmqctl uses 64
        return EX_USAGE if exc.code not in (0, None) else 0
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
