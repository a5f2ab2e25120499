"""Every code example in README.md and docs/ runs as written, or says why it cannot.

Each ```python block is run on its own, in a fresh interpreter whose working
directory is a new temporary directory (so an example that writes
``data_dir="var/a"`` leaves nothing in the repository) and whose import path is the
repository root. It must exit with status 0 within the time limit; on timeout its
whole process group is killed. A loopback address with a fixed port in a block
(``127.0.0.1:25672``) is given a port that is free now, the same one for every
mention in that block, so an example that opens its port collides with nothing.

A python block that defines ``test_`` functions is a pytest example: it is written to
a file and run by pytest (warren's pytest plugin is loaded by its entry point).

Each ```sh block runs the same way under ``bash -e`` with ``warren`` on the path,
unless the line right before it is ``<!-- not run: REASON -->``: a block that starts
a cluster and leaves it running, or a synopsis with placeholders, is exempt, and the
reason is part of the page.

Blocks without a language are diagrams and sample output, not code.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from transports.zmq_node import free_port

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: seconds one example may take
TIMEOUT = 90
_BLOCK = re.compile(r"^```(python|sh)\n(.*?)^```", re.S | re.M)
_NOT_RUN = re.compile(r"<!-- not run: (.+?) -->\n\Z")
_LOOPBACK_PORT = re.compile(r"127\.0\.0\.1:(\d{2,5})")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: str
    line: int
    language: str
    code: str
    #: why the block is not run, from the comment right before it; None when it runs
    not_run: str | None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def code_blocks(path: Path, root: Path = ROOT) -> list[Block]:
    """The ```python and ```sh blocks of a Markdown file, with the line each starts on."""
    text = path.read_text(encoding="utf-8")
    blocks = []
    for m in _BLOCK.finditer(text):
        exempt = _NOT_RUN.search(text, 0, m.start())
        blocks.append(Block(str(path.relative_to(root)), text.count("\n", 0, m.start()) + 1,
                            m.group(1), m.group(2), exempt.group(1) if exempt else None))
    return blocks


def with_free_ports(code: str) -> str:
    """`code` with each fixed loopback port replaced by one that is free now."""
    ports: dict[str, int] = {}

    def fresh(m: re.Match[str]) -> str:
        port = ports.setdefault(m.group(1), free_port())
        return f"127.0.0.1:{port}"

    return _LOOPBACK_PORT.sub(fresh, code)


def _command(block: Block, workdir: Path) -> list[str]:
    """How to run `block` inside `workdir`."""
    code = with_free_ports(block.code)
    if block.language == "sh":
        bindir = workdir / ".bin"
        bindir.mkdir()
        warren = bindir / "warren"
        warren.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m warren_cli "$@"\n')
        warren.chmod(0o755)
        return ["bash", "-e", "-c", f'PATH="{bindir}:$PATH"\n{code}']
    if re.search(r"^def test_", code, re.M):
        (workdir / "test_example.py").write_text(code)
        return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                "test_example.py"]
    return [sys.executable, "-c", code]


def run_example(block: Block) -> subprocess.CompletedProcess[str]:
    """Run `block` in a temporary directory; never leaves anything running."""
    with tempfile.TemporaryDirectory(prefix="warren-doc-") as tmp:
        workdir = Path(tmp)
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        args = _command(block, workdir)
        proc = subprocess.Popen(args, cwd=workdir, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=TIMEOUT)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)   # the example and all it started
            except ProcessLookupError:
                pass
            if proc.poll() is None:
                proc.communicate()
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


BLOCKS = [block for page in PAGES for block in code_blocks(page)]
RUN = [block for block in BLOCKS if block.not_run is None]


def test_the_readme_and_docs_have_examples_that_run() -> None:
    assert any(b.page == "README.md" and b.language == "python" for b in RUN)
    assert any(b.page.startswith("docs/") and b.language == "python" for b in RUN)
    assert any(b.language == "sh" for b in RUN)


@pytest.mark.parametrize("block", RUN, ids=[b.where for b in RUN])
def test_each_example_runs_as_written(block: Block) -> None:
    done = run_example(block)
    assert done.returncode == 0, done.stdout + done.stderr


def test_only_shell_examples_may_be_exempt_and_each_says_why() -> None:
    exempt = [b for b in BLOCKS if b.not_run is not None]
    assert all(b.language == "sh" for b in exempt), [b.where for b in exempt]
    assert all(len(b.not_run or "") >= 20 for b in exempt), [b.where for b in exempt]


def test_fixed_loopback_ports_are_replaced_consistently_within_a_block() -> None:
    code = 'a = "x@127.0.0.1:25672"; b = "y@127.0.0.1:25673"; c = "127.0.0.1:25672"'
    rewritten = with_free_ports(code)
    ports = _LOOPBACK_PORT.findall(rewritten)
    assert len(ports) == 3 and ports[0] == ports[2] != ports[1]


def test_a_block_right_after_a_not_run_comment_is_exempt_with_its_reason(
        tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("<!-- not run: starts a cluster that keeps running -->\n"
                    "```sh\nwarren node start\n```\n\n```sh\nwarren scenario list\n```\n")
    first, second = code_blocks(page, root=tmp_path)
    assert (first.not_run, second.not_run) == ("starts a cluster that keeps running", None)
