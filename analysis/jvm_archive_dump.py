"""The child process that records Spark's classes for `analysis.jvm_archive`.

Why a module of its own: recording means running a real analysis (a synthetic
history through every check) in a JVM started with ``-XX:ArchiveClassesAtExit``.
That pulls in the check runner and the Spark session, which themselves look up the
archive through `analysis.jvm_archive`; kept here, the archive's locator stays below
the session and this module sits above both. `jvm_archive.build` runs it as
``python -m analysis.jvm_archive_dump --dump-to FILE``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from analysis import load, model, runner, synthetic
from analysis.checks import ALL
from analysis.jvm_archive import BUILD_MESSAGES, QUIET
from analysis.spark import QUICK_JIT_OPTIONS, get_session

__all__ = ["dump", "main"]


def dump(target: Path, messages: int, checks: list[str]) -> None:
    """Analyse a synthetic history, then let the JVM exit and write `target`."""
    unknown = sorted(set(checks) - set(ALL))
    if unknown:
        raise SystemExit(f"unknown checks: {unknown}")
    with tempfile.TemporaryDirectory(prefix="warren-cds-") as tmp:
        run = synthetic.write_run(Path(tmp) / "run", synthetic.generate(0, messages))
        opts = f"{QUICK_JIT_OPTIONS} -XX:ArchiveClassesAtExit={target} {QUIET}"
        session = get_session("local[2]", local_dir=str(Path(tmp) / "spark"), log_level="ERROR",
                              conf={"spark.driver.extraJavaOptions": opts})
        gateway = session.sparkContext._gateway
        assert gateway is not None  # a live session has its JVM gateway
        jvm = gateway.proc
        runner.run_checks(load.load(session, run), model.Params(), only=checks or None)
        session.stop()
        # the JVM ends when its stdin closes; the archive is written on the way out
        jvm.stdin.close()
        jvm.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis.jvm_archive_dump")
    parser.add_argument("--dump-to", required=True, type=Path)
    parser.add_argument("--messages", type=int, default=BUILD_MESSAGES)
    parser.add_argument("--checks", default="")
    args = parser.parse_args(argv)
    dump(args.dump_to, args.messages, [c for c in args.checks.split(",") if c])
    return 0


if __name__ == "__main__":
    sys.exit(main())
