"""`analysis.spark.default_conf`: what a local analysis session is given before the
user's own `--conf` settings, in particular how its driver JVM compiles."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from pyspark.errors import utils as errors_utils
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from analysis import jvm_archive, load, spark, synthetic


@pytest.fixture(autouse=True)
def _no_class_archive(monkeypatch: pytest.MonkeyPatch) -> None:
    """These cases are about the JIT; a built class archive would add its own option
    (tests/analysis/test_analysis_jvm_archive.py)."""
    monkeypatch.setenv(jvm_archive.ENV_USE, "0")


def test_a_small_history_gets_the_quick_jit() -> None:
    conf = spark.default_conf("local[2]", expected_rows=50_000)
    assert conf["spark.driver.extraJavaOptions"] == \
        f"{spark.QUICK_JIT_OPTIONS} {spark.GC_OPTIONS}"
    assert "-XX:TieredStopAtLevel=1" in spark.QUICK_JIT_OPTIONS
    assert spark.GC_OPTIONS == "-XX:+UseParallelGC"


def test_a_large_or_unknown_history_keeps_both_compilers_with_a_later_hand_over() -> None:
    big = spark.default_conf("local[2]", expected_rows=spark.QUICK_JIT_MAX_ROWS + 1)
    unknown = spark.default_conf("local[2]")
    large = f"{spark.LARGE_JIT_OPTIONS} {spark.GC_OPTIONS}"
    assert big["spark.driver.extraJavaOptions"] == large
    assert unknown["spark.driver.extraJavaOptions"] == large
    assert "TieredStopAtLevel" not in spark.LARGE_JIT_OPTIONS
    assert "-XX:Tier4InvocationThreshold=100000" in spark.LARGE_JIT_OPTIONS


def test_a_cluster_session_is_left_alone() -> None:
    conf = spark.default_conf("spark://host:7077", expected_rows=10)
    assert "spark.driver.extraJavaOptions" not in conf
    assert "spark.driver.memory" not in conf
    assert conf["spark.sql.adaptive.enabled"] == "true"
    assert "spark.sql.codegen.factoryMode" not in conf  # compiled, whatever the history


@pytest.mark.parametrize("master", ["local[2]", "spark://host:7077"])
def test_every_session_builds_frames_without_recording_python_call_sites(
        master: str) -> None:
    conf = spark.default_conf(master)
    assert conf["spark.python.sql.dataFrameDebugging.enabled"] == "false"


def test_the_shared_session_really_skips_the_call_site_capture(
        request: pytest.FixtureRequest) -> None:
    """What the setting is for: PySpark reads it once, from the active session (the
    suite's, made by `get_session`; this module's `spark` is the module under test)."""
    session: SparkSession = request.getfixturevalue("spark")
    assert session.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"
    assert not errors_utils.is_debugging_enabled()


def _shaped_query(session: SparkSession, drop: int, mul: int) -> list[tuple[int, int]]:
    """Filter, group, sum and sort the numbers 0-39; `drop` and `mul` are the constants
    that generated code would hold as literals."""
    rows = (session.range(40).withColumnRenamed("id", "n")
            .where((F.col("n") % 7 != drop) & F.col("n").between(2, 31))
            .groupBy((F.col("n") * mul % 5).alias("k")).agg(F.sum(F.col("n") * mul).alias("s"))
            .orderBy(F.desc("k")).collect())
    return [(r["k"], r["s"]) for r in rows]


def test_a_session_for_small_histories_interprets_its_expressions(
        request: pytest.FixtureRequest) -> None:
    """Once a query of a shape has run, the same shape with other expressions compiles
    nothing in the suite's session (`SMALL_HISTORIES_CONF`): compiled code would hold
    the new constants. The rows are still right."""
    session: SparkSession = request.getfixturevalue("spark")
    metrics = session._jvm.org.apache.spark.metrics.source.CodegenMetrics
    _shaped_query(session, 3, 11)
    before = metrics.METRIC_COMPILATION_TIME().getCount()
    rows = _shaped_query(session, 4, 13)
    assert metrics.METRIC_COMPILATION_TIME().getCount() == before
    expected: dict[int, int] = {}
    for n in range(2, 32):
        if n % 7 != 4:
            expected[n * 13 % 5] = expected.get(n * 13 % 5, 0) + n * 13
    assert rows == sorted(expected.items(), reverse=True)


def test_a_large_or_unknown_history_keeps_code_generation() -> None:
    for rows in (spark.INTERPRETED_MAX_ROWS + 1, 10_000_000, None):
        conf = spark.default_conf("local[2]", expected_rows=rows)
        assert "spark.sql.codegen.factoryMode" not in conf
        assert "spark.sql.codegen.wholeStage" not in conf


@pytest.mark.parametrize("rows", [0, 40_000, spark.INTERPRETED_MAX_ROWS])
def test_a_small_history_is_analysed_with_its_expressions_interpreted(rows: int) -> None:
    conf = spark.default_conf("local[2]", expected_rows=rows)
    assert conf["spark.sql.codegen.factoryMode"] == "NO_CODEGEN"
    assert conf["spark.sql.codegen.wholeStage"] == "false"


def test_a_users_conf_turns_code_generation_back_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The caller's settings are applied after warren's defaults (`get_session`)."""
    seen: dict[str, str] = {}

    class Builder:
        def master(self, _m: str) -> Builder:
            return self

        def appName(self, _n: str) -> Builder:
            return self

        def config(self, key: str, value: str) -> Builder:
            seen[key] = value
            return self

        def getOrCreate(self) -> object:
            raise RuntimeError("built")

    monkeypatch.setattr(spark.SparkSession, "builder", Builder())
    with pytest.raises(RuntimeError, match="built"):
        spark.get_session("local[2]", expected_rows=10,
                          conf={"spark.sql.codegen.factoryMode": "FALLBACK"})
    assert seen["spark.sql.codegen.factoryMode"] == "FALLBACK"
    assert seen["spark.sql.codegen.wholeStage"] == "false"


@pytest.mark.parametrize("rows", [10, 50_000, None, 10_000_000])
def test_a_local_session_plans_without_adaptive_execution(rows: int | None) -> None:
    assert spark.default_conf("local[2]", expected_rows=rows)["spark.sql.adaptive.enabled"] \
        == "false"


def test_history_rows_come_from_the_footers(tmp_path: Path) -> None:
    syn = synthetic.generate(3, 20)
    synthetic.write_run(tmp_path, syn)
    assert load.history_rows(tmp_path / "history") == sum(len(r) for r in syn.tables.values())


def _excluded(pattern: str, cls: str) -> bool:
    """Whether a directive's `Class.method` pattern (a trailing `*` on the class part)
    covers every method of class `cls` (slash-separated)."""
    klass, _, method = pattern.partition(".")
    assert method == "*", pattern
    return cls.startswith(klass[:-1]) if klass.endswith("*") else cls == klass


def test_a_large_analysis_keeps_the_optimising_compiler_off_spark_s_machinery() -> None:
    [directive] = json.loads(spark.JIT_DIRECTIVES.read_text())
    assert directive["c2"] == {"Exclude": True} and set(directive) == {"match", "c2"}
    patterns = directive["match"]
    for cls in ("org/codehaus/janino/UnitCompiler", "java/io/ObjectInputStream",
                "java/io/ObjectOutputStream$BlockDataOutputStream"):
        assert any(_excluded(p, cls) for p in patterns), cls
    # the classes rows go through keep both compilers
    for cls in ("org/apache/spark/sql/catalyst/expressions/GeneratedClass",
                "org/apache/spark/sql/catalyst/expressions/UnsafeRow",
                "org/apache/spark/unsafe/types/UTF8String",
                "org/apache/spark/sql/execution/window/WindowExec",
                "org/apache/parquet/column/values/dictionary/PlainValuesDictionary",
                "java/io/DataOutputStream", "java/util/HashMap"):
        assert not any(_excluded(p, cls) for p in patterns), cls
    assert spark.LARGE_JIT_OPTIONS in spark.default_conf("local[2]")[
        "spark.driver.extraJavaOptions"]


def _java_version(*options: str) -> subprocess.CompletedProcess[str]:
    """`java -version` started with `options`."""
    java = shutil.which("java")
    assert java is not None, "the analysis tests need Java"
    return subprocess.run([java, *options, "-version"], capture_output=True, text=True,
                          timeout=60)


def test_the_jit_directives_load_and_leave_the_jvm_s_stdout_alone() -> None:
    options = shlex.split(spark.LARGE_JIT_OPTIONS)
    run = _java_version(*options)
    assert run.returncode == 0, run.stderr
    assert run.stdout == ""
    assert "1 compiler directives added" in run.stderr.splitlines()
    # a JVM that cannot start still says why
    bad = _java_version(*options, "-Xmx1m")
    assert bad.returncode != 0 and "Too small maximum heap" in bad.stderr


def test_spark_s_generated_classes_reach_the_optimising_compiler_sooner() -> None:
    """HotSpot reads the per-method scaling of Spark's generated classes (its echo of
    the command, silenced in a session, names the pattern it parsed)."""
    options = [o for o in shlex.split(spark.LARGE_JIT_OPTIONS)
               if o != "-XX:CompileCommand=quiet"]
    assert len(options) == len(shlex.split(spark.LARGE_JIT_OPTIONS)) - 1
    run = _java_version(*options)
    assert run.returncode == 0, run.stderr
    assert run.stdout == ""
    echo = [line for line in run.stderr.splitlines() if line.startswith("CompileCommand:")]
    assert echo == ["CompileCommand: CompileThresholdScaling "
                    "org/apache/spark/sql/catalyst/expressions/GeneratedClass*.* double "
                    "CompileThresholdScaling = 0.250000"]
    assert 0 < spark.GENERATED_CODE_SCALING < 1
