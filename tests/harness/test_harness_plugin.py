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
