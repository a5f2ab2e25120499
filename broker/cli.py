"""The `warren` command line.

    warren demo                       three node processes, a ring of messages,
                                      a SIGKILL, a restart (the foundation demo)
    warren node start --name N@H:P    run one node until SIGTERM / SIGINT
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys

import gevent

from actors import Node
from transports.tick import TickConfig


def make_node(name: str, ticktime: float, data_dir: str | None = None) -> Node:
    """A node on the ZeroMQ transport, authenticated with the cookie."""
    from transports.zmq import ZmqTransport

    transport = ZmqTransport(tick=TickConfig(net_ticktime=ticktime))
    return Node(name, transport=transport, data_dir=data_dir).start()


def _node_start(args: argparse.Namespace) -> int:
    node = make_node(args.name, args.net_ticktime, args.data_dir)
    stop = gevent.event.Event()
    gevent.signal_handler(signal.SIGTERM, stop.set)
    gevent.signal_handler(signal.SIGINT, stop.set)
    logging.getLogger("warren").info("node %s up (creation %d)", node.name, node.creation)
    stop.wait()
    node.stop("shutdown")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from broker import demo

    print("warren demo: three nodes on 127.0.0.1")
    return demo.run(lambda name, tick: make_node(name, tick), ticktime=args.net_ticktime)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="warren", description="warren: quorum queues, modelled")
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="three nodes exchange messages and survive a SIGKILL")
    demo.add_argument("--net-ticktime", type=float, default=2.0,
                      help="seconds (Erlang's net_ticktime; default 2 for the demo)")
    demo.set_defaults(func=_demo)

    node = sub.add_parser("node", help="node commands")
    node_sub = node.add_subparsers(dest="node_command", required=True)
    start = node_sub.add_parser("start", help="run one node")
    start.add_argument("--name", required=True, help="name@host:port")
    start.add_argument("--data-dir", default=None)
    start.add_argument("--net-ticktime", type=float, default=60.0)
    start.set_defaults(func=_node_start)

    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
