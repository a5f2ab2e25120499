"""The examples/ that docs/actors.md's tutorial is built from work as the page says.

The tutorial's blocks are the files themselves (checked here, so they cannot
drift); the table test of the core passes; and the supervised store runs on a node,
where it expires entries by the node's clock and comes back after a crash.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import actors
import supervision
from actors import Node, gen_server
from actors.clock import ManualClock
from examples.kv_store.core import Get, Put
from examples.kv_store.sup import KvSup

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "docs" / "actors.md"
_FILE_BLOCK = re.compile(r"^<!-- file: (\S+) -->\n```python\n(.*?)^```", re.S | re.M)


def test_each_tutorial_block_is_the_example_file_it_names() -> None:
    blocks = _FILE_BLOCK.findall(TUTORIAL.read_text(encoding="utf-8"))
    named = [path for path, _code in blocks]
    assert named == ["examples/kv_store/core.py", "examples/kv_store/shell.py",
                     "examples/kv_store/sup.py", "examples/kv_store/test_core.py"]
    for path, code in blocks:
        assert code == (ROOT / path).read_text(encoding="utf-8"), path


def test_the_table_test_of_the_core_passes() -> None:
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "examples/kv_store/test_core.py"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture
def node() -> Iterator[tuple[Node, ManualClock]]:
    clock = ManualClock()
    node = Node("kv@127.0.0.1:1", clock=clock).start()
    try:
        yield node, clock
    finally:
        node.stop()


def test_the_supervised_store_expires_entries_by_the_node_clock(
        node: tuple[Node, ManualClock]) -> None:
    n, clock = node
    with n.attached():
        actors.process_flag("trap_exit", True)
        ok, _sup = supervision.start_link(KvSup, "kv")
        assert ok == "ok"
        assert gen_server.call("kv", Put("k", "v", 1000)) == "ok"
        clock.advance(999)
        assert gen_server.call("kv", Get("k")) == ("ok", "v")
        clock.advance(1)
        assert gen_server.call("kv", Get("k")) == "not_found"


def test_the_supervisor_restarts_a_crashed_store(node: tuple[Node, ManualClock]) -> None:
    n, _clock = node
    with n.attached():
        actors.process_flag("trap_exit", True)
        ok, _sup = supervision.start_link(KvSup, "kv")
        first = actors.whereis("kv")
        ref = actors.monitor(first)
        actors.exit(first, "kill")
        assert actors.receive(5000) == ("DOWN", ref, "process", first, "killed")
        for _ in range(100):
            if actors.whereis("kv") not in (None, first):
                break
            actors.sleep(10)
        assert actors.whereis("kv") not in (None, first)
        assert gen_server.call("kv", Get("k")) == "not_found"
