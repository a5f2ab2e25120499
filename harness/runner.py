"""Run one scenario end to end: cluster, workload, faults, drain, history, verdict.

The steps, in order: a run directory (temporary unless given); N node processes
recording into it; the scenario's queues declared over AMQP; one process per
workload client; the fault schedule played for the scenario's duration; every fault
healed and a settle period; the drain (publishers first, so consumers can see the
queues run empty); the nodes stopped with SIGTERM so their recorders flush; the raw
segments compacted; `warren analyze` run in a process of its own (Spark stays out of
this one); the verdict table compared with the scenario's expectations. Whatever
happens, every child process is ended before `run_scenario` returns.

Exit codes: 0 the analysis agrees with the expectations, 1 it does not, 2 unknown,
3 analysis error, 4 bad history, 5 the harness itself failed (a node did not start).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import pika
import pika.exceptions
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from analysis import verdict_table as verdict_text
from analysis.compact import compact
from analysis.recorder import Recorder
from harness import procs
from harness.cluster import Cluster, NodeArgv, NodeStartError, warren_node_argv
from harness.nemesis import Nemesis
from harness.scenarios import ROLES, Scenario
from harness.workload import ClientConfig
from releases import DEFAULT_SERIES, RELEASES

__all__ = ["EXIT_HARNESS", "Analyzer", "RunResult", "run_scenario"]

EXIT_PASS, EXIT_MISMATCH, EXIT_UNKNOWN, EXIT_HARNESS = 0, 1, 2, 5

#: analyses a compacted run directory in this process: writes
#: `<run>/analysis/summary.json` and returns `warren analyze`'s exit code. Test
#: sessions pass one that keeps a single SparkSession for all their runs.
Analyzer = Callable[[Path], int]


@dataclass
class Client:
    cfg: ClientConfig
    proc: subprocess.Popen[bytes]

    @property
    def role(self) -> str:
        return self.cfg.spec.role


@dataclass
class RunResult:
    run_dir: Path
    exit_code: int
    summary: dict[str, Any] | None = None
    #: expectation mismatches, as sentences
    unmet: list[str] = field(default_factory=list)
    #: faults that could not be injected or healed, clients that ended badly
    problems: list[str] = field(default_factory=list)
    analysis_code: int | None = None

    @property
    def report(self) -> Path:
        return self.run_dir / "analysis" / "report.html"


def run_scenario(scenario: Scenario, run_dir: str | Path | None = None, *,
                 console: Console | None = None, seed: int = 0, analyze: bool = True,
                 backend: str = "rabbit", node_argv: NodeArgv = warren_node_argv,
                 analysis_argv: list[str] | None = None, analyzer: Analyzer | None = None,
                 nemesis_cls: type[Nemesis] = Nemesis,
                 rabbitmq_version: str | None = None) -> RunResult:
    """Run `scenario`; see the module docstring for the steps and exit codes.

    By default the analysis is `warren analyze` in a process of its own (Spark stays
    out of this one); `analyzer` runs it in this process instead. `nemesis_cls` lets a
    test add fault kinds of its own (a `_start_<fault>` method) without them becoming
    part of the scenario catalogue. `rabbitmq_version` makes every node model that
    RabbitMQ release (the nodes' ``rabbitmq_version``; their default when None) and
    is recorded in the run's metadata, so runs of one scenario under several releases
    can be compared (`warren scenario compare`).
    """
    errors = scenario.validate()
    if errors:
        raise ValueError(f"scenario {scenario.name}: " + "; ".join(errors))
    out = console or Console()
    run = Path(run_dir) if run_dir else Path(tempfile.mkdtemp(prefix=f"warren-{scenario.name}-"))
    run.mkdir(parents=True, exist_ok=True)
    run_id = f"{scenario.name}-{time.strftime('%Y%m%dT%H%M%S')}"
    result = RunResult(run, EXIT_HARNESS)
    harness_rec = Recorder(run, run_id, "harness")
    nemesis_rec = Recorder(run, run_id, "nemesis")
    _record_meta(harness_rec, scenario, seed, backend, rabbitmq_version)
    extra: dict[str, Any] = {"state_digest_every": scenario.state_digest_every}
    if rabbitmq_version is not None:
        extra["rabbitmq_version"] = rabbitmq_version
    cluster = Cluster(run, scenario.nodes, backend=backend, net_ticktime=scenario.net_ticktime,
                      run_id=run_id, history_dir=run, amqp=scenario.amqp, node_argv=node_argv,
                      extra_config=extra)
    clients: list[Client] = []
    try:
        release = "" if rabbitmq_version is None else f", RabbitMQ {rabbitmq_version}"
        out.print(f"[bold]{scenario.name}[/]: {scenario.nodes} nodes{release}, "
                  f"{scenario.duration_s:g} s, run dir {run}")
        cluster.start()
        _declare(cluster, scenario)
        clients = _start_clients(cluster, scenario, run, run_id)
        nemesis = nemesis_cls(cluster, nemesis_rec.sink, seed=seed)
        _play(scenario, nemesis, out)
        result.problems += nemesis.errors
        time.sleep(scenario.settle_s)
        out.print("drain")
        result.problems += _drain(clients, scenario.drain_timeout_s)
        cluster.stop()
    except NodeStartError as exc:
        result.problems.append(str(exc))
        out.print(f"[red]harness failed:[/] {exc}")
        return result
    finally:
        for c in clients:
            procs.kill_group(c.proc)
        cluster.close()
        nemesis_rec.close()
        harness_rec.close()
    compact(run)
    if not analyze:
        for line in result.problems:
            out.print(f"[yellow]- {line}[/]")
        result.exit_code = EXIT_PASS
        return result
    return _analyze(result, scenario, out, analysis_argv, analyzer)


def _record_meta(rec: Recorder, scenario: Scenario, seed: int, backend: str,
                 rabbitmq_version: str | None = None) -> None:
    try:
        version = metadata.version("warren")
    except metadata.PackageNotFoundError:
        version = "unknown"
    config: dict[str, Any] = {"scenario": dataclasses.asdict(scenario), "seed": seed,
                              "backend": backend, "rabbitmq_version": rabbitmq_version}
    # the record of the release the nodes run (the default one when none is named):
    # the analysis reads a quorum queue's limit when it declares none, which returns
    # count toward it and what x-delivery-count carries from it
    release = RELEASES[rabbitmq_version or DEFAULT_SERIES]
    config["quorum_default_delivery_limit"] = release.default_delivery_limit
    config["release"] = release.recorded()
    rec.record("run_meta", emitter="harness", started_wall_ns=time.time_ns(),
               warren_version=version, config_json=json.dumps(config, default=str),
               queues_json=json.dumps(scenario.queues_meta()), workload=scenario.workload,
               state_digest_every=scenario.state_digest_every, drain_expected=True)
    rec.flush()


def _declare(cluster: Cluster, scenario: Scenario, attempts: int = 20) -> None:
    """Declare every queue on the first node (retried while the cluster settles)."""
    host, port = cluster.amqp_endpoints()[0]
    last: Exception | None = None
    for _ in range(attempts):
        try:
            conn = pika.BlockingConnection(pika.ConnectionParameters(host, port))
            try:
                ch = conn.channel()
                for q in scenario.queues:
                    ch.queue_declare(q.name, durable=True, arguments=q.arguments())
            finally:
                if conn.is_open:
                    conn.close()
            return
        except pika.exceptions.AMQPError as exc:
            last = exc
            time.sleep(0.5)
    raise NodeStartError(f"cannot declare the scenario's queues: {last!r}")


def _start_clients(cluster: Cluster, scenario: Scenario, run: Path,
                   run_id: str) -> list[Client]:
    clients = []
    k = 0
    for spec in scenario.clients:
        for _ in range(spec.count):
            k += 1
            cfg = ClientConfig(f"client-{k}", k, str(run), run_id, cluster.amqp_endpoints(),
                               spec, drain_timeout_s=scenario.drain_timeout_s)
            path = run / "clients" / f"{cfg.client}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(cfg.to_json())
            argv = [sys.executable, "-m", "harness.workload", str(path)]
            clients.append(Client(cfg, procs.spawn(argv, path.with_suffix(".log"))))
    return clients


def _play(scenario: Scenario, nemesis: Nemesis, out: Console) -> None:
    """The fault schedule under a progress bar, then the rest of the duration."""
    columns = (TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    with Progress(*columns, console=out, transient=True) as bar:
        task = bar.add_task("workload", total=scenario.duration_s)
        t0 = time.monotonic()

        def tick() -> None:
            open_ = ", ".join(f"{a.spec.fault}({','.join(n.short for n in a.targets)})"
                              for a in nemesis.active)
            bar.update(task, completed=min(time.monotonic() - t0, scenario.duration_s),
                       description=f"workload {open_}" if open_ else "workload")

        nemesis.run(list(scenario.faults), t0, tick=tick)
        while time.monotonic() - t0 < scenario.duration_s:
            tick()
            time.sleep(0.1)
        tick()


def _drain(clients: list[Client], timeout_s: float) -> list[str]:
    """Publishing roles drain first (their confirms; RPC clients their replies), then
    consuming roles (the queues)."""
    problems = []
    for group_name in ("publish", "consume"):
        group = [c for c in clients if ROLES[c.role] == group_name]
        for c in group:
            c.cfg.request_drain()
        deadline = time.monotonic() + timeout_s + 10
        for c in group:
            try:
                code = c.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                code = None
            if code != 0:
                problems.append(f"{c.cfg.client} ({c.role}) ended with {code}; "
                                f"see {c.cfg.run_dir}/clients/{c.cfg.client}.log")
    return problems


def _analyze(result: RunResult, scenario: Scenario, out: Console,
             argv: list[str] | None, analyzer: Analyzer | None = None) -> RunResult:
    with out.status("analysis (PySpark)"):
        if analyzer is not None:
            code = analyzer(result.run_dir)
        else:
            cmd = argv or [sys.executable, "-m", "analysis.cli", "analyze"]
            done = subprocess.run([*cmd, str(result.run_dir)], capture_output=True,
                                  check=False)
            code = done.returncode
            (result.run_dir / "analysis.log").write_bytes(done.stdout + done.stderr)
    result.analysis_code = code
    summary_path = result.run_dir / "analysis" / "summary.json"
    if code in (3, 4) or not summary_path.exists():
        out.print(f"[red]analysis failed ({code})[/]; "
                  f"see {result.run_dir / 'analysis.log'}")
        result.exit_code = code if code in (3, 4) else 3
        return result
    result.summary = json.loads(summary_path.read_text())
    result.unmet = unmet_expectations(scenario, result.summary)
    statuses = {c["status"] for c in result.summary["checks"].values()}
    if result.unmet:
        result.exit_code = EXIT_MISMATCH
    elif "unknown" in statuses and "unknown" not in scenario.expect.values():
        result.exit_code = EXIT_UNKNOWN
    else:
        result.exit_code = EXIT_PASS
    out.print(verdict_table(scenario, result.summary, out.width))
    for line in result.unmet + result.problems:
        out.print(f"[yellow]- {line}[/]")
    out.print(f"valid: {result.summary.get('valid')}   report: {result.report}")
    return result


def unmet_expectations(scenario: Scenario, summary: dict[str, Any]) -> list[str]:
    """Where the analysis disagrees with the scenario: a named check with another
    status, or any check failing that the scenario did not expect to fail."""
    checks = summary.get("checks", {})
    unmet = []
    for check, expected in sorted(scenario.expect.items()):
        got = checks.get(check, {}).get("status", "missing")
        if got != expected:
            unmet.append(f"{check}: expected {expected}, got {got}")
    for check, row in sorted(checks.items()):
        if row.get("status") == "fail" and check not in scenario.expect:
            unmet.append(f"{check}: fail ({row.get('violations')} violations)")
    return unmet


STYLE = {"pass": "green", "fail": "red", "unknown": "yellow", "skipped": "dim"}


VERDICT_COLUMNS = ("check", "status", "expected", "examined", "violations", "sample", "note")


def verdict_table(scenario: Scenario, summary: dict[str, Any], width: int) -> Text:
    """The verdicts beside the expectations, fitted to `width` columns with each status
    coloured (whole notes are in the report)."""
    checks = summary.get("checks", {})
    rows = [[check, str(row.get("status")), scenario.expect.get(check, ""),
             row.get("examined", ""), row.get("violations", ""),
             ",".join(str(s) for s in row.get("sample", [])[:5]), row.get("note") or ""]
            for check, row in checks.items()]
    table = verdict_text.fit(VERDICT_COLUMNS, rows, width)
    text = Text(f"{scenario.name}: verdicts\n")
    start, end = table.spans["status"]
    status_lines = dict(zip(table.row_lines, (r[1] for r in rows), strict=True))
    for i, line in enumerate(table.lines):
        part = Text(line + "\n")
        if i in status_lines:
            part.stylize(STYLE.get(status_lines[i], "white"), start, end)
        text.append_text(part)
    text.rstrip()
    return text
