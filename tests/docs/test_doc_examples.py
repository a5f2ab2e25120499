"""Every code example in README.md and docs/ runs in the test suite.

Each ```python block is run on its own, in a fresh interpreter whose working
directory is a new temporary directory (so an example that writes
``data_dir="var/a"`` leaves nothing in the repository) and whose import path is the
repository root. It must exit with status 0 within the time limit. A loopback
address with a fixed port in a block (``127.0.0.1:25672``) is given a port that is
free now, the same one for every mention in that block, so an example that opens
its port collides with nothing.

A python block that defines ``test_`` functions is a pytest example: it is written to
a file and run by pytest (warren's pytest plugin is loaded by its entry point).

Each ```sh block runs the same way under ``bash -e`` with ``warren`` on the path. A
block that runs one of the repository's scripts (``bash scripts/demo.sh``) runs
from the repository's root, where the page tells a reader to run it, with
``WARREN_RUNS`` pointing into its temporary directory so that the run it records
is not left in the checkout. README's test-suite command is the one block not
started here, because it is this suite: CI runs exactly it (``.ci/run`` execs
it), and a test checks that the block and ``.ci/run`` say the same command.

No block can be marked as not run. When a block ends — passing, failing or timed
out — its whole process group is killed, and so is any process that left the
group (a node started in a session of its own) but works in the block's temporary
directory or names it on its command line.

The blocks run two at a time, ahead of their tests and in the tests' order, each
still in a process and a directory of its own: most of an example's time is
waiting (nodes booting, a JVM starting), so the demo no longer holds up the short
blocks behind it. Each test waits for its own block's result; whatever is still
running when the module ends is killed.

Blocks without a language are diagrams and sample output, not code.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.broker.broker_support import eventually
from transports.zmq_node import free_port

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CI_RUN = ROOT / ".ci" / "run"
#: seconds one example may take; a block running a repository script (the demo: a
#: cluster, a workload with a fault and the Spark checks) gets the longer limit
TIMEOUT = 180
SCRIPT_TIMEOUT = 600
#: seconds pytest-timeout gives a test beyond its example's own limit (for the cleanup)
CLEANUP = 60
#: examples running at once
WORKERS = 2
_BLOCK = re.compile(r"^```(python|sh)\n(.*?)^```", re.S | re.M)
_LOOPBACK_PORT = re.compile(r"127\.0\.0\.1:(\d{2,5})")
_REPO_SCRIPT = re.compile(r"^bash scripts/", re.M)


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: str
    line: int
    language: str
    code: str

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def runs_a_repository_script(self) -> bool:
        return self.language == "sh" and _REPO_SCRIPT.search(self.code) is not None

    @property
    def timeout(self) -> int:
        """Seconds the example may run."""
        return SCRIPT_TIMEOUT if self.runs_a_repository_script else TIMEOUT


def code_blocks(path: Path, root: Path = ROOT) -> list[Block]:
    """The ```python and ```sh blocks of a Markdown file, with the line each starts on."""
    text = path.read_text(encoding="utf-8")
    return [Block(str(path.relative_to(root)), text.count("\n", 0, m.start()) + 1,
                  m.group(1), m.group(2)) for m in _BLOCK.finditer(text)]


def ci_command(run: Path = CI_RUN) -> str:
    """The command `.ci/run` hands the machine over to (its ``exec`` line)."""
    execs = [line.removeprefix("exec ").strip()
             for line in run.read_text(encoding="utf-8").splitlines()
             if line.startswith("exec ")]
    assert len(execs) == 1, execs
    return execs[0]


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


def kill_leftovers(workdir: Path) -> list[int]:
    """Kill (and name) the processes that work in `workdir` or name it on their
    command line: what an example started in a session of its own, out of reach of
    its process group."""
    mark = str(workdir.resolve())
    killed = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                errors="replace")
            cwd = os.readlink(entry / "cwd")
        except OSError:  # gone meanwhile, or not ours to look at
            continue
        if mark in cmdline or cwd == mark or cwd.startswith(mark + "/"):
            try:
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
            except ProcessLookupError:
                pass
    return killed


def run_example(block: Block, started: Callable[[subprocess.Popen[str]], None] = lambda _: None,
                ) -> subprocess.CompletedProcess[str]:
    """Run `block` in a temporary directory; never leaves anything running. `started`
    is handed the example's process as soon as it runs."""
    with tempfile.TemporaryDirectory(prefix="warren-doc-") as tmp:
        workdir = Path(tmp)
        env = dict(os.environ, PYTHONPATH=str(ROOT), WARREN_RUNS=str(workdir / "runs"))
        args = _command(block, workdir)
        script = block.runs_a_repository_script
        proc = subprocess.Popen(args, cwd=ROOT if script else workdir, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        started(proc)
        try:
            out, err = proc.communicate(timeout=block.timeout)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)   # the example and all it started
            except ProcessLookupError:
                pass
            kill_leftovers(workdir)
            if proc.poll() is None:
                proc.communicate()
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


class ExampleRunner:
    """Runs examples `workers` at a time, in the order given, ahead of the tests that
    ask for their results."""

    def __init__(self, blocks: list[Block], workers: int = WORKERS) -> None:
        self._procs: list[subprocess.Popen[str]] = []
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="doc-example")
        self._results: dict[Block, Future[subprocess.CompletedProcess[str]]] = {
            b: self._pool.submit(run_example, b, self._started) for b in blocks}

    def _started(self, proc: subprocess.Popen[str]) -> None:
        with self._lock:
            self._procs.append(proc)

    def running(self) -> list[subprocess.Popen[str]]:
        """The examples' processes that have not ended yet."""
        with self._lock:
            return [p for p in self._procs if p.poll() is None]

    def result(self, block: Block) -> subprocess.CompletedProcess[str]:
        """`block`'s run, once it has ended (its own time limit applies)."""
        return self._results[block].result()

    def close(self) -> None:
        """Drop the examples not started yet, kill those running, and wait for their
        cleanup (`run_example` kills what each one started)."""
        for future in self._results.values():
            future.cancel()
        for proc in self.running():
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._pool.shutdown(wait=True)


BLOCKS = [block for page in PAGES for block in code_blocks(page)]
#: README's test-suite command: run by CI itself, checked against `.ci/run` below
SUITE = [b for b in BLOCKS if b.language == "sh" and b.code.strip() == ci_command()]
RUN = [block for block in BLOCKS if block not in SUITE]


def test_the_readme_and_docs_have_examples_that_run() -> None:
    assert any(b.page == "README.md" and b.language == "python" for b in RUN)
    assert any(b.page.startswith("docs/") and b.language == "python" for b in RUN)
    assert any(b.language == "sh" for b in RUN)


@pytest.fixture(scope="module")
def examples(request: pytest.FixtureRequest) -> Iterator[ExampleRunner]:
    """The examples this session's tests will check, started in the tests' order."""
    params = [item.callspec.params for item in request.session.items
              if isinstance(item, pytest.Function) and item.module is request.module
              and item.originalname == "test_each_example_runs_as_written"]
    selected = [b for p in params if isinstance(b := p.get("block"), Block)]
    runner = ExampleRunner(selected)
    try:
        yield runner
    finally:
        runner.close()


@pytest.mark.parametrize("block", [
    pytest.param(b, id=b.where, marks=pytest.mark.timeout(b.timeout + CLEANUP)) for b in RUN])
def test_each_example_runs_as_written(block: Block, examples: ExampleRunner) -> None:
    done = examples.result(block)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_readme_test_command_is_exactly_what_ci_runs() -> None:
    assert [b.page for b in SUITE] == ["README.md"]
    assert ci_command() == "bash scripts/test.sh"


def test_no_page_marks_a_block_as_not_run() -> None:
    marked = [str(page.relative_to(ROOT)) for page in PAGES
              if "<!-- not run" in page.read_text(encoding="utf-8")]
    assert marked == []


def test_fixed_loopback_ports_are_replaced_consistently_within_a_block() -> None:
    code = 'a = "x@127.0.0.1:25672"; b = "y@127.0.0.1:25673"; c = "127.0.0.1:25672"'
    rewritten = with_free_ports(code)
    ports = _LOOPBACK_PORT.findall(rewritten)
    assert len(ports) == 3 and ports[0] == ports[2] != ports[1]


def test_what_an_example_started_in_a_session_of_its_own_is_killed(tmp_path: Path) -> None:
    escaped = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)",
                                str(tmp_path)], start_new_session=True)
    try:
        # the process is looked for by its command line: wait until /proc shows it
        cmdline = Path(f"/proc/{escaped.pid}/cmdline")
        assert eventually(lambda: str(tmp_path).encode() in cmdline.read_bytes()), (
            f"the escaped process never showed its command line (exit {escaped.poll()})")
        assert escaped.pid in kill_leftovers(tmp_path)
        assert escaped.wait(timeout=30) == -signal.SIGKILL
    finally:
        if escaped.poll() is None:
            escaped.kill()
            escaped.wait()


def test_an_example_still_running_when_the_module_ends_is_killed() -> None:
    block = Block("page.md", 1, "sh", "sleep 300\n")
    runner = ExampleRunner([block], workers=1)
    try:
        assert eventually(runner.running, timeout=60), "the example never started"
    finally:
        runner.close()
    assert runner.running() == []
    assert runner.result(block).returncode == -signal.SIGKILL


def test_the_demo_runs_from_the_checkout_and_other_shell_blocks_in_a_temporary_one() -> None:
    demo = [b for b in RUN if b.runs_a_repository_script]
    assert [b.page for b in demo] == ["README.md"]
    assert "bash scripts/demo.sh" in demo[0].code
