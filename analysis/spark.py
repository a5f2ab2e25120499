"""The only place a SparkSession is built.

`getOrCreate()` silently returns a running session and ignores static settings such as
driver memory, so every caller goes through `get_session`, which applies warren's
local defaults once (few shuffle partitions on small machines, UI off, loopback only,
Arrow transfers, UTC) and leaves a cluster's own settings alone.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from analysis import jvm_archive

DEFAULT_MASTER = "local[*]"
APP_NAME = "warren-analyze"

#: a history of at most this many rows is analysed by a driver JVM that compiles with
#: the client compiler only (see `default_conf`)
QUICK_JIT_MAX_ROWS = 3_000_000
#: HotSpot's quick-compilation mode; the code cache is raised to the tiered default,
#: because the client compiler's own default (48 MB) fills up with Spark's generated
#: classes and the JVM then stops compiling altogether
QUICK_JIT_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
#: the methods the optimising compiler leaves alone in a large analysis (compiler
#: directives, read by HotSpot at start): the Janino compiler that turns Spark's
#: generated source into classes, Java serialization of tasks and broadcasts, class
#: loading, the SQL parser, ASM and configuration code. They run often enough to be
#: queued for the optimising compiler, but a cold analysis spends less time in them than
#: compiling them costs: at 10M events on 2 cores the compilers' CPU went from 26.6 to
#: 21.4 s (three alternated pairs, everything else unchanged); they still get the client
#: compiler. Spark's generated code and its row-processing classes keep both compilers.
JIT_DIRECTIVES = Path(__file__).with_name("jit_directives.json")
#: for larger histories: a method goes to the optimising compiler only after 20 times
#: HotSpot's default invocations (8 times its compile threshold, 25 times its loop
#: back-edges): Spark generates new classes for every query, most of which run too
#: briefly to repay an optimising compile, while the hot loops still get one. The
#: `JIT_DIRECTIVES` apply too, and HotSpot's own console lines go to stderr with
#: Spark's log (silencing them would also hide why a JVM failed to start).
#:
#: Spark's generated classes reach the optimising compiler at a quarter of those
#: thresholds (`GENERATED_CODE_SCALING`: 5 times HotSpot's defaults): they hold the
#: tasks' row loops, which otherwise ran longer in client-compiled code. At 10M events
#: on 2 cores, ten alternated pairs: 45.6-54.0 s (median 49.9) against 46.2-55.0 s
#: (median 52.5); the tasks' CPU 41-50 s (mean 45.4) against 44-58 s (51.6), the
#: compilers' 2.5 s more. Seven of the ten pairs were faster.
GENERATED_CODE_SCALING = 0.25
LARGE_JIT_OPTIONS = ("-XX:Tier4InvocationThreshold=100000 -XX:Tier4CompileThreshold=120000 "
                     "-XX:Tier4BackEdgeThreshold=1000000 -XX:+UnlockDiagnosticVMOptions "
                     f"-XX:CompilerDirectivesFile={shlex.quote(str(JIT_DIRECTIVES))} "
                     "-XX:CompileCommand=quiet -XX:CompileCommand=CompileThresholdScaling,"
                     "org.apache.spark.sql.catalyst.expressions.GeneratedClass*::*,"
                     f"{GENERATED_CODE_SCALING} "
                     # HotSpot announces the directives it read on stdout, the verdict's
                     # stream
                     "-XX:+DisplayVMOutputToStderr")
#: every local driver JVM: the parallel collector rather than G1, whose write barriers
#: and concurrent threads cost a batch job on few cores more than its shorter pauses
#: are worth
GC_OPTIONS = "-XX:+UseParallelGC"

#: a history of at most this many rows is analysed with its expressions interpreted,
#: not compiled (`INTERPRETED_CONF`): a cold analysis of such a history runs a few
#: hundred small queries, and compiling each one's code costs more than the rows it
#: then runs over. On 2 cores, three alternated pairs each (the checks alone, cold):
#: 50k events 34.1 / 34.7 / 34.5 s against 38.5 / 40.1 / 37.9 s (the JVM's CPU 57 s
#: against 64 s); a 75k-row leader-failover run 35.4 / 38.8 / 35.1 s against 37.9 /
#: 37.6 / 39.9 s, about even; 1M events 99.8 / 101.6 s against 50.5 / 49.5 s (the
#: tasks' CPU 142 s against 36 s: interpreted rows cost about four times as much).
INTERPRETED_MAX_ROWS = 60_000
#: whole-stage code generation off, and expressions, projections and orderings run by
#: Spark's interpreted implementations (`spark.sql.codegen.factoryMode` NO_CODEGEN, the
#: path Spark takes when generated code fails to compile)
INTERPRETED_CONF = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}

#: a local session kept for many analyses of small histories (the test suite's, the
#: `warren_cluster` fixture's). Whole-stage code generation and adaptive re-planning
#: cost more than they save on a few thousand rows, and so does compiling each query's
#: expressions: they are interpreted instead (`INTERPRETED_CONF`), and the replica
#: summary and local-delivery check of a 40-message history ran 4 Janino compiles
#: instead of 190 (docs/analysis-performance.md). Every broadcast hash table takes at least one
#: memory page, and Spark sizes pages from the heap (32 MB at 3g on 2 cores, about half
#: as much per halving): a few rows then hold a page each until the driver's garbage
#: collector lets Spark clean the broadcast, so pages of 1 MB keep such a JVM within 1g.
SMALL_HISTORIES_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "1g",
    "spark.buffer.pageSize": "1m",
    **INTERPRETED_CONF,
    "spark.sql.adaptive.enabled": "false",
}


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


def local_cores(master: str) -> int:
    """Worker threads of a `local[N]` / `local[*]` master URL."""
    inner = master[len("local"):].strip("[]")
    if inner in ("", "*"):
        return os.cpu_count() or 2
    try:
        return int(inner.split(",")[0])
    except ValueError:
        return os.cpu_count() or 2


def default_conf(master: str, local_dir: str | None = None,
                 expected_rows: int | None = None) -> dict[str, str]:
    """Settings applied before the caller's overrides (see docs/analysis.md).

    `expected_rows` (the history's row count, when the caller knows it) picks how the
    local driver JVM compiles. A cold analysis of a small history is mostly JIT work:
    on 2 cores HotSpot's optimising compiler took about 65% of the JVM's CPU for a
    50k-event history, while Spark itself ran half-interpreted. The client compiler
    alone cuts that analysis by a quarter; from some millions of rows on it gains
    nothing (10M events: 256 s against 259 s, its code cache raised so that it does not
    fill up), so large or unknown histories keep both compilers, with a later hand-over
    to the optimising one (`LARGE_JIT_OPTIONS`): at 10M events on 2 cores, 62.3-66.3 s
    against 67.7-69.2 s in four alternated pairs (the compilers' CPU down from 44 to
    32-34 s, Spark's tasks unchanged; five times the default instead of 20 saved less,
    60 times lost it). Every local driver JVM collects with the parallel collector
    (`GC_OPTIONS`): at 10M, with the later hand-over, 53.1-59.6 s against G1's
    61.4-63.9 s (three rounds, alternated with the serial collector: 53.6-66.5 s); at
    50k events, with the quick JIT, 16.3-17.5 s against 17.7-18.5 s (three pairs).
    Up to `INTERPRETED_MAX_ROWS` the session interprets its expressions as well.

    A local driver JVM also maps the class archive of `analysis.jvm_archive` when one
    was built for this Java and Spark (`warren spark-archive`).

    Every session builds its frames without PySpark's DataFrame debugging context
    (`spark.python.sql.dataFrameDebugging.enabled`). With it, each call of a column
    function walks the Python stack and makes some five more py4j calls to record
    where it was made, for Spark's error messages; warren's checks build several
    thousand columns per analysis. `F.col` took 3 ms against 0.5 ms in a warm local
    session, and `tests/analysis/test_analysis_block_summary.py` 166 s against 188 s.
    A failing query still raises in Python at the line that ran it.

    A local session runs without adaptive query execution. Re-planning after each
    shuffle runs a check's independent aggregations one stage at a time, as separate
    jobs, where the plain plan lets their stages share both cores; with 2 x cores
    shuffle partitions there is nothing for it to coalesce. A cluster keeps it."""
    conf = {
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.parquet.compression.codec": "zstd",
        "spark.ui.enabled": "false",
        "spark.python.sql.dataFrameDebugging.enabled": "false",
    }
    if master.startswith("local"):
        parts = str(2 * local_cores(master))
        conf.update({
            "spark.sql.adaptive.enabled": "false",
            "spark.sql.shuffle.partitions": parts,
            "spark.default.parallelism": parts,
            "spark.driver.memory": os.environ.get("WARREN_SPARK_DRIVER_MEMORY", "2g"),
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
        })
        if local_dir:
            conf["spark.local.dir"] = local_dir
        if expected_rows is not None and expected_rows <= INTERPRETED_MAX_ROWS:
            conf.update(INTERPRETED_CONF)
        options = []
        if expected_rows is not None and expected_rows <= QUICK_JIT_MAX_ROWS:
            options.append(QUICK_JIT_OPTIONS)
        else:
            options.append(LARGE_JIT_OPTIONS)
        options.append(GC_OPTIONS)
        archive = jvm_archive.java_options()
        if archive:
            options.append(archive)
        if options:
            conf["spark.driver.extraJavaOptions"] = " ".join(options)
    return conf


def get_session(master: str | None = None, app_name: str = APP_NAME,
                conf: dict[str, str] | None = None, local_dir: str | None = None,
                log_level: str = "WARN", expected_rows: int | None = None) -> SparkSession:
    """One SparkSession per process, configured for warren's analysis.

    `expected_rows`: rows of the history to analyse, if known (see `default_conf`)."""
    resolved = resolve_master(master)
    if resolved.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(resolved).appName(app_name)
    defaults = default_conf(resolved, local_dir, expected_rows)
    for key, value in {**defaults, **(conf or {})}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(log_level)
    return session
