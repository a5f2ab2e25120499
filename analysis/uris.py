"""History and output locations given as paths or URIs.

`warren analyze` takes a local path, a `file://` URI (made a local path, so
everything local keeps working), or a URI of another scheme (`hdfs://`, `s3a://`,
...) that is handed to Spark untouched: only Spark can read such storage, so the
local steps (compaction, the schema-version scan of every file) are skipped there.
Outputs bound for such storage are written where they are made: the violation
tables by Spark straight to the URI, the files the driver makes (summary, verdicts,
plots, report) into a local staging directory that `upload` then copies through
Spark's Hadoop file system.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse


def scheme(location: str) -> str:
    """The URI scheme of `location`; "" for a plain path."""
    parsed = urlparse(location)
    # one letter is a Windows drive, not a scheme
    return parsed.scheme.lower() if len(parsed.scheme) > 1 else ""


def is_remote(location: str | Path) -> bool:
    """Storage only Spark reads: any scheme but `file`."""
    return scheme(str(location)) not in ("", "file")


def local_path(location: str | Path) -> Path:
    """The local path of a plain path or a `file://` URI (ValueError for others)."""
    text = str(location)
    s = scheme(text)
    if s == "":
        return Path(text)
    if s != "file":
        raise ValueError(f"{text} is not on the local file system")
    parsed = urlparse(text)
    if parsed.netloc not in ("", "localhost"):
        raise ValueError(f"file URI with a host is not supported: {text}")
    return Path(unquote(parsed.path))


def join(location: str | Path, *parts: str) -> str:
    """`location` / parts, keeping a URI's `//` intact."""
    return "/".join([str(location).rstrip("/"), *parts])


class Unreachable(ValueError):
    """A URI Spark's Hadoop file system cannot serve: no connector for its scheme, or
    (for something to read) nothing there."""


def _file_system(spark: Any, location: str) -> tuple[Any, Any]:
    hadoop_path = spark._jvm.org.apache.hadoop.fs.Path(location)
    try:
        return hadoop_path.getFileSystem(spark._jsc.hadoopConfiguration()), hadoop_path
    except Exception as exc:  # py4j's error carries the JVM's message
        lines = str(exc).strip().splitlines()  # the JVM's exception comes last
        raise Unreachable(f"no file system for {location} on Spark's class path "
                          f"({lines[-1] if lines else type(exc).__name__})") from None


def check_reachable(spark: Any, location: str, must_exist: bool) -> None:
    """`Unreachable` unless Spark can reach `location` (and, if `must_exist`, it is
    there): asked before an analysis, so such input is refused as bad input."""
    fs, hadoop_path = _file_system(spark, location)
    if must_exist and not fs.exists(hadoop_path):
        raise Unreachable(f"{location} does not exist")


def upload(spark: Any, local_dir: Path, location: str) -> list[str]:
    """Copy every file below `local_dir` to `location` (any URI Spark's Hadoop file
    system reaches: ``hdfs://``, ``s3a://``, ``file://``), keeping the layout and
    replacing what is there; the URIs written. `spark` is the SparkSession."""
    hadoop_path = spark._jvm.org.apache.hadoop.fs.Path
    fs, _ = _file_system(spark, location)
    written = []
    for f in sorted(p for p in Path(local_dir).rglob("*") if p.is_file()):
        target = join(location, f.relative_to(local_dir).as_posix())
        fs.copyFromLocalFile(False, True, hadoop_path(str(f.resolve())), hadoop_path(target))
        written.append(target)
    return written
