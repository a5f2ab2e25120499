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
from typing import Any

import gevent

from actors import Node
from transports.tick import TickConfig

EX_USAGE = 64
EX_CONFIG = 78


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
             "cookie": args.cookie}
    return config.load(args.config, flags)


def _node_start(args: argparse.Namespace) -> int:
    from actors.gc_policy import tune_node_process
    from broker.config import ConfigError
    from broker.node import BrokerNode

    try:
        cfg = _node_config(args)
    except ConfigError as exc:
        print(f"warren: {exc}", file=sys.stderr)
        return EX_CONFIG
    try:
        tune_node_process()
    except ValueError as exc:  # WARREN_GC_THRESHOLDS unreadable: named in the text
        print(f"warren: {exc}", file=sys.stderr)
        return EX_CONFIG
    from transports.zmq import node_process_io

    node = make_node(cfg.name, cfg.net_ticktime, cfg.data_dir, cfg.cookie, io=node_process_io())
    stop = gevent.event.Event()
    gevent.signal_handler(signal.SIGTERM, stop.set)
    gevent.signal_handler(signal.SIGINT, stop.set)
    log = logging.getLogger("warren")
    if args.bare:
        log.info("node %s up (creation %d)", node.name, node.creation)
        stop.wait()
        node.stop("shutdown")
        return 0
    with node.attached():
        try:
            broker = BrokerNode(cfg, node).start()
        except Exception as exc:
            print(f"failed {exc}", flush=True)
            node.stop("shutdown")
            return 1
        broker.write_ready()
        print(f"ready {node.creation} {broker.amqp_port} {broker.formation}", flush=True)
        log.info("node %s up (creation %d)", node.name, node.creation)
        stop.wait()
        import actors

        actors.unlink(broker.sup)
        actors.exit(broker.sup, "shutdown")
        gevent.sleep(0.2)
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
