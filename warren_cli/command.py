"""The `warren` command: one parser, a subcommand from each package that offers one."""

from __future__ import annotations

import argparse
import logging

from analysis import cli as analysis_cli
from analysis import compact, jvm_archive
from broker import ctl, node_start
from harness import cli as harness_cli
from management.plugin import plugin as management_plugin
from warren_cli import demo

__all__ = ["EX_USAGE", "main"]

#: bad usage, as rabbitmqctl exits (argparse's own is 2)
EX_USAGE = 64


def parser() -> argparse.ArgumentParser:
    """The whole command: `demo`, `node start`, `ctl`, `scenario`, `analyze`,
    `history`, `spark-archive`."""
    top = argparse.ArgumentParser(prog="warren", description="warren: quorum queues, modelled")
    top.add_argument("-v", "--verbose", action="store_true")
    sub = top.add_subparsers(dest="command", required=True)
    demo.add_parser(sub)
    node_start.add_parser(sub, plugins=(management_plugin,))
    ctl.add_parser(sub)
    harness_cli.add_parser(sub)
    analysis_cli.add_parser(sub)
    compact.add_parser(sub)
    jvm_archive.add_parser(sub)
    return top


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:  # argparse: 2 on bad usage; rabbitmqctl uses 64
        return EX_USAGE if exc.code not in (0, None) else 0
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    return int(args.func(args))
