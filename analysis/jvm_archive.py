"""A class-data-sharing (CDS) archive of the classes an analysis loads into Spark's JVM.

Why: a cold driver JVM reads, parses and verifies some 17,000 classes from Spark's
jars before and while it runs the first queries. Mapped from an archive instead, the
session starts in about 5 s instead of 9 and a history loads in 1 s instead of 2.5
(2-core machine: a cold analysis of 50k events 18% faster, of 1M events 13%; at 10M
the few seconds saved are within the run-to-run noise of a 220 s run). Building one
costs half a minute to two minutes, once: HotSpot records every class a full synthetic analysis
loads and writes them at JVM exit (`-XX:ArchiveClassesAtExit`, a dynamic archive on
top of the JDK's own). So it is built on request (`warren spark-archive`), never on
the way to a verdict, and used by every later local session that finds it.

An archive fits one Java runtime and one set of Spark jars. Its file name is a hash
of both (the `java -version` banner, the java binary, pyspark's version and the name,
size and time of every jar), so an upgrade simply finds no archive; a JVM that cannot
map it anyway loads from the jars as before, silently (the JVM's default,
`-Xshare:auto`). Builds write a private file and rename it into place, so concurrent
builds and readers never see a partial archive.

    warren spark-archive            build (or rebuild) the archive of this Java + Spark
    warren spark-archive --status   where it is and whether it exists
    warren spark-archive --remove   delete it

``WARREN_SPARK_CDS=0`` keeps sessions from using it; ``WARREN_CACHE_DIR`` moves the
cache (default ``$XDG_CACHE_HOME/warren``, else ``~/.cache/warren``).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ENV_USE = "WARREN_SPARK_CDS"
ENV_CACHE = "WARREN_CACHE_DIR"
SUBDIR = "spark-cds"
#: a JVM that cannot map the archive says so on stdout; the run goes on without it
QUIET = "-Xlog:cds*=off"
#: messages of the synthetic history whose analysis the archive is built from
BUILD_MESSAGES = 200
BUILD_TIMEOUT_S = 900


class ArchiveError(RuntimeError):
    """The archive could not be built (the message says why)."""


def cache_dir() -> Path:
    """``$WARREN_CACHE_DIR``, else ``$XDG_CACHE_HOME/warren``, else ``~/.cache/warren``."""
    explicit = os.environ.get(ENV_CACHE)
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "warren"


def _java() -> str | None:
    """The java Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.realpath(os.path.join(home, "bin", "java"))
    found = shutil.which("java")
    return os.path.realpath(found) if found else None


def _spark_jars() -> tuple[str, Path]:
    import pyspark

    return pyspark.__version__, Path(pyspark.__file__).parent / "jars"


def runtime_key() -> str | None:
    """A hash of what an archive depends on; None without a java."""
    java = _java()
    if java is None:
        return None
    banner = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    version, jars = _spark_jars()
    digest = hashlib.sha256()
    for part in (java, banner.stderr, banner.stdout, version):
        digest.update(part.encode())
        digest.update(b"\0")
    for jar in sorted(jars.glob("*.jar")):
        st = jar.stat()
        digest.update(f"{jar.name}:{st.st_size}:{st.st_mtime_ns}\0".encode())
    return digest.hexdigest()[:20]


@functools.cache
def _this_runtime_key() -> str | None:
    """`runtime_key`, worked out once per process (it starts a `java -version`)."""
    return runtime_key()


def archive_path() -> Path | None:
    """Where this Java + Spark's archive lives (present or not); None without a java."""
    key = _this_runtime_key()
    return None if key is None else cache_dir() / SUBDIR / f"{key}.jsa"


def java_options() -> str | None:
    """Driver JVM options that map the archive, or None (absent, or `WARREN_SPARK_CDS=0`)."""
    if os.environ.get(ENV_USE, "1") == "0":
        return None
    path = archive_path()
    if path is None or not path.is_file():
        return None
    return f"-XX:SharedArchiveFile={path} {QUIET}"


@dataclass(frozen=True)
class Built:
    path: Path
    bytes: int
    seconds: float


def build(messages: int = BUILD_MESSAGES, checks: tuple[str, ...] = (),
          timeout_s: float = BUILD_TIMEOUT_S) -> Built:
    """Build the archive: a child process analyses a synthetic history (every check, or
    only `checks`) in a JVM that writes the classes it loaded at exit."""
    path = archive_path()
    if path is None:
        raise ArchiveError("java not found: Spark needs Java 17 or 21")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp")
    started = time.perf_counter()
    env = {**os.environ, ENV_USE: "0"}  # a dynamic archive needs the JDK's own as base
    cmd = [sys.executable, "-m", "analysis.jvm_archive_dump", "--dump-to", str(tmp),
           "--messages", str(messages), "--checks", ",".join(checks)]
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s,
                              check=False)
        if done.returncode != 0 or not tmp.is_file() or tmp.stat().st_size == 0:
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
            raise ArchiveError(f"the archiving JVM failed (exit {done.returncode}): {tail}")
        os.replace(tmp, path)
    except subprocess.TimeoutExpired:
        raise ArchiveError(f"the archiving run took more than {timeout_s:g} s") from None
    finally:
        tmp.unlink(missing_ok=True)
    return Built(path, path.stat().st_size, round(time.perf_counter() - started, 1))


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register `spark-archive` on the `warren` command's subparsers."""
    p = subparsers.add_parser("spark-archive",
                              help="build the JVM class archive that makes analyses start faster",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    what = p.add_mutually_exclusive_group()
    what.add_argument("--status", action="store_true", help="where it is and whether it exists")
    what.add_argument("--remove", action="store_true", help="delete this runtime's archive")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Handler of `warren spark-archive`; 0 on success, 1 when it cannot be built."""
    path = archive_path()
    if path is None:
        print("warren spark-archive: java not found: Spark needs Java 17 or 21", file=sys.stderr)
        return 1
    if args.status:
        present = path.is_file()
        print(json.dumps({"path": str(path), "present": present,
                          "bytes": path.stat().st_size if present else 0,
                          "used": java_options() is not None}))
        return 0
    if args.remove:
        path.unlink(missing_ok=True)
        print(f"removed {path}")
        return 0
    print("warren spark-archive: analysing a synthetic history to record Spark's classes "
          "(up to two minutes)...", flush=True)
    try:
        result = build()
    except ArchiveError as exc:
        print(f"warren spark-archive: {exc}", file=sys.stderr)
        return 1
    print(f"archive: {result.path} ({result.bytes >> 20} MiB, {result.seconds} s)")
    return 0
