"""End to end over AMQP 0-9-1: pika publisher and consumer against a three-node cluster.

The other benches time one layer each (actors, fifo, WAL, Ra); this one times what
an application sees: a queue on a local three-node warren cluster
(``harness.cluster``: ``warren node start`` processes with disk data dirs), fed and
drained by real pika clients, each an OS process of its own (``bench/e2e_clients.py``):

* publisher: persistent messages (``delivery_mode`` 2; transient in the ``16bt``
  phase), publisher confirms with a window of 256 unconfirmed, connected to the node
  that declared the queue (a quorum queue's leader, a classic queue's home node);
* consumer: prefetch 300, one manual ``basic.ack`` per delivery, on another node.

``--queue-type quorum`` (the default) declares a durable quorum queue, whose every
message the WAL fsyncs. ``--queue-type classic`` declares a durable classic queue
(persistent messages go through its node's message store) and, for the transient
phase, a non-durable one; warren's nodes then model the reference's release
(``--release``, default 3.10 for classic, the node default for quorum).
Phases, each on a fresh queue, ``--warmup`` seconds then ``--seconds`` measured:
``16b`` and ``1k`` bodies at window 256, ``16bt`` (16-byte transient messages at
window 256), ``w1`` (16 bytes at window 1: the confirm latency of a lone publish);
``--phases`` picks a comma-separated subset (default ``16b,1k,w1`` for quorum,
``16b,16bt,w1`` for classic). Each line gives confirmed msg/s, consumer msg/s,
confirm latency p50 / p99, and for window-256 phases the CPU of each process in cores.

The reference is RabbitMQ measured in the same run: when a RabbitMQ server is
installed (Debian's ``rabbitmq-server``, 3.10.8 on bookworm; no dependency of
warren), ``bench/rabbitmq_local.py`` starts three RabbitMQ nodes on loopback after
warren's phases and the same clients run the same phases against the same queue
type; the ratios are warren's figures over theirs (``--rabbitmq no`` skips it,
``yes`` requires it). Without one, quorum ratios fall back to
``REFERENCE_RABBITMQ_3_10_8`` (measured elsewhere; the JSON says which:
``reference_measured_in_run``), and classic runs print no ratio.
``--amqp-url URL`` (repeatable or comma separated) measures any AMQP 0-9-1 broker
instead of warren (publisher on the first URL, consumer on the second).

``--rabbitmq-version V`` (repeatable or comma separated) measures warren modelling
each release side by side, memory per queued message included, each beside the real
RabbitMQ of its release where this machine runs one (3.10.8 installed, 4.0.5 in a
chroot) or the nearest; the last line is then keyed by release
(``bench/e2e_versions.py``).

``--profile`` adds a phase (16 bytes, window 256, not counted) with ``py-spy record``
on the queue's node (leader or home) and the publisher (``py-spy`` on ``PATH`` or
``--py-spy PATH``; no dependency of warren); without py-spy, cProfile on the
publisher only. ``--ra KEY=VALUE`` sets a Ra system key on both sides (warren's
``ra`` table, RabbitMQ's ``advanced.config``). ``--record K`` makes warren's nodes
record their history with a state digest every K log indexes (what recording
costs). ``--consumer-node same`` puts the consumer on the publisher's node.

Usage: ``python bench/e2e.py [--queue-type quorum|classic] [--seconds 10]
[--warmup 2] [--phases 16b,16bt,1k,w1] [--rabbitmq auto|yes|no] [--release 3.10]
[--amqp-url URL]... [--profile] [--py-spy PATH] [--ra KEY=VALUE]... [--record K]
[--consumer-node other|same] [--rabbitmq-version V]... [--memory-messages N]``.
The last line printed is one JSON object with every figure and ratio. What it
measured, change by change: docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pika  # noqa: E402
import pika.exceptions  # noqa: E402

from bench import rabbitmq_local  # noqa: E402
from bench.proc_cpu import process_cpu_s  # noqa: E402
from broker.config_schema import check_ra_keys  # noqa: E402
from harness.cluster import Cluster  # noqa: E402

CLIENTS = Path(__file__).resolve().parent / "e2e_clients.py"

#: three RabbitMQ 3.10.8 nodes, this workload, a 2-core machine: measured elsewhere
REFERENCE_RABBITMQ_3_10_8: dict[str, float] = {
    "msgs_s_16b": 9600.0, "msgs_s_1k": 7700.0, "confirm_p50_ms_w1": 1.2}
REFERENCE_NOTE = ("RabbitMQ 3.10.8, three nodes, same workload, 2-core machine; measured "
                  "elsewhere, not in this run (no rabbitmq-server here)")

WINDOW = 256
PREFETCH = 300
READY_TIMEOUT_S = 60.0
RESULT_GRACE_S = 20.0  # past T1: the publisher's confirm grace plus closing
PROFILE_RATE_HZ = 100
PROFILE_TOP = 12


@dataclass(frozen=True)
class Phase:
    name: str
    size: int
    window: int
    #: persistent messages (delivery mode 2) or transient ones (1)
    persistent: bool = True


PHASES = [Phase("16b", 16, WINDOW), Phase("16bt", 16, WINDOW, persistent=False),
          Phase("1k", 1024, WINDOW), Phase("w1", 16, 1)]
PROFILE_PHASE = Phase("profile", 16, WINDOW)
#: phases run unless ``--phases`` says otherwise, per queue type
DEFAULT_PHASES = {"quorum": "16b,1k,w1", "classic": "16b,16bt,w1"}
#: what warren's nodes model unless ``--release`` says otherwise: a classic queue's
#: persistent path differs by release (3.10 syncs before it confirms), so it models
#: the release measured beside it
DEFAULT_RELEASE = {"quorum": None, "classic": "3.10"}
QUEUE_TYPES = ("quorum", "classic")


def percentile(samples: list[float], q: float) -> float:
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux ``/proc``); 0 if gone."""
    try:
        return process_cpu_s(pid)
    except OSError:
        return 0.0


def _kill(proc: subprocess.Popen[Any] | None) -> None:
    """Kill a child's process group (each child has its own session) and reap it."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, 9)
    except ProcessLookupError:
        pass
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        pass


# ------------------------------------------------------------------ targets


@dataclass
class Target:
    """Where the clients connect, and (for warren) which processes are the nodes."""

    label: str
    urls: list[str]
    cluster: Cluster | None = None
    #: node processes of a broker other than warren, by name (no queue roles known)
    other_nodes: dict[str, int] = field(default_factory=dict)
    #: which URL the consumer uses: 1, another node than the publisher's (the
    #: default), or 0, the publisher's node, where the queue's leader is
    consumer_node: int = 1
    #: ``quorum`` or ``classic``: what `declare` makes and how queue roles are found
    queue_type: str = "quorum"

    @property
    def publisher_url(self) -> str:
        return self.urls[0]

    @property
    def consumer_url(self) -> str:
        return self.urls[self.consumer_node % len(self.urls)]

    def node_pids(self, queue: str) -> dict[str, int]:
        """Node processes by role for `queue`: ``leader``, ``follower-1``, ... for a
        quorum queue; ``home`` (the node that declared it, the publisher's) and
        ``node-2``, ... for a classic queue, of warren and RabbitMQ alike."""
        if self.queue_type == "classic":
            pids = ([n.proc.pid if n.proc is not None else 0 for n in self.cluster.nodes]
                    if self.cluster is not None else list(self.other_nodes.values()))
            return {("home" if i == 1 else f"node-{i}"): pid
                    for i, pid in enumerate(pids, start=1) if pid}
        if self.cluster is None:
            return dict(self.other_nodes)
        try:
            leader = self.cluster.leader_of(queue)
        except Exception as exc:  # a bench figure, not a verdict: go on without roles
            print(f"  (leader of {queue} unknown: {exc})", flush=True)
            leader = None
        out: dict[str, int] = {}
        followers = 0
        for n in self.cluster.nodes:
            if n.proc is None:
                continue
            if leader is not None and n.name == leader.name:
                out["leader"] = n.proc.pid
            else:
                followers += 1
                out[f"{'follower' if leader else 'node'}-{followers}"] = n.proc.pid
        return out


def _amqp_url(host: str, port: int) -> str:
    return f"amqp://guest:guest@{host}:{port}/%2F"


def _where(url: str) -> str:
    """host:port of a URL, without its credentials (for printing)."""
    p = pika.URLParameters(url)
    return f"{p.host}:{p.port}"


@contextmanager
def warren_cluster(root: Path, nodes: int, ra: dict[str, Any] | None = None,
                   record: int | None = None, release: str | None = None) -> Iterator[Target]:
    """A local warren cluster; with `record` = K its nodes record their history (into
    `root`) with a state digest every K log indexes, as a scenario run does; with
    `release` its nodes model that RabbitMQ release (``rabbitmq_version``)."""
    extra: dict[str, Any] = {"ra": dict(ra or {})}
    if record is not None:
        extra["state_digest_every"] = record
    if release is not None:
        extra["rabbitmq_version"] = release
    cluster = Cluster(root / "cluster", nodes, backend="quorum", net_ticktime=15.0,
                      run_id="bench-e2e", extra_config=extra,
                      history_dir=None if record is None else root / "history")
    try:
        started = time.monotonic()
        cluster.start(timeout_s=90.0)
        print(f"warren: {nodes} nodes ready in {time.monotonic() - started:.1f} s "
              f"({', '.join(n.name for n in cluster.nodes)}"
              f"{'' if release is None else f'; modelling RabbitMQ {release}'})", flush=True)
        yield Target("warren", [_amqp_url(h, p) for h, p in cluster.amqp_endpoints()], cluster)
    finally:
        cluster.close()


def _with_channel(url: str, action: Any, attempts: int = 20) -> Any:
    """Run ``action(channel)`` on a fresh blocking connection, retried while a cluster settles."""
    last: Exception | None = None
    for _ in range(attempts):
        try:
            conn = pika.BlockingConnection(pika.URLParameters(url))
        except pika.exceptions.AMQPError as exc:
            last = exc
            time.sleep(0.5)
            continue
        try:
            return action(conn.channel())
        except pika.exceptions.AMQPError as exc:
            last = exc
            time.sleep(0.5)
        finally:
            if conn.is_open:
                conn.close()
    raise RuntimeError(f"AMQP on {_where(url)} failed: {last!r}")


def declare(url: str, queue: str, queue_type: str = "quorum", durable: bool = True) -> None:
    """A queue of `queue_type`, named by ``x-queue-type``; a quorum queue is always
    durable, a classic one as `durable` says."""
    _with_channel(url, lambda ch: ch.queue_declare(
        queue, durable=durable or queue_type == "quorum",
        arguments={"x-queue-type": queue_type}))


def delete(url: str, queue: str) -> None:
    try:
        _with_channel(url, lambda ch: ch.queue_delete(queue), attempts=3)
    except RuntimeError as exc:
        print(f"  (could not delete {queue}: {exc})", flush=True)


# ------------------------------------------------------------------ clients


class ClientProc:
    """One ``e2e_clients.py`` process: its lines on stdout, the ``run`` line on stdin."""

    def __init__(self, argv: list[str], log: Path) -> None:
        self.log = log
        self._err = open(log, "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._err, start_new_session=True)
        self._buf = b""
        self.done = False  # its result is in: it exits by itself (cProfile writes then)

    def line(self, prefix: str, timeout_s: float) -> str:
        """The next stdout line starting with `prefix` (its rest), or raise."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while True:
            while b"\n" in self._buf:
                raw, self._buf = self._buf.split(b"\n", 1)
                text = raw.decode(errors="replace")
                if text.startswith(prefix):
                    self.done = prefix.startswith("result")
                    return text[len(prefix):].strip()
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"no {prefix.strip()!r} from a client; see {self.log}:\n"
                                   f"{self.tail()}")
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    self.proc.wait(5)
                    raise RuntimeError(f"client exited ({self.proc.returncode}) before "
                                       f"{prefix.strip()!r}:\n{self.tail()}")
                self._buf += chunk

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text.encode())
        self.proc.stdin.flush()

    def tail(self) -> str:
        self._err.flush()
        return self.log.read_bytes()[-3000:].decode(errors="replace")

    def close(self) -> None:
        if self.done:
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        _kill(self.proc)
        for f in (self.proc.stdin, self.proc.stdout):
            if f is not None:
                f.close()
        self._err.close()


# ------------------------------------------------------------------ profiles


@dataclass
class Profiler:
    """py-spy on chosen pids during a phase, or cProfile of the publisher without it."""

    py_spy: str | None
    root: Path
    procs: list[tuple[str, subprocess.Popen[bytes], Path]] = field(default_factory=list)

    def client_prefix(self, role: str) -> list[str]:
        """Argv prefix of a client: cProfile around the publisher when py-spy is absent."""
        if self.py_spy is None and role == "publisher":
            return ["-m", "cProfile", "-o", str(self.root / "publisher.pstats")]
        return []

    def attach(self, name: str, pid: int, seconds: float, gil: bool = False) -> None:
        """Sample `pid`: every running thread, or (`gil`) only the one holding the GIL."""
        if self.py_spy is None:
            return
        stem = re.sub(r"[^A-Za-z0-9]+", "-", name)
        out = self.root / f"{stem}.pyspy.txt"
        argv = [self.py_spy, "record", "--pid", str(pid), "--duration", str(int(seconds)),
                "--rate", str(PROFILE_RATE_HZ), "--format", "raw", "--nonblocking",
                *(["--gil"] if gil else []), "--output", str(out)]
        log = open(self.root / f"{stem}.pyspy.log", "wb")  # noqa: SIM115
        try:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            log.close()
        self.procs.append((name, proc, out))

    def collect(self, timeout_s: float) -> dict[str, Profile]:
        """Per profiled process: its top functions and its shares per package."""
        out: dict[str, Profile] = {}
        deadline = time.monotonic() + timeout_s
        for name, proc, path in self.procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _kill(proc)
            if path.exists():
                out[name] = top_of_collapsed(path.read_text())
            else:
                log = path.with_suffix(".log").read_text(errors="replace")
                print(f"  py-spy gave no profile of {name}: {log.strip()[-500:]}", flush=True)
        pstats_file = self.root / "publisher.pstats"
        if self.py_spy is None and pstats_file.exists():
            out["publisher (cProfile)"] = top_of_pstats(pstats_file)
        return out

    def close(self) -> None:
        for _, proc, _ in self.procs:
            _kill(proc)


@dataclass
class Profile:
    """Top functions (name, self %, inclusive %), shares per warren package, samples."""

    rows: list[tuple[str, float, float]]
    packages: list[tuple[str, float]]
    samples: int


_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>.*?)(?::\d+)?\)$")


def _short(path: str) -> str:
    """A frame's file without the machine's directories."""
    for marker in ("site-packages/", "lib/python3"):
        if marker in path:
            return path.split(marker, 1)[1]
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return Path(path).name


def _frame_key(frame: str) -> str:
    m = _FRAME.match(frame.strip())
    if m is None:
        return frame.strip()
    return f"{m['func']} ({_short(m['file'])})"


def _package(frame: str) -> str | None:
    """The warren package of a frame key (``ra``, ``channel``...), None outside the repo."""
    m = re.search(r"\(([^()]*)\)$", frame)
    if m is None or "/" not in m[1]:
        return None
    top = m[1].split("/", 1)[0]
    if top in ("bench", "tests"):
        return None
    return top if (ROOT / top / "__init__.py").exists() else None


def top_of_collapsed(text: str, top: int = PROFILE_TOP) -> Profile:
    """Self and inclusive shares from py-spy's collapsed stacks (``a;b;c COUNT``).

    Each sample is also charged to the warren package of its innermost warren frame
    (time in a library called from ``ra`` counts for ``ra``), or to ``(outside
    warren)`` when no frame of the stack is warren's (pika, a pool thread).
    """
    own: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    packages: Counter[str] = Counter()
    total = 0
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [_frame_key(f) for f in stack.split(";")]
        frames = [f for f in frames if not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        total += n
        own[frames[-1]] += n
        for key in set(frames):
            incl[key] += n
        pkg = next((p for p in map(_package, reversed(frames)) if p), "(outside warren)")
        packages[pkg] += n
    if total == 0:
        return Profile([], [], 0)
    return Profile([(k, round(100.0 * v / total, 1), round(100.0 * incl[k] / total, 1))
                    for k, v in own.most_common(top)],
                   [(k, round(100.0 * v / total, 1)) for k, v in packages.most_common()],
                   total)


def top_of_pstats(path: Path, top: int = PROFILE_TOP) -> Profile:
    import pstats

    stats = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in stats.values()) or 1.0
    rows = sorted(stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    return Profile([(f"{func} ({_short(file)})", round(100.0 * v[2] / total, 1),
                     round(100.0 * v[3] / total, 1)) for (file, _line, func), v in rows],
                   [], sum(v[1] for v in stats.values()))


# ------------------------------------------------------------------ phases


def run_phase(target: Target, phase: Phase, args: argparse.Namespace, root: Path,
              profiler: Profiler | None = None) -> dict[str, Any]:
    """One phase on a fresh queue: clients start, warm up, are measured, are killed."""
    queue = f"bench-e2e-{phase.name}-{os.getpid()}"
    # transient messages go to a non-durable classic queue: nothing of theirs is stored
    declare(target.publisher_url, queue, target.queue_type, durable=phase.persistent)
    nodes = target.node_pids(queue)
    prefix = profiler.client_prefix("publisher") if profiler else []
    consumer = publisher = None
    try:
        consumer = ClientProc([sys.executable, str(CLIENTS), "consumer", target.consumer_url,
                               queue, "--prefetch", str(PREFETCH)],
                              root / f"{phase.name}-consumer.log")
        consumer.line("ready", READY_TIMEOUT_S)
        publisher = ClientProc([sys.executable, *prefix, str(CLIENTS), "publisher",
                                target.publisher_url, queue, "--size", str(phase.size),
                                "--window", str(phase.window),
                                "--delivery-mode", "2" if phase.persistent else "1"],
                               root / f"{phase.name}-publisher.log")
        publisher.line("ready", READY_TIMEOUT_S)
        t0 = time.monotonic() + args.warmup
        t1 = t0 + args.seconds
        for c in (consumer, publisher):
            c.send(f"run {t0!r} {t1!r}\n")
        pids = {**nodes, "publisher": publisher.proc.pid, "consumer": consumer.proc.pid}
        time.sleep(max(0.0, t0 - time.monotonic()))
        if profiler is not None:
            role = "home" if target.queue_type == "classic" else "leader"
            if role in nodes:
                profiler.attach(role, nodes[role], args.seconds)
                profiler.attach(f"{role} (GIL holder)", nodes[role], args.seconds, gil=True)
            profiler.attach("publisher", publisher.proc.pid, args.seconds)
        cpu0 = {k: _cpu_s(p) for k, p in pids.items()}
        time.sleep(max(0.0, t1 - time.monotonic()))
        cpu = {k: round((_cpu_s(p) - cpu0[k]) / args.seconds, 2) for k, p in pids.items()}
        pub = json.loads(publisher.line("result ", args.seconds + RESULT_GRACE_S))
        con = json.loads(consumer.line("result ", RESULT_GRACE_S))
    finally:
        for proc in (publisher, consumer):
            if proc is not None:
                proc.close()
    delete(target.publisher_url, queue)
    lat = pub["latencies_ms"]
    return {
        "msgs_s": round(pub["confirmed"] / pub["seconds"], 1),
        "consumer_msgs_s": round(con["received"] / con["seconds"], 1),
        "confirm_p50_ms": round(percentile(lat, 0.50), 3),
        "confirm_p99_ms": round(percentile(lat, 0.99), 3),
        "nacked": pub["nacked"], "unconfirmed_at_end": pub["unconfirmed_at_end"],
        "redelivered": con["redelivered"], "cpu_cores": cpu,
    }


def _describe(phase: Phase, r: dict[str, Any]) -> str:
    size = ("16 B" if phase.size == 16 else f"{phase.size // 1024} KiB") \
        + ("" if phase.persistent else " transient")
    extra = ""
    if r["nacked"] or r["unconfirmed_at_end"]:
        extra = f", {r['nacked']} nacked, {r['unconfirmed_at_end']} unconfirmed at the end"
    return (f"{size:>15} window {phase.window:>3}: {r['msgs_s']:8.0f} msg/s confirmed, "
            f"consumer {r['consumer_msgs_s']:8.0f} msg/s, confirm p50 "
            f"{r['confirm_p50_ms']:.2f} ms p99 {r['confirm_p99_ms']:.2f} ms{extra}")


def measure(target: Target, phases: list[Phase], args: argparse.Namespace,
            root: Path) -> dict[str, dict[str, Any]]:
    """Every phase against one target, each printed as it ends."""
    target.consumer_node = 0 if args.consumer_node == "same" else 1
    target.queue_type = args.queue_type
    print(f"{target.label}, {args.queue_type} queue: publisher on "
          f"{_where(target.publisher_url)}, consumer on {_where(target.consumer_url)}; "
          f"{args.warmup:g} s warm-up + {args.seconds:g} s per phase", flush=True)
    results: dict[str, dict[str, Any]] = {}
    for phase in phases:
        results[phase.name] = r = run_phase(target, phase, args, root)
        print(f"  {_describe(phase, r)}", flush=True)
        if r["cpu_cores"]:
            print("        cpu (cores): " + ", ".join(
                f"{k} {v:.2f}" for k, v in r["cpu_cores"].items()), flush=True)
    return results


def profile_phase(target: Target, args: argparse.Namespace, root: Path,
                  py_spy: str | None) -> dict[str, Profile]:
    profiler = Profiler(py_spy, root)
    tool = "py-spy" if py_spy else "cProfile (publisher only: no py-spy)"
    print(f"profile phase (16 B, window 256) under {tool}:", flush=True)
    try:
        r = run_phase(target, PROFILE_PHASE, args, root, profiler)
        print("  " + _describe(PROFILE_PHASE, r), flush=True)
        profile = profiler.collect(RESULT_GRACE_S)
    finally:
        profiler.close()
    for name, prof in profile.items():
        print(f"  {name} ({prof.samples} samples): self% incl% function", flush=True)
        for func, own, incl in prof.rows:
            print(f"    {own:5.1f} {incl:5.1f}  {func}", flush=True)
        if prof.packages:
            print("    by package: " + ", ".join(
                f"{k} {v}%" for k, v in prof.packages), flush=True)
    return profile


#: figure name in the JSON line -> (phase, field of that phase's result)
FIGURES: dict[str, tuple[str, str]] = {
    "msgs_s_16b": ("16b", "msgs_s"), "msgs_s_1k": ("1k", "msgs_s"),
    "msgs_s_16b_transient": ("16bt", "msgs_s"),
    "consumer_msgs_s_16b": ("16b", "consumer_msgs_s"),
    "consumer_msgs_s_16b_transient": ("16bt", "consumer_msgs_s"),
    "confirm_p50_ms_w256_16b_transient": ("16bt", "confirm_p50_ms"),
    "cpu_cores_16b_transient": ("16bt", "cpu_cores"),
    "consumer_msgs_s_1k": ("1k", "consumer_msgs_s"),
    "confirm_p50_ms_w256": ("16b", "confirm_p50_ms"),
    "confirm_p99_ms_w256": ("16b", "confirm_p99_ms"),
    "confirm_p50_ms_w256_1k": ("1k", "confirm_p50_ms"),
    "confirm_p99_ms_w256_1k": ("1k", "confirm_p99_ms"),
    "confirm_p50_ms_w1": ("w1", "confirm_p50_ms"), "confirm_p99_ms_w1": ("w1", "confirm_p99_ms"),
    "msgs_s_w1": ("w1", "msgs_s"), "cpu_cores_16b": ("16b", "cpu_cores"),
    "cpu_cores_w1": ("w1", "cpu_cores"),
}


def figures(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {name: results[phase][key] for name, (phase, key) in FIGURES.items()
            if phase in results}


def ratios(ours: dict[str, Any], ref: dict[str, Any]) -> dict[str, float]:
    """Throughput as a fraction of the reference's; latency as a multiple of it."""
    out: dict[str, float] = {}
    for key in ("msgs_s_16b", "msgs_s_16b_transient", "msgs_s_1k", "consumer_msgs_s_16b",
                "consumer_msgs_s_16b_transient"):
        if key in ours and ref.get(key):
            out[f"ratio_{key}_vs_reference"] = round(ours[key] / ref[key], 3)
    key = "confirm_p50_ms_w1"
    if key in ours and ref.get(key):
        out["ratio_confirm_p50_w1_vs_reference"] = round(ours[key] / ref[key], 2)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="measured, per phase")
    parser.add_argument("--warmup", type=float, default=2.0, help="before each phase")
    parser.add_argument("--nodes", type=int, default=3, help="warren nodes to start")
    parser.add_argument("--queue-type", choices=QUEUE_TYPES, default="quorum",
                        help="the queue both brokers are measured on")
    parser.add_argument("--phases", default=None,
                        help="comma-separated subset of " + ",".join(p.name for p in PHASES)
                        + " (default: " + "; ".join(f"{k} {v}" for k, v in
                                                    DEFAULT_PHASES.items()) + ")")
    parser.add_argument("--release", default=None,
                        help="the RabbitMQ release warren's nodes model (rabbitmq_version; "
                             "default: 3.10 for classic, the node's default for quorum)")
    parser.add_argument("--amqp-url", action="append", default=[],
                        help="an AMQP 0-9-1 broker to measure instead of warren "
                             "(repeatable or comma separated: one URL per node)")
    parser.add_argument("--rabbitmq", choices=("auto", "yes", "no"), default="auto",
                        help="also measure a local RabbitMQ cluster in this run as the "
                             "reference (auto: when rabbitmq-server is installed)")
    parser.add_argument("--profile", action="store_true",
                        help="a further phase under py-spy (leader node and publisher)")
    parser.add_argument("--py-spy", default=None, help="py-spy executable (default: PATH)")
    parser.add_argument("--dir", default=None, help="where data dirs and logs go")
    parser.add_argument("--ra", action="append", default=[], metavar="KEY=VALUE",
                        help="a Ra system setting for warren's nodes and RabbitMQ's alike "
                             "(repeatable), such as wal_pre_allocate=true")
    parser.add_argument("--record", type=int, default=None, metavar="K",
                        help="warren's nodes record their history, with a state digest "
                             "every K log indexes (what recording costs a run)")
    parser.add_argument("--consumer-node", choices=("other", "same"), default="other",
                        help="the consumer connects to another node than the publisher "
                             "(default) or to the publisher's, where the queue's leader is")
    add_side_by_side_options(parser)
    args = parser.parse_args()
    if args.record is not None and args.record < 1:
        parser.error("--record: K must be at least 1")
    try:
        ra = ra_settings(args.ra)
    except ValueError as exc:
        parser.error(f"--ra: {exc}")
    urls = [u for arg in args.amqp_url for u in arg.split(",") if u]
    by_name = {p.name: p for p in PHASES}
    if args.phases is None:
        args.phases = DEFAULT_PHASES[args.queue_type]
    release = args.release or DEFAULT_RELEASE[args.queue_type]
    try:
        phases = [by_name[n] for n in args.phases.split(",") if n]
    except KeyError as exc:
        parser.error(f"unknown phase {exc}; known: {', '.join(by_name)}")
    want_rabbit = args.rabbitmq == "yes" or (args.rabbitmq == "auto" and not urls
                                             and rabbitmq_local.available())
    if args.rabbitmq == "yes" and not rabbitmq_local.available():
        parser.error("--rabbitmq yes: rabbitmq-server is not installed "
                     "(Debian: apt-get install rabbitmq-server)")
    if args.rabbitmq_version:
        return side_by_side(parser, args, phases, ra, want_rabbit, urls)
    py_spy = args.py_spy or shutil.which("py-spy")
    root = Path(tempfile.mkdtemp(prefix="warren-bench-e2e-", dir=args.dir))
    profile: dict[str, Profile] = {}
    reference: dict[str, Any] | None = None
    try:
        with (warren_cluster(root, args.nodes, ra, args.record, release) if not urls
              else _external(urls)) as target:
            results = measure(target, phases, args, root)
            if args.profile:
                profile = profile_phase(target, args, root, py_spy)
        if want_rabbit:
            try:
                with rabbit_target(root / "rabbitmq", args.nodes, ra) as rabbit:
                    reference = {**figures(measure(rabbit, phases, args, root)),
                                 "note": rabbit.label + ", measured in this run"}
            except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
                if args.rabbitmq == "yes":
                    raise
                # auto: warren's figures stand; the fixed reference is used instead
                print(f"RabbitMQ reference not measured: {exc}", flush=True)
                want_rabbit = False
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if reference is None:
        # the fixed figures are a quorum queue's: a classic run has no reference then
        reference = ({**REFERENCE_RABBITMQ_3_10_8, "note": REFERENCE_NOTE}
                     if args.queue_type == "quorum" else {"note": "none measured"})
    ours = figures(results)
    out: dict[str, Any] = {
        "broker": target.label, "queue_type": args.queue_type,
        "release": None if urls else release, **ours,
        "reference": reference,
        "reference_measured_in_run": want_rabbit,
        **ratios(ours, reference),
        "window": WINDOW, "prefetch": PREFETCH, "seconds": args.seconds,
        "warmup": args.warmup, "nodes": len(urls) or args.nodes, "ra": ra,
        "record_state_digest_every": args.record, "consumer_node": args.consumer_node,
    }
    if profile:
        out["profile_top_self"] = {k: [f"{f} {s}%" for f, s, _ in v.rows[:5]]
                                   for k, v in profile.items()}
        out["profile_by_package"] = {k: dict(v.packages) for k, v in profile.items()
                                     if v.packages}
    shown = ", ".join(f"{k} {reference[k]}" for k in (
        "msgs_s_16b", "msgs_s_16b_transient", "msgs_s_1k", "confirm_p50_ms_w1")
        if k in reference)
    print(f"reference ({reference['note']}): {shown}", flush=True)
    print(f"{target.label} / reference: " + ", ".join(
        f"{k.removeprefix('ratio_').removesuffix('_vs_reference')} x{v}"
        for k, v in ratios(ours, reference).items()), flush=True)
    print(json.dumps(out))
    return 0


def add_side_by_side_options(parser: argparse.ArgumentParser) -> None:
    """The options of one run per release (``bench/e2e_versions.py``)."""
    parser.add_argument("--rabbitmq-version", action="append", default=[], metavar="V",
                        help="measure warren modelling each of these releases side by "
                             "side (repeatable or comma separated: 3.10,4.0,4.2,4.3)")
    parser.add_argument("--memory-messages", type=int, default=20000, metavar="N",
                        help="with --rabbitmq-version: RSS per queued message with N "
                             "messages in a queue, per release (0: not measured)")


def side_by_side(parser: argparse.ArgumentParser, args: argparse.Namespace,
                 phases: list[Phase], ra: dict[str, Any], want_rabbit: bool,
                 urls: list[str]) -> int:
    """``--rabbitmq-version``: one cluster per release, then the reference; the table
    and the JSON line keyed by release (``bench/e2e_versions.py``)."""
    from bench import e2e_versions

    try:
        versions = e2e_versions.parse_versions(args.rabbitmq_version)
    except ValueError as exc:
        parser.error(f"--rabbitmq-version: {exc}")
    for flag, given in (("--release", args.release), ("--amqp-url", urls),
                        ("--profile", args.profile)):
        if given:
            parser.error(f"--rabbitmq-version: not with {flag}")
    root = Path(tempfile.mkdtemp(prefix="warren-bench-e2e-", dir=args.dir))
    try:
        results = e2e_versions.run_side_by_side(args, versions, phases, ra, want_rabbit, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(e2e_versions.table(results), flush=True)
    print(e2e_versions.report(results, args))
    return 0


def ra_settings(pairs: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` Ra system settings: ``true`` / ``false`` are booleans, digits are
    integers, anything else a name; checked as a warren node checks its ``ra`` table."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, eq, text = pair.partition("=")
        if not eq:
            raise ValueError(f"{pair!r} is not KEY=VALUE")
        value: Any = {"true": True, "false": False}.get(text, text)
        if isinstance(value, str) and value.isdigit():
            value = int(value)
        out[key.strip()] = value
    return check_ra_keys(out)


@contextmanager
def rabbit_target(root: Path, nodes: int,
                  ra: dict[str, Any] | None = None) -> Iterator[Target]:
    """A RabbitMQ cluster of `nodes` on loopback, as a target like warren's."""
    started = time.monotonic()
    with rabbitmq_local.rabbitmq_cluster(root, nodes, ra) as rabbit:
        version = rabbit.version()
        print(f"RabbitMQ {version}: {nodes} nodes ready in "
              f"{time.monotonic() - started:.1f} s", flush=True)
        yield Target(f"RabbitMQ {version} ({nodes} nodes, local)", [n.url for n in rabbit.nodes],
                     other_nodes={f"node-{i}": pid for i, pid in
                                  enumerate(rabbit.vm_pids(), start=1)})


@contextmanager
def _external(urls: list[str]) -> Iterator[Target]:
    yield Target("amqp-url", urls)


if __name__ == "__main__":
    sys.exit(main())
