"""`warren analyze`: check a recorded run and report on it.

    warren analyze RUN_DIR [--out DIR] [--master URL] [--conf k=v ...] [--checks a,b]
    warren analyze RUN_DIR --synthetic SEED [--anomalies lose,duplicate]

A run directory holding only raw segments is compacted first. `--synthetic` writes a
generated three-node run into RUN_DIR (recorded and compacted like a real one) and
analyses it, so the report can be seen without a cluster.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from analysis import compact, model, synthetic, uris
from analysis.model import EXIT_BAD_INPUT, EXIT_ERROR

log = logging.getLogger("warren.analysis")


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register `analyze` on the `warren` command's subparsers."""
    p = subparsers.add_parser("analyze", help="check a recorded run (PySpark) and write a report",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", help="run directory (with history/ or raw/): a path or a URI "
                   "(file://, or hdfs:// / s3a:// read by Spark)")
    p.add_argument("--out", default=None, help="output directory: a path, a file:// URI, or "
                   "a URI Spark writes to, such as hdfs:// or s3a:// (default RUN_DIR/analysis)")
    p.add_argument("--master", default=None,
                   help="Spark master URL (default $WARREN_SPARK_MASTER or local[*])")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="extra Spark setting, repeatable")
    p.add_argument("--checks", default="",
                   help="comma-separated subset of checks (default all): " + ",".join(model.CHECKS))
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="checks run at once (default: local cores + 1, at most 4)")
    p.add_argument("--ack-grace", type=float, default=5.0, help="seconds (default 5)")
    p.add_argument("--flow-grace", type=float, default=30.0, help="seconds (default 30)")
    p.add_argument("--bucket", type=float, default=1.0, help="metrics bucket seconds")
    p.add_argument("--synthetic", type=int, default=None, metavar="SEED",
                   help="generate a synthetic run into RUN_DIR first")
    p.add_argument("--messages", type=int, default=200, help="messages of a synthetic run")
    p.add_argument("--anomalies", default="",
                   help="comma-separated anomalies for --synthetic: "
                   + ",".join(synthetic.ANOMALIES))
    p.set_defaults(func=run)
    return p


def _conf(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"--conf expects KEY=VALUE, got {pair!r}")
        out[key] = value
    return out


def run(args: argparse.Namespace) -> int:
    """Handler of `warren analyze`; returns the exit code."""
    remote = uris.is_remote(args.run_dir)
    try:
        # a file:// URI is a local path; other schemes go to Spark as given
        run_dir: Any = args.run_dir if remote else uris.local_path(args.run_dir)
        # an --out of another scheme gets the outputs through Spark (`analysis.uris`)
        out_arg: Any = (None if args.out is None else args.out if uris.is_remote(args.out)
                        else uris.local_path(args.out))
        if remote and args.synthetic is not None:
            raise ValueError("a history read by Spark from a URI cannot be --synthetic")
        if args.synthetic is not None:
            anomalies = tuple(a for a in args.anomalies.split(",") if a)
            unknown = set(anomalies) - set(synthetic.ANOMALIES)
            if unknown:
                raise ValueError(f"unknown anomalies: {sorted(unknown)}")
            synthetic.write_run(run_dir, synthetic.generate(args.synthetic, args.messages,
                                                            anomalies))
        if not remote and not run_dir.is_dir():
            raise FileNotFoundError(f"run directory {run_dir} does not exist")
        if not remote and not (run_dir / "history").is_dir() and (run_dir / "raw").is_dir():
            compact.compact(run_dir)
        conf = _conf(args.conf)
        if args.workers is not None and args.workers < 1:
            raise ValueError(f"--workers must be at least 1, not {args.workers}")
        only = [c for c in args.checks.split(",") if c]
        if set(only) - set(model.CHECKS):
            raise ValueError(f"unknown checks: {sorted(set(only) - set(model.CHECKS))}")
        params = model.Params(ack_grace_ns=int(args.ack_grace * model.NS),
                              flow_grace_ns=int(args.flow_grace * model.NS),
                              bucket_ns=int(args.bucket * model.NS))
        from analysis import load, spark

        spark.check_java()
        expected_rows = None if remote else load.history_rows(run_dir / "history")
    except Exception as exc:  # every input problem maps to one exit code
        print(f"warren analyze: bad input: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        from analysis.analyze import analyze_run, format_table

        out = out_arg or uris.join(run_dir, "analysis")
        # Spark's scratch space is local: beside local outputs, else Spark's default
        scratch = None if uris.is_remote(out) else str(uris.local_path(out) / "spark-tmp")
        session = spark.get_session(args.master, conf=conf, local_dir=scratch,
                                    expected_rows=expected_rows)
        if remote:
            uris.check_reachable(session, str(run_dir), must_exist=True)
        if uris.is_remote(out):
            uris.check_reachable(session, str(out), must_exist=False)
        code, summary = analyze_run(session, run_dir, out, params, only or None,
                                    workers=args.workers)
    except (load.BadInput, uris.Unreachable) as exc:
        print(f"warren analyze: bad input: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception:
        log.exception("analysis failed")
        print("warren analyze: analysis error (see log above)", file=sys.stderr)
        return EXIT_ERROR
    rows = [{"check": k, **{c: v.get(c) for c in ("status", "examined", "violations", "note")},
             "sample": ",".join(str(s) for s in v.get("sample", []))}
            for k, v in summary["checks"].items()]
    print(format_table(rows))
    print(f"\nvalid: {summary['valid']}   report: {uris.join(out, 'report.html')}")
    return code


def main(argv: list[str] | None = None) -> int:
    """Standalone entry (`python -m analysis.cli`) until `warren` wires the subcommand."""
    parser = argparse.ArgumentParser(prog="warren")
    sub = parser.add_subparsers(dest="command", required=True)
    add_parser(sub)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
