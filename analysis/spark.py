"""The only place a SparkSession is built.

`getOrCreate()` silently returns a running session and ignores static settings such as
driver memory, so every caller goes through `get_session`, which applies warren's
local defaults once (few shuffle partitions on small machines, UI off, loopback only,
Arrow transfers, UTC) and leaves a cluster's own settings alone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
APP_NAME = "warren-analyze"


class JavaMissing(RuntimeError):
    """No usable Java runtime: Spark cannot start."""


def check_java() -> str:
    """The `java -version` banner; JavaMissing with an install hint when absent."""
    java = shutil.which("java")
    if java is None:
        raise JavaMissing("java not found: Spark needs Java 17 or 21 "
                          "(apt-get install default-jre-headless, or run scripts/setup.sh)")
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    return (out.stderr or out.stdout).splitlines()[0] if (out.stderr or out.stdout) else java


def resolve_master(master: str | None) -> str:
    """`--master` flag, else `WARREN_SPARK_MASTER`, else local[*]."""
    return master or os.environ.get("WARREN_SPARK_MASTER") or DEFAULT_MASTER


def _local_cores(master: str) -> int:
    inner = master[len("local"):].strip("[]")
    if inner in ("", "*"):
        return os.cpu_count() or 2
    try:
        return int(inner.split(",")[0])
    except ValueError:
        return os.cpu_count() or 2


def default_conf(master: str, local_dir: str | None = None) -> dict[str, str]:
    """Settings applied before the caller's overrides (see docs/analysis.md)."""
    conf = {
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.parquet.compression.codec": "zstd",
        "spark.ui.enabled": "false",
    }
    if master.startswith("local"):
        parts = str(2 * _local_cores(master))
        conf.update({
            "spark.sql.shuffle.partitions": parts,
            "spark.default.parallelism": parts,
            "spark.driver.memory": os.environ.get("WARREN_SPARK_DRIVER_MEMORY", "2g"),
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
        })
        if local_dir:
            conf["spark.local.dir"] = local_dir
    return conf


def get_session(master: str | None = None, app_name: str = APP_NAME,
                conf: dict[str, str] | None = None, local_dir: str | None = None,
                log_level: str = "WARN") -> SparkSession:
    """One SparkSession per process, configured for warren's analysis."""
    resolved = resolve_master(master)
    if resolved.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(resolved).appName(app_name)
    for key, value in {**default_conf(resolved, local_dir), **(conf or {})}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(log_level)
    return session
