"""`analysis.jvm_archive`: the class-data-sharing archive of Spark's classes. It is
found by a key of the Java runtime and Spark's jars, used by local sessions only when
it exists (and not when `WARREN_SPARK_CDS=0`), and a JVM started with a built archive
loads Spark's classes from it rather than from the jars."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import warren_cli as cli
from analysis import jvm_archive, spark


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(jvm_archive.ENV_CACHE, str(tmp_path / "cache"))
    monkeypatch.delenv(jvm_archive.ENV_USE, raising=False)
    return tmp_path / "cache"


def _fake_archive() -> Path:
    path = jvm_archive.archive_path()
    assert path is not None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"archive")
    return path


def test_the_archive_lives_in_the_cache_under_a_key_of_the_runtime(cache: Path) -> None:
    path = jvm_archive.archive_path()
    assert path is not None
    assert path.parent == cache / jvm_archive.SUBDIR
    assert path.name == f"{jvm_archive.runtime_key()}.jsa"


def test_the_key_changes_with_the_spark_jars(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "spark-core.jar").write_bytes(b"v1")
    monkeypatch.setattr(jvm_archive, "_spark_jars", lambda: ("4.0.0", jars))
    first = jvm_archive.runtime_key()
    assert jvm_archive.runtime_key() == first
    (jars / "spark-core.jar").write_bytes(b"v2 is longer")
    assert jvm_archive.runtime_key() != first
    monkeypatch.setattr(jvm_archive, "_spark_jars", lambda: ("4.0.1", jars))
    assert len({first, jvm_archive.runtime_key()}) == 2


def test_no_java_means_no_archive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jvm_archive, "_java", lambda: None)
    assert jvm_archive.runtime_key() is None


def test_a_session_maps_the_archive_only_when_it_exists(cache: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    assert jvm_archive.java_options() is None
    assert "SharedArchiveFile" not in spark.default_conf("local[2]")[
        "spark.driver.extraJavaOptions"]
    path = _fake_archive()
    options = jvm_archive.java_options()
    assert options is not None and f"-XX:SharedArchiveFile={path}" in options
    assert spark.default_conf("local[2]")["spark.driver.extraJavaOptions"] \
        == f"{spark.LARGE_JIT_OPTIONS} {spark.GC_OPTIONS} {options}"
    small = spark.default_conf("local[2]", expected_rows=1000)["spark.driver.extraJavaOptions"]
    assert small == f"{spark.QUICK_JIT_OPTIONS} {spark.GC_OPTIONS} {options}"
    assert "spark.driver.extraJavaOptions" not in spark.default_conf("spark://h:7077")
    monkeypatch.setenv(jvm_archive.ENV_USE, "0")
    assert jvm_archive.java_options() is None


def test_the_cli_reports_and_removes_the_archive(cache: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["spark-archive", "--status"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["present"] is False and status["path"].startswith(str(cache))
    path = _fake_archive()
    assert cli.main(["spark-archive", "--status"]) == 0
    assert json.loads(capsys.readouterr().out) == {"path": str(path), "present": True,
                                                   "bytes": 7, "used": True}
    assert cli.main(["spark-archive", "--remove"]) == 0
    assert not path.exists()


def test_a_failed_build_leaves_no_archive(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(jvm_archive.ArchiveError, match="failed"):
        jvm_archive.build(messages=10, checks=("no_such_check",))
    path = jvm_archive.archive_path()
    assert path is not None and not path.exists()
    assert not list(path.parent.iterdir())


_PROBE = """
import sys
from analysis import jvm_archive
from analysis.spark import get_session
opts = jvm_archive.java_options()
assert opts, "no archive"
log = f"-Xlog:class+load=info:file={sys.argv[1]}"
s = get_session("local[1]", log_level="ERROR",
                conf={"spark.driver.extraJavaOptions": f"{opts} {log}"})
assert s.range(5).count() == 5
s.stop()
"""


@pytest.mark.timeout(600)  # a JVM that records its classes, then one that maps them
def test_a_built_archive_serves_sparks_classes(cache: Path, tmp_path: Path) -> None:
    built = jvm_archive.build(messages=10, checks=("flow_not_stuck",))
    assert built.path == jvm_archive.archive_path() and built.bytes > 1 << 20
    log = tmp_path / "classes.log"
    subprocess.run([sys.executable, "-c", _PROBE, str(log)], check=True, timeout=300,
                   capture_output=True)
    lines = log.read_text().splitlines()
    session = [ln for ln in lines if " org.apache.spark.SparkContext " in ln]
    assert session and "shared objects file (top)" in session[0]
    from_jars = [ln for ln in lines if "source: file:" in ln and ".jar" in ln]
    from_archive = [ln for ln in lines if "shared objects file (top)" in ln]
    assert len(from_archive) > 1000 and len(from_jars) < len(from_archive) // 10
