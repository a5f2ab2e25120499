"""Every Python example in README.md runs as written.

Each ```python block is run on its own, in a fresh interpreter started from the
repository root, and must exit with status 0 within the time limit. A loopback
address with a fixed port in a block (``127.0.0.1:25672``) is given a port that is
free now, the same one for every mention in that block, so an example that opens
its port does not collide with anything else on the machine.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from transports.zmq_node import free_port

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
#: seconds one example may take
TIMEOUT = 60
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
_LOOPBACK_PORT = re.compile(r"127\.0\.0\.1:(\d{2,5})")


def python_blocks(path: Path) -> list[tuple[int, str]]:
    """The ```python blocks of a Markdown file, with the line each starts on."""
    text = path.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in _BLOCK.finditer(text)]


def with_free_ports(code: str) -> str:
    """`code` with each fixed loopback port replaced by one that is free now."""
    ports: dict[str, int] = {}

    def fresh(m: re.Match[str]) -> str:
        port = ports.setdefault(m.group(1), free_port())
        return f"127.0.0.1:{port}"

    return _LOOPBACK_PORT.sub(fresh, code)


def run_example(code: str) -> subprocess.CompletedProcess[str]:
    """Run `code` in a new interpreter from the repository root; never leaves it running."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


BLOCKS = python_blocks(README)


def test_the_readme_has_python_examples() -> None:
    assert BLOCKS


@pytest.mark.parametrize("code", [code for _line, code in BLOCKS],
                         ids=[f"README.md:{line}" for line, _code in BLOCKS])
def test_each_readme_python_example_runs_as_written(code: str) -> None:
    done = run_example(with_free_ports(code))
    assert done.returncode == 0, done.stderr


def test_fixed_loopback_ports_are_replaced_consistently_within_a_block() -> None:
    code = 'a = "x@127.0.0.1:25672"; b = "y@127.0.0.1:25673"; c = "127.0.0.1:25672"'
    rewritten = with_free_ports(code)
    ports = _LOOPBACK_PORT.findall(rewritten)
    assert len(ports) == 3 and ports[0] == ports[2] != ports[1]
