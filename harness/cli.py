"""`warren scenario`: list the scenarios, or run one end to end.

    warren scenario list
    warren scenario run NAME [--run-dir D] [--nodes N] [--duration S] [--seed K]
                             [--state-digest-every K] [--backend rabbit|memory]
                             [--rabbitmq-version 3.10|4.0|4.2|4.3] [--no-analyze]
    warren scenario compare RUN_DIR RUN_DIR... [--out DIR]

The exit status of `run` is the runner's (see `harness.runner`): 0 when the
analysis agrees with what the scenario expects. `compare` puts runs of one scenario
side by side (typically one per `--rabbitmq-version`): throughput, latency, memory
per message, and where deliveries and their `x-delivery-count` differ; it prints the
table and writes `compare.html` and `compare.json` into `--out` (default: the
current directory). Exit 0, or 64 for bad input.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

from releases import RELEASES

__all__ = ["add_parser", "main"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `scenario` on the `warren` command's subparsers."""
    p = subparsers.add_parser("scenario", help="run fault-injection scenarios on a local cluster",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="scenario_command", required=True)
    sub.add_parser("list", help="the scenarios and what they do").set_defaults(func=_list)
    run = sub.add_parser("run", help="run one scenario and analyse it")
    run.add_argument("name")
    run.add_argument("--run-dir", default=None, help="default: a new temporary directory")
    run.add_argument("--nodes", type=int, default=None, help="cluster size")
    run.add_argument("--duration", type=float, default=None,
                     help="workload seconds (fault times scale with it)")
    run.add_argument("--seed", type=int, default=0, help="seed of the nemesis's choices")
    run.add_argument("--state-digest-every", type=int, default=None, metavar="K",
                     help="record a replica state digest every K log indexes "
                          "(default: the scenario's, 1)")
    run.add_argument("--backend", default="rabbit",
                     help="node queue backend: rabbit (default; quorum is its former name) "
                          "or memory")
    run.add_argument("--rabbitmq-version", default=None, metavar="V",
                     help="the RabbitMQ release every node models: "
                          + ", ".join(RELEASES) + " (default: the nodes' own)")
    run.add_argument("--no-analyze", dest="analyze", action="store_false",
                     help="record and compact only")
    run.set_defaults(func=_run)
    compare = sub.add_parser("compare", help="runs of one scenario side by side")
    compare.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    compare.add_argument("--out", default=".", help="where compare.html and compare.json go")
    compare.set_defaults(func=_compare)
    return p


def _list(_args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from harness.scenarios import SCENARIOS

    table = Table(title="warren scenarios")
    table.add_column("name", no_wrap=True)
    for col in ("nodes", "seconds", "faults", "description"):
        table.add_column(col)
    for s in SCENARIOS.values():
        faults = ", ".join(sorted({f.fault for f in s.faults})) or "-"
        table.add_row(s.name, str(s.nodes), f"{s.duration_s:g}", faults, s.description)
    Console().print(table)
    return 0


def _run(args: argparse.Namespace) -> int:
    from harness.runner import run_scenario
    from harness.scenarios import SCENARIOS

    scenario = SCENARIOS.get(args.name)
    if scenario is None:
        print(f"unknown scenario {args.name!r}; known: {', '.join(SCENARIOS)}",
              file=sys.stderr)
        return 64
    scenario = scenario.scaled(args.duration, args.nodes)
    if args.state_digest_every is not None:
        scenario = dataclasses.replace(scenario, state_digest_every=args.state_digest_every)
    errors = scenario.validate()
    if args.rabbitmq_version is not None and args.rabbitmq_version not in RELEASES:
        errors.append(f"--rabbitmq-version {args.rabbitmq_version!r}: "
                      f"one of {', '.join(RELEASES)}")
    if errors:
        print("invalid scenario: " + "; ".join(errors), file=sys.stderr)
        return 64
    result = run_scenario(scenario, args.run_dir, seed=args.seed, analyze=args.analyze,
                          backend=args.backend, rabbitmq_version=args.rabbitmq_version)
    return result.exit_code


def _compare(args: argparse.Namespace) -> int:
    from pathlib import Path

    from analysis import compare, compare_load, compare_report

    try:
        runs = [compare_load.load_run(Path(d)) for d in args.run_dirs]
    except (OSError, ValueError) as exc:
        print(f"warren scenario compare: bad input: {exc}", file=sys.stderr)
        return 64
    result = compare.compare(runs)
    print(compare_report.format_text(result))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    compare_report.write_outputs(result, out)
    print(f"report: {out / 'compare.html'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Standalone entry (`python -m harness.cli scenario ...`)."""
    parser = argparse.ArgumentParser(prog="warren")
    add_parser(parser.add_subparsers(dest="command", required=True))
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 64 if exc.code not in (0, None) else 0
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
