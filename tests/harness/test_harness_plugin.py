"""The pytest plugin: a fault test of a few lines, checked on its recorded history.

The first test is what a user writes: publish with confirms, SIGKILL the node of the
queue's leader, consume everything. The plugin records its operations and, once the
body has passed, analyses the history; the `checked` fixture then asserts that the
analysis really ran and found nothing lost. The second test runs pytest in a
subprocess to pin down what the plugin does to tests around it: nothing to a test
that does not use it, and a failing check fails the test itself with the verdict.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.pytest_plugin import WarrenCluster

pytest_plugins = ["pytester"]


@pytest.fixture
def checked(request: pytest.FixtureRequest,
            warren_cluster: WarrenCluster) -> Iterator[WarrenCluster]:
    """`warren_cluster`, and after the test: its history was analysed and passed."""
    yield warren_cluster
    if request.config.getoption("--warren-no-analysis"):
        return
    summary = warren_cluster.summary
    assert summary is not None, "the plugin did not analyse the history"
    total = summary["checks"]["total_queue"]
    assert (total["status"], total["confirmed"], total["lost"]) == ("pass", 100, 0)


@pytest.mark.timeout(600)  # three nodes and a Spark analysis
@pytest.mark.warren_cluster(nodes=3, backend="quorum")
def test_confirmed_messages_survive_a_kill_of_the_leaders_node(checked: WarrenCluster) -> None:
    checked.declare_queue("q1")
    leader = checked.leader("q1")
    with checked.connect(leader) as conn:
        ch = conn.channel()
        sent = [ch.publish("q1") for _ in range(100)]
    checked.kill(leader)
    received = checked.drain("q1")
    assert {d.msg_id for d in received} == set(sent)


PLAIN = """
import sys

def test_plain():
    assert not {"pika", "pyarrow", "pyspark", "harness.cluster"} & set(sys.modules)
"""

FAILING = """
import pytest
from harness.pytest_plugin import CheckFailed, WarrenCluster

class Verdict(WarrenCluster):
    def __init__(self):
        pass

    def finish(self):
        raise CheckFailed("the recorded history fails total_queue\\nVERDICT TABLE")

    def close(self):
        pass

@pytest.fixture
def warren_cluster():
    return Verdict()

@pytest.mark.warren_cluster(nodes=1)
def test_body_passes(warren_cluster):
    pass
"""


def test_the_plugin_leaves_other_tests_alone_and_fails_a_test_on_its_verdict(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain=PLAIN, test_failing=FAILING)
    result = pytester.runpytest_subprocess("--strict-markers", "--warren-no-analysis",
                                           "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1, errors=0)
    result.stdout.fnmatch_lines(["*CheckFailed: the recorded history fails total_queue",
                                 "*VERDICT TABLE", "*FAILED test_failing.py::test_body_passes*"])


SUMMARY_PASS = {"checks": {"total_queue": {"status": "pass"}, "ordering": {"status": "pass"}}}
SUMMARY_UNKNOWN = {"checks": {"total_queue": {"status": "unknown"},
                              "ordering": {"status": "pass"},
                              "replica_determinism": {"status": "unknown"}}}
SUMMARY_FAIL = {"checks": {"total_queue": {"status": "fail"},
                           "ordering": {"status": "unknown"}}}


def test_verdicts_a_failure_fails_an_undecided_check_warns_unless_asked_to_fail() -> None:
    from harness.pytest_plugin import judge

    assert judge(0, SUMMARY_PASS, "warn") == (None, None)
    assert judge(1, SUMMARY_FAIL, "warn") == ("the recorded history fails total_queue", None)
    assert judge(3, {"checks": {}}, "warn") == (
        "the recorded history fails analysis (3)", None)
    undecided = "the recorded history leaves replica_determinism, total_queue undecided"
    assert judge(2, SUMMARY_UNKNOWN, "warn") == (None, undecided)
    assert judge(2, SUMMARY_UNKNOWN, "fail") == (undecided, None)


BAD_SETTING = """
import pytest

@pytest.mark.warren_cluster(nodes=1, on_unknown="ignore")
def test_bad(warren_cluster):
    pass

@pytest.mark.warren_cluster(nodes=1, colour="blue")
def test_unknown_key(warren_cluster):
    pass

@pytest.mark.warren_cluster(nodes=1, state_digest_every=0)
def test_bad_digest_period(warren_cluster):
    pass
"""


def test_bad_marker_settings_are_usage_errors_before_any_node_starts(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_bad=BAD_SETTING)
    result = pytester.runpytest_subprocess("--warren-no-analysis", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=3)
    out = result.stdout.str()
    assert "on_unknown must be one of ('warn', 'fail'), not 'ignore'" in out
    assert "unknown settings ['colour']" in out
    assert "state_digest_every must be an integer of at least 1, not 0" in out


MASTER = """
def test_master(warren_analyzer):
    assert warren_analyzer.master == "local[1]"
    assert warren_analyzer._session is None  # Spark starts on first analysis only
"""


def test_the_spark_master_option_reaches_the_session_fixture(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_master=MASTER)
    result = pytester.runpytest_subprocess("--warren-spark-master", "local[1]",
                                           "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
