"""Run the integration suites that pika, aio-pika, py-amqp and kombu ship, unchanged,
against a fresh warren node and (``--broker rabbitmq``) a private node of the
installed RabbitMQ (3.10.8) or (``--broker rabbitmq4``) of RabbitMQ 4.0.5 from the
Debian 13 chroot (`bench/rabbitmq4.py`, root only). ``--rabbitmq-version V`` makes
warren's node model release V, to match the reference's release.

Why: those suites are what the libraries' own CI runs against a real RabbitMQ, so
their pass count is a plain measure of how far client code runs on warren unchanged.
The suites are not part of warren: this script fetches them (NEEDS NETWORK: PyPI
for the libraries, their sdists and the suites' test dependencies; GitHub for pika's
release archive, whose sdist has no tests) into a temporary directory, builds a
virtual environment for them there, and removes everything afterwards (``--work
DIR`` keeps it for a second run). It is not run by the tests.

Each suite runs against a broker of its own on 127.0.0.1:5672 (pika's acceptance
tests know no other address), so the script runs itself in a private network
namespace (``unshare -n``, root or user namespaces needed) where that port is free
whatever else the machine runs. aio-pika's suite asks Docker for its brokers; a stub
of Docker's API (`bench/docker_stub.py`) answers it with nodes started here.

    python bench/client_suites.py [--broker warren --broker rabbitmq] [--suite pika ...]
        [--rabbitmq-version 3.10] [--work DIR]

It prints one line per suite and broker (passed, failed, errors, skipped) and, as
its last line, one JSON object with the same figures and the failing test ids.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import docker_stub, rabbitmq4  # noqa: E402
from harness import procs  # noqa: E402
from releases import DEFAULT_SERIES, RELEASES  # noqa: E402
from transports.zmq_node import free_port, port_free  # noqa: E402

AMQP_PORT = 5672
PER_TEST_TIMEOUT_S = 120
SUITE_TIMEOUT_S = 3600
#: set once the script runs inside its own network namespace
NETNS_FLAG = "WARREN_CLIENT_SUITES_NETNS"


@dataclass(frozen=True)
class Suite:
    """One library's integration suite: where it comes from and what to run."""

    name: str
    dist: str              # the PyPI distribution
    version: str
    tests: tuple[str, ...]  # paths pytest runs, relative to the unpacked source
    deps: tuple[str, ...]  # the suite's own test dependencies
    github: str = ""       # owner/repo: take the tests from the release tag's archive
    tag: str = ""

    def requirement(self) -> str:
        return f"{self.dist}=={self.version}"


SUITES = (
    Suite("pika", "pika", "1.4.4", ("tests/acceptance",),
          ("pytest", "pytest-timeout", "gevent", "tornado", "twisted"), "pika/pika", "1.4.4"),
    Suite("aio-pika", "aio-pika", "10.2.1", ("tests",),
          ("pytest", "pytest-timeout", "aiomisc", "aiomisc-pytest", "shortuuid",
           "timeout-decorator", "pytest-rst")),
    Suite("py-amqp", "amqp", "5.4.2", ("t/integration",),
          ("pytest", "pytest-timeout", "pytest-rerunfailures", "pytest-sugar", "hypothesis")),
    Suite("kombu", "kombu", "5.7.0", ("t/integration/test_py_amqp.py",),
          ("pytest", "pytest-timeout", "pytest-rerunfailures", "pytest-freezer",
           "hypothesis")),
)


# ------------------------------------------------------------------ fetching


def fetch(suite: Suite, work: Path, python: Path) -> Path:
    """The unpacked source of `suite` under `work` (fetched once)."""
    dest = work / "src" / suite.name
    if dest.exists():
        return dest
    archive = work / "archives"
    archive.mkdir(parents=True, exist_ok=True)
    if suite.github:
        url = f"https://github.com/{suite.github}/archive/refs/tags/{suite.tag}.tar.gz"
        path = archive / f"{suite.name}-{suite.tag}.tar.gz"
        with urllib.request.urlopen(url, timeout=120) as resp:
            path.write_bytes(resp.read())
    else:
        subprocess.run([str(python), "-m", "pip", "download", "-q", "--no-deps",
                        "--no-binary", suite.dist, "-d", str(archive), suite.requirement()],
                       check=True)
        stem = suite.dist.replace("-", "_")
        path = next(p for p in archive.iterdir()
                    if p.name.lower().startswith(f"{stem}-{suite.version}".lower()))
    with tarfile.open(path) as tar:
        top = tar.getnames()[0].split("/", 1)[0]
        tar.extractall(work / "src", filter="data")
    (work / "src" / top).rename(dest)
    return dest


def suites_venv(work: Path, suites: list[Suite]) -> Path:
    """A virtual environment with the libraries at the suites' versions and their test
    dependencies; kept apart from warren's own."""
    venv = work / "venv"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    wanted = sorted({s.requirement() for s in suites} | {d for s in suites for d in s.deps})
    subprocess.run([str(python), "-m", "pip", "install", "-q", *wanted], check=True)
    return python


# ------------------------------------------------------------------ brokers


class WarrenNode:
    """One `warren node start` on 127.0.0.1; `stop_app`/`start_app` stop and start it
    again on the same ports and data directory."""

    def __init__(self, base: Path, amqp_port: int, release: str | None = None) -> None:
        self.base = base
        self.amqp_port = amqp_port
        #: the RabbitMQ release the node models (``rabbitmq_version``), None: its default
        self.release = release
        self.name = f"suites@127.0.0.1:{free_port()}"
        self.cookie = secrets.token_hex(16)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> WarrenNode:
        data = self.base / "data"
        (data / "ready").unlink(missing_ok=True)
        env = dict(os.environ, PYTHONPATH=str(ROOT), WARREN_COOKIE=self.cookie)
        self.proc = procs.spawn(
            [sys.executable, "-m", "warren_cli", "node", "start", "--name", self.name,
             "--peers", self.name, "--backend", "quorum", "--amqp-port", str(self.amqp_port),
             "--data-dir", str(data), "--management-port", "0", "--prometheus-port", "0",
             *(["--rabbitmq-version", self.release] if self.release else [])],
            self.base / "node.log", env, cwd=ROOT)
        deadline = time.monotonic() + 120
        while not (data / "ready").exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("warren node did not start:\n"
                                   + (self.base / "node.log").read_text()[-2000:])
            time.sleep(0.2)
        return self

    def ctl(self, command: str) -> int:
        if command == "stop_app":
            self.stop()
            return 0
        if command == "start_app":
            self.start()
            return 0
        return 69  # EX_UNAVAILABLE: no such command here

    def stop(self) -> None:
        if self.proc is not None:
            procs.stop_group(self.proc)
            self.proc = None


class RabbitNode:
    """One private RabbitMQ node (bench/rabbitmq_local.py) on 127.0.0.1."""

    def __init__(self, base: Path, amqp_port: int) -> None:
        from bench.rabbitmq_local import RabbitCluster
        self.cluster = RabbitCluster(base, nodes=1)
        self.cluster.nodes[0].amqp_port = amqp_port
        self.amqp_port = amqp_port

    def start(self) -> RabbitNode:
        self.cluster.start()
        return self

    def ctl(self, command: str) -> int:
        try:
            self.cluster.ctl(self.cluster.nodes[0], command)
        except RuntimeError:
            return 1
        return 0

    def stop(self) -> None:
        self.cluster.stop()


class RabbitMQ4Node:
    """One private RabbitMQ 4.0.5 node from the Debian 13 chroot (bench/rabbitmq4.py)
    on 127.0.0.1: it runs in this process's network namespace, the private one too."""

    def __init__(self, base: Path, amqp_port: int) -> None:
        self.amqp_port = amqp_port
        self.cluster: rabbitmq4.RabbitMQ4Cluster | None = None

    def start(self) -> RabbitMQ4Node:
        self.cluster = rabbitmq4.start(1, [self.amqp_port])
        return self

    def ctl(self, command: str) -> int:
        if self.cluster is None:
            return 69
        return self.cluster.ctl(0, command).returncode

    def stop(self) -> None:
        if self.cluster is not None:
            rabbitmq4.stop(self.cluster)
            self.cluster = None


Broker = WarrenNode | RabbitNode | RabbitMQ4Node
BrokerFactory = Callable[[Path, int], Broker]
#: the brokers a suite can run against
BROKERS = ("warren", "rabbitmq", "rabbitmq4")


def factories(release: str | None) -> dict[str, BrokerFactory]:
    """How each broker of `BROKERS` is started; warren's nodes model `release`."""
    return {"warren": partial(WarrenNode, release=release), "rabbitmq": RabbitNode,
            "rabbitmq4": RabbitMQ4Node}


@contextmanager
def broker(factory: BrokerFactory, base: Path, port: int) -> Iterator[Broker]:
    node = factory(base, port)
    try:
        yield node.start()
    finally:
        node.stop()


# ------------------------------------------------------------------ running


@dataclass
class Result:
    suite: str
    broker: str
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.errors + self.skipped


def parse_junit(path: Path, suite: str, kind: str) -> Result:
    """Counts from pytest's JUnit XML: a test that failed and errored in teardown
    counts once, as failed."""
    result = Result(suite, kind)
    if not path.exists():  # pytest died before it wrote its report
        result.errors, result.failures = 1, [f"{suite}: no report (see pytest.log)"]
        return result
    outcomes: dict[str, str] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        test_id = f"{case.get('classname')}::{case.get('name')}"
        tags = {child.tag for child in case}
        outcome = ("failed" if "failure" in tags else "errors" if "error" in tags
                   else "skipped" if "skipped" in tags else "passed")
        previous = outcomes.get(test_id)
        if previous in (None, "passed", "skipped") or outcome == "failed":
            outcomes[test_id] = outcome
    for test_id, outcome in sorted(outcomes.items()):
        setattr(result, outcome, getattr(result, outcome) + 1)
        if outcome in ("failed", "errors"):
            result.failures.append(test_id)
    return result


def run_suite(suite: Suite, src: Path, python: Path, kind: str, factory: BrokerFactory,
              work: Path) -> Result:
    base = Path(tempfile.mkdtemp(prefix=f"{kind}-{suite.name}-", dir=work))
    junit = base / "junit.xml"
    env = dict(os.environ, RABBITMQ_HOST="127.0.0.1", RABBITMQ_5672_TCP=str(AMQP_PORT),
               PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)
    with ExitStack() as stack:
        if suite.name == "aio-pika":
            counter = iter(range(1, 1000))

            def container() -> Broker:
                return factory(base / f"container{next(counter)}", free_port()).start()
            stub = stack.enter_context(
                docker_stub.DockerStub(docker_stub.socket_in(base), container))
            env["DOCKER_HOST"] = stub.docker_host
        else:
            stack.enter_context(broker(factory, base / "broker", AMQP_PORT))
        with open(base / "pytest.log", "wb") as log:
            subprocess.run([str(python), "-m", "pytest", "-p", "no:cacheprovider",
                            f"--timeout={PER_TEST_TIMEOUT_S}", f"--junitxml={junit}",
                            "-q", *suite.tests], cwd=src, env=env, stdout=log,
                           stderr=subprocess.STDOUT, timeout=SUITE_TIMEOUT_S)
    result = parse_junit(junit, suite.name, kind)
    print(f"{suite.name:9} {kind:8} passed {result.passed:4}  failed {result.failed:3}  "
          f"errors {result.errors:3}  skipped {result.skipped:3}  (log {base}/pytest.log)",
          flush=True)
    return result


def in_own_netns(argv: list[str]) -> int:
    """Run this script again in a private network namespace with its loopback up (it
    finds the suites already fetched there); its exit code."""
    flags = ["-n"] if os.geteuid() == 0 else ["-r", "-n"]
    inner = f"ip link set lo up && exec {sys.executable} {Path(__file__).resolve()} \"$@\""
    return subprocess.run(["unshare", *flags, "sh", "-c", inner, "sh", *argv],
                          env=dict(os.environ, **{NETNS_FLAG: "1"})).returncode


def main(argv: list[str] | None = None) -> int:
    args_list = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", action="append", choices=[s.name for s in SUITES],
                        help="run only these suites (default: all four)")
    parser.add_argument("--broker", action="append", choices=BROKERS,
                        help="run against these brokers (default: warren); rabbitmq is a "
                             "private RabbitMQ node of the installed rabbitmq-server, "
                             "rabbitmq4 one of RabbitMQ 4.0.5 in a Debian 13 chroot (root)")
    parser.add_argument("--rabbitmq-version", choices=list(RELEASES), default=None,
                        metavar="V", help="the RabbitMQ release warren's node models "
                        f"(rabbitmq_version: {', '.join(RELEASES)}; default: the node's)")
    parser.add_argument("--work", type=Path, help="keep sources, venv and logs here")
    parser.add_argument("--no-netns", action="store_true",
                        help="run in this network namespace (127.0.0.1:5672 must be free)")
    args = parser.parse_args(args_list)
    chosen = [s for s in SUITES if not args.suite or s.name in args.suite]
    kinds = args.broker or ["warren"]
    work = args.work or Path(tempfile.mkdtemp(prefix="client-suites-"))
    work.mkdir(parents=True, exist_ok=True)
    inside = bool(os.environ.get(NETNS_FLAG))
    try:
        # fetching needs the network, so it happens before entering the namespace
        python = work / "venv" / "bin" / "python" if inside else suites_venv(work, chosen)
        sources = {s.name: fetch(s, work, python) for s in chosen}
        if not inside and not args.no_netns and shutil.which("unshare") is not None:
            return in_own_netns([*args_list, "--work", str(work)])
        if not port_free(AMQP_PORT):
            print(f"127.0.0.1:{AMQP_PORT} is taken; pika's suite needs it", file=sys.stderr)
            return 69
        made = factories(args.rabbitmq_version)
        results = [run_suite(s, sources[s.name], python, kind, made[kind], work)
                   for kind in kinds for s in chosen]
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    summary: dict[str, dict[str, object]] = {}
    for r in results:
        summary.setdefault(r.broker, {})[r.suite] = {
            "passed": r.passed, "failed": r.failed, "errors": r.errors,
            "skipped": r.skipped, "total": r.total, "failures": r.failures}
    for kind in kinds:
        runs = [r for r in results if r.broker == kind]
        print(f"{kind}: {sum(r.passed for r in runs)} of {sum(r.total for r in runs)} passed")
    summary["warren_rabbitmq_version"] = {"release": args.rabbitmq_version or DEFAULT_SERIES}
    print(json.dumps(summary, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
