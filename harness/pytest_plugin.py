"""pytest plugin: a `warren_cluster` fixture for fault tests of your own.

The scenario runner answers "does warren survive this schedule of faults?"; this
plugin answers the same question for a test someone writes by hand. The fixture starts
N real node processes recording their history, hands the test fault helpers (SIGKILL
and restart, SIGSTOP and SIGCONT, partitions through `warren ctl`, a queue's leader)
and pika connections whose every operation is recorded as `client_ops`, exactly as the
workload clients record theirs. When the test body has passed, the nodes are stopped
(their recorders flush), the history is compacted and analysed on PySpark, and a
failing check fails the test with the verdict table. Whatever happens, every node
process is killed at teardown.

    @pytest.mark.warren_cluster(nodes=3, backend="rabbit")
    def test_confirmed_survive_a_leader_kill(warren_cluster):
        warren_cluster.declare_queue("q1")
        with warren_cluster.connect() as conn:
            sent = [conn.channel().publish("q1") for _ in range(100)]
        warren_cluster.kill(warren_cluster.leader("q1"))
        assert {d.msg_id for d in warren_cluster.drain("q1")} >= set(sent)

The plugin is an entry point (`pytest11`), so it loads in every pytest run: this
module imports only the standard library and pytest, and its hook returns at once for
tests that do not use the fixture. pika, pyarrow and Spark are imported on first use.

Options: `--warren-no-analysis` (stop and keep the raw history, skip compaction and
Spark), `--warren-spark-master URL` (default `local[2]`). Marker settings: `nodes`,
`backend`, `net_ticktime`, `amqp`, `start_timeout_s` and `on_unknown`: a check that
could not decide (for instance a final-state check of a test that never drained) is
an `UnknownVerdict` warning by default, and fails the test with `on_unknown="fail"`.
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from analysis.client_ops import ClientChannel
    from analysis.recorder import Recorder
    from harness.cluster import Cluster, NodeSpec
    from harness.nemesis import ActiveFault, Nemesis

__all__ = ["CheckFailed", "Delivery", "SparkAnalyzer", "WarrenChannel", "WarrenCluster",
           "WarrenConnection"]

FIXTURE = "warren_cluster"
MARKER = "warren_cluster"
#: the history node and client name of the test process's own operations
CLIENT = "pytest"
DEFAULTS: dict[str, Any] = {"nodes": 3, "backend": "rabbit", "net_ticktime": 2.0,
                            "amqp": {}, "start_timeout_s": 90.0, "on_unknown": "warn",
                            "state_digest_every": 1}
#: what a check that could not decide (`unknown`, exit code 2) does to a test
ON_UNKNOWN = ("warn", "fail")


class CheckFailed(AssertionError):
    """The recorded history of a test fails a check (the message is the verdict table)."""


class UnknownVerdict(UserWarning):
    """A check could not decide on a test's history (say, no completed drain)."""


# --------------------------------------------------------------------------- hooks


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("warren", "warren fault tests (the warren_cluster fixture)")
    group.addoption("--warren-no-analysis", action="store_true", default=False,
                    help="do not compact and analyse the history of warren_cluster tests")
    group.addoption("--warren-spark-master", default="local[2]",
                    help="Spark master for the history checks (default local[2])")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(nodes=3, backend='rabbit', net_ticktime=2.0, amqp={{}}, "
        "state_digest_every=1): "
        "settings of the warren_cluster fixture")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """After a passing test body, check its history: a failing check fails the test
    itself (not its teardown), with the verdict table as the failure."""
    result = yield
    if FIXTURE in getattr(item, "fixturenames", ()):
        cluster = getattr(item, "funcargs", {}).get(FIXTURE)
        if isinstance(cluster, WarrenCluster):
            cluster.finish()
    return result


# ------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="session")
def warren_analyzer(pytestconfig: pytest.Config) -> Iterator[SparkAnalyzer]:
    """One SparkSession for every warren test of the session, started on first use."""
    analyzer = SparkAnalyzer(pytestconfig.getoption("--warren-spark-master"))
    try:
        yield analyzer
    finally:
        analyzer.close()


@pytest.fixture
def warren_cluster(request: pytest.FixtureRequest, tmp_path: Path,
                   warren_analyzer: SparkAnalyzer) -> Iterator[WarrenCluster]:
    """N recorded node processes; settings from the marker, then from `request.param`."""
    settings = dict(DEFAULTS)
    marker = request.node.get_closest_marker(MARKER)
    if marker is not None:
        if marker.args:
            raise pytest.UsageError(f"{MARKER}: keyword arguments only")
        settings.update(marker.kwargs)
    settings.update(getattr(request, "param", None) or {})
    analyze = not request.config.getoption("--warren-no-analysis")
    cluster = WarrenCluster(tmp_path / "warren", settings,
                            warren_analyzer if analyze else None)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


# ------------------------------------------------------------------------ analysis


class SparkAnalyzer:
    """The analysis in this process on one lazily started SparkSession.

    Callable as `harness.runner.Analyzer`: so scenario runs in tests share the JVM
    with the fixture's checks instead of starting one per run.
    """

    def __init__(self, master: str = "local[2]") -> None:
        self.master = master
        self._session: Any = None

    @property
    def session(self) -> Any:
        from analysis.spark import SMALL_HISTORIES_CONF, check_java, get_session

        if self._session is None or self._session.sparkContext._jsc is None:
            check_java()
            self._session = get_session(self.master, conf=SMALL_HISTORIES_CONF, log_level="ERROR")
        return self._session

    def analyze(self, run_dir: Path,
                only: list[str] | None = None) -> tuple[int, dict[str, Any]]:
        """Analyse a compacted run into `<run_dir>/analysis`: (exit code, summary).
        `only` runs just these checks (a test about one check need not pay for all)."""
        from analysis.analyze import analyze_run

        return analyze_run(self.session, run_dir, only=only)

    def __call__(self, run_dir: Path) -> int:
        return self.analyze(run_dir)[0]

    def close(self) -> None:
        if self._session is not None:
            self._session.stop()
            self._session = None


def verdict_text(summary: dict[str, Any]) -> str:
    """The verdict table as `warren analyze` prints it."""
    from analysis.analyze import format_table

    rows = [{"check": k, **{c: v.get(c) for c in ("status", "examined", "violations", "note")},
             "sample": ",".join(str(s) for s in v.get("sample", []))}
            for k, v in summary.get("checks", {}).items()]
    return format_table(rows)


def failed_checks(summary: dict[str, Any]) -> list[str]:
    return checks_with(summary, "fail")


def checks_with(summary: dict[str, Any], status: str) -> list[str]:
    return sorted(k for k, v in summary.get("checks", {}).items() if v.get("status") == status)


def judge(code: int, summary: dict[str, Any], on_unknown: str) -> tuple[str | None, str | None]:
    """What an analysed history does to a passing test: ``(failure, warning)`` texts.

    A failing check or an analysis that could not run (exit codes 3, 4) fails the
    test. A check that could not decide (``unknown``) fails it only with
    ``on_unknown="fail"``; by default it is a warning, because a test that never
    drains leaves the final-state checks undecided by design.
    """
    failed = failed_checks(summary)
    if failed or code in (3, 4):
        return f"the recorded history fails {', '.join(failed) or f'analysis ({code})'}", None
    unknown = checks_with(summary, "unknown")
    if not unknown:
        return None, None
    text = f"the recorded history leaves {', '.join(unknown)} undecided"
    return (text, None) if on_unknown == "fail" else (None, text)


# ------------------------------------------------------------------------- clients


@dataclass
class Delivery:
    """One message as the test received it (`msg_id` is -1 for a foreign message)."""

    msg_id: int
    body: bytes
    delivery_tag: int
    redelivered: bool
    headers: dict[str, Any] = field(default_factory=dict)


class WarrenConnection:
    """A pika BlockingConnection whose channels record every operation.

    A connection that breaks (its node was killed, cut off) records what it had not
    seen confirmed as indeterminate and raises the pika error; open another one.
    """

    def __init__(self, owner: WarrenCluster, node: NodeSpec) -> None:
        import pika

        self.owner = owner
        self.node = node
        owner._conn_n += 1
        self.conn_id = f"{CLIENT}.{owner._conn_n}"
        params = pika.ConnectionParameters("127.0.0.1", node.amqp_port, heartbeat=5,
                                           connection_attempts=1, socket_timeout=5,
                                           blocked_connection_timeout=None)
        self.conn = pika.BlockingConnection(params)
        self.channels: list[WarrenChannel] = []
        self.closed = False
        owner._connections.append(self)

    def channel(self) -> WarrenChannel:
        """A new channel in confirm mode."""
        ch = WarrenChannel(self, self.conn.channel())
        self.channels.append(ch)
        return ch

    def broken(self, error: str) -> None:
        """The connection is gone: every channel closes abnormally in the history."""
        self._end(error)

    def close(self) -> None:
        """Close normally (a no-op in the history after the connection broke)."""
        import pika.exceptions

        self._end(None)
        try:
            if self.conn.is_open:
                self.conn.close()
        except pika.exceptions.AMQPError:
            pass

    def _end(self, error: str | None) -> None:
        if self.closed:
            return
        self.closed = True
        for ch in self.channels:
            ch.gone(error)
        self.owner.history.conn_close(self.conn_id, error)

    def __enter__(self) -> WarrenConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class WarrenChannel:
    """Publishes with confirms and consumes with manual acks, recording each op."""

    def __init__(self, conn: WarrenConnection, channel: Any) -> None:
        self.conn = conn
        self.ch = channel
        self.rec: ClientChannel | None = conn.owner.history.channel(conn.conn_id,
                                                                    channel.channel_number)
        self.seq = 0
        channel.confirm_delivery()

    def _rec(self) -> ClientChannel:
        if self.rec is None:
            raise RuntimeError(f"channel {self.conn.conn_id}/{self.ch.channel_number} is closed")
        return self.rec

    def gone(self, error: str | None) -> None:
        if self.rec is not None:
            self.rec.close(error)
            self.rec = None

    def _broken(self, exc: Exception) -> None:
        """A channel error ends this channel; any other AMQP error the connection."""
        import pika.exceptions

        error = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, pika.exceptions.ChannelClosed):
            self.gone(error)
        else:
            self.conn.broken(error)

    def publish(self, queue: str, body: bytes | None = None,
                headers: dict[str, Any] | None = None) -> int:
        """Publish to `queue` (default exchange) and wait for the confirm; the message id.

        A nack raises `pika.exceptions.NackError` (recorded as `pub_nack`); a broken
        connection raises its pika error (the publish is recorded as unknown).
        """
        import pika
        import pika.exceptions

        from harness.workload import ID_HEADER, PUB_HEADER, SEQ_HEADER, message_body

        rec = self._rec()
        msg_id = self.conn.owner.next_msg_id()
        self.seq += 1
        body = message_body(msg_id, 64) if body is None else body
        props = pika.BasicProperties(delivery_mode=2, headers={
            **(headers or {}), ID_HEADER: msg_id, PUB_HEADER: rec.pub_chan,
            SEQ_HEADER: self.seq})
        rec.publish(queue, msg_id, self.seq, body)
        try:
            self.ch.basic_publish("", queue, body, props)
        except pika.exceptions.NackError:
            rec.pub_nack(self.seq)
            raise
        except pika.exceptions.AMQPError as exc:
            self._broken(exc)
            raise
        rec.confirm(self.seq)
        return msg_id

    def _delivered(self, queue: str, method: Any, props: Any, body: bytes,
                   consumer_tag: str | None, kind: str) -> Delivery:
        from harness.workload import PUB_HEADER, SEQ_HEADER, msg_id_of

        headers = dict(props.headers or {})
        pub, seq = headers.get(PUB_HEADER), headers.get(SEQ_HEADER)
        count = headers.get("x-delivery-count")
        d = Delivery(msg_id_of(headers, body), body, int(method.delivery_tag),
                     bool(method.redelivered), headers)
        self._rec().deliver(queue, consumer_tag, d.delivery_tag, d.msg_id, body, d.redelivered,
                            pub_chan=pub.decode() if isinstance(pub, bytes) else pub,
                            pub_seq=None if seq is None else int(seq),
                            delivery_count=None if count is None else int(count), kind=kind)
        return d

    def get(self, queue: str) -> Delivery | None:
        """`basic.get` without auto-ack; None when the queue is empty. Ack it yourself."""
        import pika.exceptions

        try:
            method, props, body = self.ch.basic_get(queue, auto_ack=False)
        except pika.exceptions.AMQPError as exc:
            self._broken(exc)
            raise
        if method is None:
            return None
        return self._delivered(queue, method, props, body, None, "get_ok")

    def ack(self, delivery: Delivery) -> None:
        import pika.exceptions

        try:
            self.ch.basic_ack(delivery.delivery_tag)
        except pika.exceptions.AMQPError as exc:
            self._broken(exc)
            raise
        self._rec().ack(delivery.delivery_tag)

    def consume(self, queue: str, max_messages: int | None = None, idle_s: float = 1.0,
                prefetch: int = 10, timeout_s: float = 30.0) -> list[Delivery]:
        """Consume with manual acks until `max_messages`, or nothing came for `idle_s`.

        Each delivery is acked as it arrives; deliveries beyond `max_messages` are
        rejected with requeue, so the history accounts for every one of them.
        """
        import pika.exceptions

        rec = self._rec()
        got: list[Delivery] = []
        # the broker cannot see the client's connection id: this argument names the
        # consumer as the history's consumer_key does (as the workload clients do)
        who = {"x-warren-consumer": f"{self.conn.conn_id}/{self.ch.channel_number}"}

        def on_message(_ch: Any, method: Any, props: Any, body: bytes) -> None:
            d = self._delivered(queue, method, props, body, method.consumer_tag, "deliver")
            if max_messages is not None and len(got) >= max_messages:
                self.ch.basic_reject(d.delivery_tag, requeue=True)
                rec.reject(d.delivery_tag, requeue=True)
                return
            self.ch.basic_ack(d.delivery_tag)
            rec.ack(d.delivery_tag)
            got.append(d)

        try:
            self.ch.basic_qos(prefetch_count=prefetch)
            tag = self.ch.basic_consume(queue, on_message, auto_ack=False, arguments=who)
            rec.consume_ok(queue, tag)
            deadline = time.monotonic() + timeout_s
            last, seen = time.monotonic(), 0
            while time.monotonic() < deadline:
                if max_messages is not None and len(got) >= max_messages:
                    break
                self.conn.conn.process_data_events(time_limit=0.1)
                if len(got) != seen:
                    last, seen = time.monotonic(), len(got)
                elif time.monotonic() - last >= idle_s:
                    break
            self.ch.basic_cancel(tag)
            rec.cancel(queue, tag)
        except pika.exceptions.AMQPError as exc:
            self._broken(exc)
            raise
        return got

    def message_count(self, queue: str) -> int:
        """Ready messages of `queue` (passive declare)."""
        return int(self.ch.queue_declare(queue, passive=True).method.message_count)


# ------------------------------------------------------------------------- cluster


class WarrenCluster:
    """What a `warren_cluster` test holds: the nodes, fault helpers, recorded clients.

    Nodes are `harness.cluster.NodeSpec`s; every helper that takes a node also takes
    its short name (`"n2"`). Faults are recorded in `nemesis_events`, so the report
    shades their windows as it does for a scenario.
    """

    def __init__(self, run_dir: Path, settings: dict[str, Any],
                 analyzer: SparkAnalyzer | None) -> None:
        from analysis.client_ops import ClientHistory
        from analysis.recorder import Recorder
        from fifo.replica_trace import valid_digest_every
        from harness.cluster import Cluster
        from harness.nemesis import Nemesis

        unknown = set(settings) - set(DEFAULTS)
        if unknown:
            raise pytest.UsageError(f"{MARKER}: unknown settings {sorted(unknown)}")
        if settings["on_unknown"] not in ON_UNKNOWN:
            raise pytest.UsageError(f"{MARKER}: on_unknown must be one of {ON_UNKNOWN}, "
                                    f"not {settings['on_unknown']!r}")
        k = settings["state_digest_every"]
        if not valid_digest_every(k):
            raise pytest.UsageError(f"{MARKER}: state_digest_every must be an integer of "
                                    f"at least 1, not {k!r}")
        self.run_dir = Path(run_dir)
        self.settings = settings
        self.analyzer = analyzer
        self.run_id = f"pytest-{time.strftime('%Y%m%dT%H%M%S')}"
        self.cluster: Cluster = Cluster(
            self.run_dir, int(settings["nodes"]), backend=str(settings["backend"]),
            net_ticktime=float(settings["net_ticktime"]), run_id=self.run_id,
            history_dir=self.run_dir, amqp=dict(settings["amqp"]),
            extra_config={"state_digest_every": k})
        self.recorder: Recorder = Recorder(self.run_dir, self.run_id, CLIENT)
        self.history = ClientHistory(self.recorder.sink, CLIENT)
        self.nemesis: Nemesis = Nemesis(self.cluster, self.recorder.sink)
        self.queues: dict[str, dict[str, Any]] = {}
        self.summary: dict[str, Any] | None = None
        self.drained = False
        self._started_wall_ns = time.time_ns()
        self._faults: dict[tuple[str, str], ActiveFault] = {}
        self._connections: list[WarrenConnection] = []
        self._conn_n = 0
        self._msg_n = 0
        self._finished = False

    # -------------------------------------------------------------- lifecycle

    def start(self) -> None:
        self.cluster.start(timeout_s=float(self.settings["start_timeout_s"]))

    def close(self) -> None:
        """Kill every node process and close the recorder; safe at any time."""
        try:
            self.cluster.close()
        finally:
            self.recorder.close()

    def finish(self) -> None:
        """End of a passing test: heal, stop, compact, analyse; CheckFailed on a failure."""
        if self._finished:
            return
        self._finished = True
        for (fault, _node), active in list(self._faults.items()):
            # a node the test left dead stays dead: only its fault window is closed
            self.nemesis.stop(active, undo=fault != "kill")
        self._faults.clear()
        for conn in list(self._connections):
            conn.close()
        self._record_meta()
        self.recorder.close()
        self.cluster.stop()
        if self.analyzer is None:
            return
        from analysis.compact import compact

        compact(self.run_dir)
        code, self.summary = self.analyzer.analyze(self.run_dir)
        failure, warning = judge(code, self.summary, str(self.settings["on_unknown"]))
        details = (f"{verdict_text(self.summary)}\n"
                   f"report: {self.run_dir / 'analysis' / 'report.html'}")
        if failure is not None:
            raise CheckFailed(f"{failure}\n{details}")
        if warning is not None:
            warnings.warn(UnknownVerdict(f"{warning}\n{details}"), stacklevel=1)

    def _record_meta(self) -> None:
        from importlib import metadata

        try:
            version = metadata.version("warren")
        except metadata.PackageNotFoundError:
            version = "unknown"
        from releases import DEFAULT_SERIES, RELEASES

        # the nodes run the default release: the analysis judges by its record
        config = {"pytest": self.settings, "backend": self.settings["backend"],
                  "release": RELEASES[DEFAULT_SERIES].recorded()}
        self.recorder.record(
            "run_meta", emitter="harness", started_wall_ns=self._started_wall_ns,
            warren_version=version, config_json=json.dumps(config, default=str),
            queues_json=json.dumps(self.queues), workload="pytest",
            state_digest_every=self.settings["state_digest_every"],
            drain_expected=self.drained)

    # ---------------------------------------------------------------- lookups

    @property
    def nodes(self) -> list[NodeSpec]:
        return list(self.cluster.nodes)

    def node(self, node: NodeSpec | str) -> NodeSpec:
        return self.cluster.node(node if isinstance(node, str) else node.name)

    def live(self) -> list[NodeSpec]:
        return self.cluster.live()

    def leader(self, queue: str, timeout_s: float = 30.0) -> NodeSpec:
        """The node of `queue`'s leader, waiting for an election if there is none."""
        from harness.cluster import CtlError

        deadline = time.monotonic() + timeout_s
        while True:
            try:
                leader = self.cluster.leader_of(queue)
            except CtlError:
                leader = None
            if leader is not None and leader.running and not leader.paused:
                return leader
            if time.monotonic() > deadline:
                raise TimeoutError(f"queue {queue} has no leader after {timeout_s} s")
            time.sleep(0.2)

    def ctl(self, node: NodeSpec | str, *args: str) -> Any:
        """`warren ctl` on one node, parsed JSON (see docs/broker.md)."""
        return self.cluster.ctl(self.node(node).name, *args)

    # ----------------------------------------------------------------- faults

    def _inject(self, fault: str, nodes: list[NodeSpec]) -> ActiveFault:
        from harness.scenarios import FaultSpec

        target = ",".join(n.short for n in nodes)
        return self.nemesis.inject(FaultSpec(fault, 0.0, 0.0, f"node:{target}"), nodes)

    def kill(self, node: NodeSpec | str) -> None:
        """SIGKILL the node's processes (its unflushed state is lost)."""
        n = self.node(node)
        self._faults[("kill", n.short)] = self._inject("kill", [n])

    def restart(self, node: NodeSpec | str) -> None:
        """Start a killed node again and wait until it is ready."""
        n = self.node(node)
        active = self._faults.pop(("kill", n.short), None)
        if active is not None:
            self.nemesis.stop(active)
        else:
            self.cluster.start_node(n, wait=True)

    def pause(self, node: NodeSpec | str) -> None:
        """SIGSTOP: the node keeps its sockets but answers nothing."""
        n = self.node(node)
        self._faults[("pause", n.short)] = self._inject("pause", [n])

    def resume(self, node: NodeSpec | str) -> None:
        """SIGCONT a paused node."""
        n = self.node(node)
        active = self._faults.pop(("pause", n.short), None)
        if active is not None:
            self.nemesis.stop(active)
        else:
            self.cluster.resume_node(n)

    def partition(self, *nodes: NodeSpec | str) -> None:
        """Cut `nodes` off from the rest (`warren ctl partition` on every live node)."""
        targets = [self.node(n) for n in nodes]
        key = ",".join(sorted(n.short for n in targets))
        self._faults[("partition", key)] = self._inject("partition", targets)

    def heal(self) -> None:
        """Heal every partition (`warren ctl heal`)."""
        for key in [k for k in self._faults if k[0] == "partition"]:
            self.nemesis.stop(self._faults.pop(key))

    # ---------------------------------------------------------------- clients

    def next_msg_id(self) -> int:
        self._msg_n += 1
        return self._msg_n

    def connect(self, node: NodeSpec | str | None = None) -> WarrenConnection:
        """A recorded AMQP connection to `node` (default: the first live node)."""
        if node is None:
            live = self.live()
            if not live:
                raise RuntimeError("no live node to connect to")
            return WarrenConnection(self, live[0])
        return WarrenConnection(self, self.node(node))

    def declare_queue(self, name: str, prefetch: int | None = None, attempts: int = 20,
                      **spec: Any) -> None:
        """Declare a durable queue (quorum unless `queue_type=`); the keywords are
        `harness.scenarios.QueueSpec`'s fields, and the checks learn them from run_meta."""
        import pika.exceptions

        from harness.scenarios import QueueSpec

        q = QueueSpec(name, **spec)
        last: Exception | None = None
        for _ in range(attempts):
            try:
                with self.connect() as conn:
                    conn.conn.channel().queue_declare(name, durable=True,
                                                      arguments=q.arguments())
                self.queues[name] = q.meta(prefetch)
                return
            except pika.exceptions.AMQPError as exc:
                last = exc
                time.sleep(0.5)
        raise RuntimeError(f"cannot declare {name}: {last!r}")

    def drain(self, queue: str, timeout_s: float = 60.0, idle_s: float = 1.5) -> list[Delivery]:
        """Consume `queue` until it stays empty, from any live node; every delivery.

        Recorded as the workload's drain is (`drain_start`, `drain_end`), which lets
        `total_queue` count a confirmed message never consumed as lost.
        """
        import pika.exceptions

        self.history.drain_start()
        self.drained = True
        got: list[Delivery] = []
        deadline = time.monotonic() + timeout_s
        k = 0
        while time.monotonic() < deadline:
            live = self.live()
            node = live[k % len(live)] if live else None
            k += 1
            if node is None:
                time.sleep(0.5)
                continue
            try:
                with self.connect(node) as conn:
                    ch = conn.channel()
                    while time.monotonic() < deadline:
                        batch = ch.consume(queue, idle_s=idle_s,
                                           timeout_s=max(0.1, deadline - time.monotonic()))
                        got += batch
                        if not batch and ch.message_count(queue) == 0:
                            self.history.drain_end(True)
                            return got
            except pika.exceptions.AMQPError:
                time.sleep(0.5)
        self.history.drain_end(False)
        raise TimeoutError(f"{queue} not drained after {timeout_s} s ({len(got)} consumed)")
