"""Cost of checking a run: every Spark check, cold, on 1M- and 10M-event histories.

Why: `warren analyze` runs after every run, so its cost decides how long a run can be
before checking it gets in the way. This measures what a user pays: a new JVM and
SparkSession (`local[2]`), loading the Parquet history and running every check the way
`analysis.runner` does (count and sample each check's violations), plus the plain
Python reference checker on the same history, which bounds the size a test can afford.

Histories are clean (every check passes) and built from `analysis.synthetic`: a few
chunks are generated in Python, each with its own prefix for queues, connections and
entities and its own message-id range, exactly as the agreement tests merge them.
Generating 10M events row by row takes minutes, so the remaining chunks are copies of
those, made with vectorised Arrow kernels: every string column gets the copy's prefix
and message ids move to the copy's range, so copies share nothing. The merged tables
are written in compaction's layout (`analysis.compact`), so the loader reads them like
a recorded run.

Each history also gets a floor, measured in the same run: a cold session configured the
same way, the same load, and then only the two aggregations that any implementation of
the checks has to do (`floor_queries`: the replicas' applied commands compared block by
block of log indexes, the client operations grouped by message). The checks do those and
much more, so no cold analysis of that history can take less than the floor on that
machine. A time target below the floor cannot be met there. The bench prints the
analysis' cold time as a multiple of the floor (``floor_ratio`` in the JSON).
``--no-floor`` skips it.

Each measurement runs in its own child process so the JVM is cold and the peak RSS is
that of one process tree (Python driver, Spark JVM and its Python workers), sampled
from /proc every 50 ms. The reference checker holds every row as a Python dict (about
2 KB per event), so by default it runs only on histories up to 2M events.

Usage: ``python bench/analysis.py [--sizes 1000000,10000000] [--master local[2]]
[--driver-memory SIZE] [--workers N] [--repeat N] [--reference-max 2000000]
[--keep DIR] [--no-floor]``. Without ``--driver-memory`` the session gets what `warren
analyze` gets (`analysis.spark`: ``WARREN_SPARK_DRIVER_MEMORY``, else 2g), so the figures
are a user's. ``--repeat N`` runs the cold Spark measurement N times per history and reports
the median run (``spark_cold_runs_s`` lists them all): on two shared cores one cold run
of the same code can be several seconds off the next.
Human lines first; the last line printed is one JSON object.

``--workers N`` sets the checks run at once, as `warren analyze --workers`. A class
archive built with `warren spark-archive` is mapped when present, as by `warren
analyze`; the JSON's ``jvm_archive`` says whether, and ``WARREN_SPARK_CDS=0`` measures
without it. The JVM's CPU is printed by thread kind (Spark's tasks, the JIT compilers,
GC, the rest), read from /proc before the session stops.

The figures this script measured, change by change, are in docs/analysis-performance.md
(its last section is this script's own log). The open target is 10M events in 30 s.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pyarrow as pa
import pyarrow.compute as pc

from analysis import compact, schema, synthetic
from bench.proc_cpu import process_cpu_s, stat_cpu_s

RUN_ID = "bench"
CHUNK_EVENTS = 350_000  # one generated chunk (~20k messages over 4 queues)
EVENTS_PER_MESSAGE = 21.29  # measured on analysis.synthetic without anomalies (schema 1.2)
MSG_STRIDE = 10_000_000  # message-id range of one chunk
DISTINCT = 3  # chunks generated in Python; the others are copies of these
PAGE = os.sysconf("SC_PAGE_SIZE")


# -- history -------------------------------------------------------------------------

def _prefix(k: int) -> str:
    return f"g{k:05d}."


def _arrow(rows: list[dict[str, Any]], table: str) -> pa.Table:
    target = schema.schema_of(table)
    return pa.Table.from_pylist([{n: r.get(n) for n in target.names} for r in rows],
                                schema=target)


def _copy(t: pa.Table, src: int, dst: int) -> pa.Table:
    """Chunk `src` renamed to chunk `dst`: prefixes in every string, ids shifted."""
    old, new = _prefix(src), _prefix(dst)
    cols = []
    for f in t.schema:
        col = t[f.name]
        if f.name == "run_id":
            pass
        elif pa.types.is_string(f.type):
            col = pc.replace_substring(col, old, new)
        elif pa.types.is_list(f.type) and pa.types.is_string(f.type.value_type):
            col = pa.chunked_array([pa.ListArray.from_arrays(
                c.offsets, pc.replace_substring(c.flatten(), old, new), mask=c.is_null())
                for c in col.chunks], type=f.type)
        elif f.name == "msg_id":
            col = pc.add(col, (dst - src) * MSG_STRIDE)
        cols.append(col)
    return pa.Table.from_arrays(cols, schema=t.schema)


def build_history(run_dir: Path, events: int, seed: int = 1) -> dict[str, Any]:
    """Write a clean history of about `events` rows under `run_dir/history`."""
    chunks = max(1, round(events / CHUNK_EVENTS))
    messages = max(10, round(events / chunks / EVENTS_PER_MESSAGE))
    start = time.perf_counter()
    bases: list[dict[str, pa.Table]] = []
    queues: dict[str, Any] = {}
    meta_row: dict[str, Any] = {}
    for k in range(min(chunks, DISTINCT)):
        syn = synthetic.generate(seed + k, messages, run_id=RUN_ID, prefix=_prefix(k),
                                 msg_base=k * MSG_STRIDE)
        meta_row = syn.tables.pop("run_meta")[0]
        bases.append({t: _arrow(rows, t) for t, rows in syn.tables.items()})
        del syn
    generated_s = time.perf_counter() - start
    parts: dict[str, list[pa.Table]] = {}
    for k in range(chunks):
        src = k % len(bases)
        qs = json.loads(meta_row["queues_json"].replace(_prefix(len(bases) - 1), _prefix(k)))
        queues.update(qs)
        for t, data in bases[src].items():
            parts.setdefault(t, []).append(data if src == k else _copy(data, src, k))
    meta_row["queues_json"] = json.dumps(queues, sort_keys=True)
    parts["run_meta"] = [_arrow([meta_row], "run_meta")]
    stats = compact.CompactStats()
    for t, tables in parts.items():
        data = pa.concat_tables(tables)
        # compaction's own writer: sorted, zstd, Hive partitions run_id/node
        compact._write(run_dir / "history" / t, t, data.to_batches(), stats)
    del parts, bases
    return {"events": sum(stats.rows.values()), "rows": stats.rows, "chunks": chunks,
            "messages": chunks * messages, "generated_chunks": min(chunks, DISTINCT),
            "generate_s": round(generated_s, 2),
            "build_s": round(time.perf_counter() - start, 2)}


# -- memory --------------------------------------------------------------------------

def _tree_rss(root: int) -> int:
    """Resident bytes of `root` and all its descendants (JVM and Python workers)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/statm") as f:
                pages = int(f.read().split()[1])
        except (OSError, ValueError, IndexError):
            continue
        pid = int(entry)
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(pid)
        rss[pid] = pages * PAGE
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total


class PeakRss:
    """Samples a process tree's RSS in a thread and keeps the maximum."""

    def __init__(self, root: int, every_s: float = 0.05) -> None:
        self.root, self.every_s, self.peak = root, every_s, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _tree_rss(self.root))
            self._stop.wait(self.every_s)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median cold time (the lower middle one of an even number), with
    every run's cold time added and the largest peak RSS of them. One cold run on a
    small machine can be several seconds off the next; taking one real run rather than
    medians of each figure keeps its figures consistent with each other."""
    ordered = sorted(runs, key=lambda r: r["spark_cold_s"])
    pick = dict(ordered[(len(ordered) - 1) // 2])
    pick["spark_cold_runs_s"] = [r["spark_cold_s"] for r in runs]
    pick["peak_rss_mb"] = max(r["peak_rss_mb"] for r in runs)
    return pick


def measure_child(args: list[str]) -> dict[str, Any]:
    """Run this script in `args` mode as a child; its JSON line plus wall time and RSS."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), *args],
                            stdout=subprocess.PIPE, text=True)
    with PeakRss(proc.pid) as peak:
        out, _ = proc.communicate()
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"child {args[0]} failed with exit code {proc.returncode}")
    result = json.loads(out.strip().splitlines()[-1])
    result["process_wall_s"] = round(wall, 2)
    result["peak_rss_mb"] = round(peak.peak / 2**20)
    return result


# -- children ------------------------------------------------------------------------

#: marks in JVM thread names (as /proc shows them: the first 15 characters) -> the share
#: of the JVM's CPU they are counted in
JVM_THREAD_KINDS = (("tasks", ("Executor task",)), ("jit", ("CompilerThre",)),
                    ("gc", ("GC Thread", "G1 ")))


def jvm_cpu_split(pid: int) -> dict[str, float] | None:
    """CPU seconds the JVM used so far: in all, and by its live threads' kinds (Spark's
    task threads, the JIT compilers, the garbage collector). `other` is the rest:
    planning, scheduling, py4j, and threads that have already ended. Read from /proc,
    so None where there is none."""
    try:
        split = {"total": process_cpu_s(pid)}
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for kind, _ in JVM_THREAD_KINDS:
        split[kind] = 0.0
    for tid in tids:
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:  # the thread ended meanwhile
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        kind = next((k for k, marks in JVM_THREAD_KINDS if any(m in name for m in marks)),
                    None)
        if kind:
            split[kind] += stat_cpu_s(stat)
    split["other"] = split["total"] - sum(split[k] for k, _ in JVM_THREAD_KINDS)
    return {k: round(v, 1) for k, v in split.items()}


def cold_session(run_dir: Path, master: str, driver_memory: str | None, tmp: Path) -> Any:
    """A new SparkSession configured as `warren analyze` configures it."""
    from analysis import load
    from analysis.spark import get_session

    conf = {"spark.driver.memory": driver_memory} if driver_memory else {}
    # as `warren analyze`: the footers' row count picks the driver JVM's JIT mode
    return get_session(master, conf=conf, local_dir=str(tmp), log_level="ERROR",
                       expected_rows=load.history_rows(run_dir / "history"))


def child_spark(run_dir: Path, master: str, driver_memory: str | None, tmp: Path,
                workers: int | None = None) -> dict[str, Any]:
    """Cold SparkSession, load, every check as the runner runs them."""
    from analysis import jvm_archive, load, model, runner

    t0 = time.perf_counter()
    archive = jvm_archive.java_options() is not None
    spark = cold_session(run_dir, master, driver_memory, tmp)
    t1 = time.perf_counter()
    h = load.load(spark, run_dir)
    t2 = time.perf_counter()
    result = runner.run_checks(h, model.Params(), workers=workers)
    t3 = time.perf_counter()
    jvm_cpu = jvm_cpu_split(spark._jvm.java.lang.ProcessHandle.current().pid())
    verdicts = {v.check: {"status": v.status, "examined": v.examined,
                          "violations": v.violations} for v in result.verdicts}
    h.unpersist()
    spark.stop()
    return {"session_s": round(t1 - t0, 2), "load_s": round(t2 - t1, 2),
            "checks_s": round(t3 - t2, 2), "spark_cold_s": round(t3 - t0, 2),
            "per_check_s": result.timings_s, "verdicts": verdicts,
            "valid": result.valid, "jvm_archive": archive, "jvm_cpu_s": jvm_cpu}


def floor_queries(h: Any) -> list[Any]:
    """The two aggregations no implementation of the checks can do without, in their
    cheapest form, as one-row frames. Replica determinism must compare every member's
    applied commands index by index: here each member's rows fold per block of
    `LOG_BLOCK` indexes into a count and an XOR of hashes before the one shuffle (the
    form `common.block_summary` uses, without its other sums), and the members' blocks
    are compared after it. The total-queue check must count what happened to every
    message: here one hash aggregation of the client operations by `msg_id`. Each reads
    its columns once and shuffles once; the checks do these and much more."""
    from pyspark.sql import functions as F

    from analysis.checks.common import log_block
    from analysis.checks.common import total as n

    applied = h["replica_events"].where(F.col("kind") == "applied")
    per_block = (applied
                 .groupBy("queue", "server", log_block(F.col("raft_index")).alias("block"))
                 .agg(F.count("*").alias("rows"),
                      F.bit_xor(F.xxhash64("raft_index", "cmd_digest", "state_digest"))
                      .alias("digest"))
                 .groupBy("queue", "block")
                 .agg(F.min("rows").alias("r_lo"), F.max("rows").alias("r_hi"),
                      F.min("digest").alias("d_lo"), F.max("digest").alias("d_hi"))
                 .agg(F.count("*").alias("blocks"),
                      n((F.col("r_lo") != F.col("r_hi")) | (F.col("d_lo") != F.col("d_hi")))
                      .alias("diverged")))
    kind = F.col("kind")
    per_msg = (h["client_ops"].where(F.col("msg_id").isNotNull()).groupBy("msg_id")
               .agg(n(kind == "publish").alias("pub"), n(kind == "confirm").alias("conf"),
                    n(kind == "deliver").alias("dlv"),
                    n(kind.isin("ack", "nack", "reject")).alias("settle"))
               .agg(F.count("*").alias("messages"),
                    n((F.col("conf") > 0) & (F.col("dlv") == 0)).alias("undelivered")))
    return [per_block, per_msg]


def child_floor(run_dir: Path, master: str, driver_memory: str | None,
                tmp: Path) -> dict[str, Any]:
    """Cold SparkSession, load, and only `floor_queries`, two at once as the checks run
    in flight: a lower bound for any cold analysis of this history on this machine."""
    from concurrent.futures import ThreadPoolExecutor

    from analysis import load

    t0 = time.perf_counter()
    spark = cold_session(run_dir, master, driver_memory, tmp)
    t1 = time.perf_counter()
    h = load.load(spark, run_dir)
    t2 = time.perf_counter()
    queries = floor_queries(h)
    with ThreadPoolExecutor(len(queries)) as pool:
        rows = [r[0].asDict() for r in pool.map(lambda q: q.collect(), queries)]
    t3 = time.perf_counter()
    jvm_cpu = jvm_cpu_split(spark._jvm.java.lang.ProcessHandle.current().pid())
    spark.stop()
    return {"session_s": round(t1 - t0, 2), "load_s": round(t2 - t1, 2),
            "work_s": round(t3 - t2, 2), "floor_s": round(t3 - t0, 2), "rows": rows,
            "jvm_cpu_s": jvm_cpu}


def child_reference(run_dir: Path) -> dict[str, Any]:
    """The plain-Python checker: read every row into dicts, run every check."""
    from analysis import reference

    t0 = time.perf_counter()
    h = reference.RefHistory.from_dataset(run_dir / "history")
    t1 = time.perf_counter()
    per_check: dict[str, float] = {}
    verdicts: dict[str, Any] = {}
    for name, fn in reference.ALL.items():
        start = time.perf_counter()
        r = fn(h, model_params())
        per_check[name] = round(time.perf_counter() - start, 3)
        verdicts[name] = {"status": r.status, "examined": r.examined,
                          "violations": len(r.violations)}
    t2 = time.perf_counter()
    return {"read_s": round(t1 - t0, 2), "checks_s": round(t2 - t1, 2),
            "reference_s": round(t2 - t0, 2), "per_check_s": per_check, "verdicts": verdicts,
            "self_maxrss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}


def model_params() -> Any:
    from analysis.model import Params

    return Params()


# -- main ----------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python bench/analysis.py")
    ap.add_argument("--sizes", default="1000000,10000000", help="events per history")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--driver-memory", default=None,
                    help="spark.driver.memory (default: warren analyze's own default)")
    ap.add_argument("--reference-max", type=int, default=2_000_000,
                    help="run the reference checker on histories up to this many events")
    ap.add_argument("--workers", type=int, default=None,
                    help="checks run at once (default: as `warren analyze`)")
    ap.add_argument("--keep", default=None, help="write histories here and keep them")
    ap.add_argument("--repeat", type=positive_int, default=1,
                    help="cold Spark runs per history; the median run is reported")
    ap.add_argument("--no-floor", action="store_true",
                    help="skip the floor: a cold session doing only `floor_queries`")
    ap.add_argument("--child", choices=["spark", "floor", "reference"],
                    help=argparse.SUPPRESS)
    ap.add_argument("--run-dir", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.child:
        run_dir = Path(args.run_dir)
        if args.child in ("spark", "floor"):
            with tempfile.TemporaryDirectory(prefix="warren-spark-") as tmp:
                out = (child_spark(run_dir, args.master, args.driver_memory, Path(tmp),
                                   args.workers) if args.child == "spark"
                       else child_floor(run_dir, args.master, args.driver_memory, Path(tmp)))
        else:
            out = child_reference(run_dir)
        print(json.dumps(out))
        return 0

    sizes = [int(s) for s in args.sizes.split(",") if s]
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="warren-bench-"))
    from analysis.spark import default_conf

    memory = args.driver_memory or default_conf(args.master).get("spark.driver.memory")
    report: dict[str, Any] = {"master": args.master, "driver_memory": memory,
                              "cpus": os.cpu_count(), "sizes": {}}
    ok = True
    try:
        for size in sizes:
            run_dir = base / f"run-{size}"
            if run_dir.exists():
                shutil.rmtree(run_dir)
            hist = build_history(run_dir, size)
            print(f"history {size:,}: {hist['events']:,} events ({hist['messages']:,} messages"
                  f", {hist['chunks']} chunks, {hist['generated_chunks']} generated) "
                  f"in {hist['build_s']} s")
            entry: dict[str, Any] = {"history": hist}
            session_args = ["--run-dir", str(run_dir), "--master", args.master,
                            *(["--driver-memory", args.driver_memory]
                              if args.driver_memory else [])]
            runs = [measure_child(["--child", "spark", *session_args,
                                   *(["--workers", str(args.workers)] if args.workers else [])])
                    for _ in range(args.repeat)]
            spark = median_run(runs)
            entry["spark"] = spark
            if len(runs) > 1:
                print(f"  spark cold, {len(runs)} runs: "
                      + " / ".join(str(r["spark_cold_s"]) for r in runs) + " s; the median:")
            print(f"  spark cold {spark['spark_cold_s']} s (session {spark['session_s']}, "
                  f"load {spark['load_s']}, checks {spark['checks_s']}), "
                  f"peak RSS {spark['peak_rss_mb']} MiB, valid={spark['valid']}")
            cpu = spark["jvm_cpu_s"]
            if cpu:
                print(f"  JVM CPU {cpu['total']} s: Spark tasks {cpu['tasks']}, JIT compilers "
                      f"{cpu['jit']}, GC {cpu['gc']}, other threads {cpu['other']}")
            for name, secs in spark["per_check_s"].items():
                print(f"    {name:28s} {secs:7.2f} s  {spark['verdicts'][name]['status']}")
            entry["floor"] = None
            if not args.no_floor:
                floor = measure_child(["--child", "floor", *session_args])
                entry["floor"] = floor
                cpu = floor["jvm_cpu_s"] or {}
                print(f"  floor {floor['floor_s']} s (session {floor['session_s']}, load "
                      f"{floor['load_s']}, the two aggregations {floor['work_s']}; JVM CPU "
                      f"{cpu.get('total')} s, tasks {cpu.get('tasks')}); the analysis takes "
                      f"{spark['spark_cold_s'] / floor['floor_s']:.2f} times the floor")
                blocks, messages = floor["rows"]
                if blocks["diverged"] or messages["messages"] != hist["messages"]:
                    ok = False
                    print(f"  FLOOR DISAGREES with the clean history: {floor['rows']}")
            if any(r["valid"] is not True for r in runs):
                ok = False
                print("  NOT CLEAN: some check did not pass")
            if hist["events"] <= args.reference_max:
                ref = measure_child(["--child", "reference", "--run-dir", str(run_dir)])
                entry["reference"] = ref
                same = all(ref["verdicts"][c] == spark["verdicts"][c] for c in ref["verdicts"])
                entry["reference_agrees"] = same
                ok = ok and same
                print(f"  reference {ref['reference_s']} s (read {ref['read_s']}, checks "
                      f"{ref['checks_s']}), peak RSS {ref['peak_rss_mb']} MiB, "
                      f"agrees with spark: {same}")
            else:
                entry["reference"] = None
                print(f"  reference skipped: {hist['events']:,} events > --reference-max "
                      f"({args.reference_max:,}); it keeps ~2 KB of dicts per event")
            report["sizes"][str(size)] = entry
            if not args.keep:
                shutil.rmtree(run_dir)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)

    largest = report["sizes"][str(max(sizes))]
    refs = [e["reference"] for e in report["sizes"].values() if e["reference"]]
    summary = {
        "events": largest["history"]["events"],
        "spark_cold_s": largest["spark"]["spark_cold_s"],
        "spark_cold_runs_s": largest["spark"]["spark_cold_runs_s"],
        "spark_floor_s": largest["floor"]["floor_s"] if largest["floor"] else None,
        "floor_ratio": (round(largest["spark"]["spark_cold_s"] / largest["floor"]["floor_s"], 2)
                        if largest["floor"] else None),
        "reference_s": refs[-1]["reference_s"] if refs else None,
        "reference_events": (max(e["history"]["events"] for e in report["sizes"].values()
                                 if e["reference"]) if refs else None),
        "peak_rss_mb": max(max(e["spark"]["peak_rss_mb"], (e["reference"] or {})
                               .get("peak_rss_mb", 0)) for e in report["sizes"].values()),
        "clean": ok,
        "per_size": {
            s: {"events": e["history"]["events"], "build_s": e["history"]["build_s"],
                "spark_cold_s": e["spark"]["spark_cold_s"],
                "spark_cold_runs_s": e["spark"]["spark_cold_runs_s"],
                "spark_session_s": e["spark"]["session_s"], "spark_load_s": e["spark"]["load_s"],
                "spark_checks_s": e["spark"]["checks_s"],
                "spark_peak_rss_mb": e["spark"]["peak_rss_mb"],
                "spark_per_check_s": e["spark"]["per_check_s"],
                "spark_jvm_cpu_s": e["spark"]["jvm_cpu_s"],
                "spark_floor_s": e["floor"]["floor_s"] if e["floor"] else None,
                "spark_floor_work_s": e["floor"]["work_s"] if e["floor"] else None,
                "reference_s": e["reference"]["reference_s"] if e["reference"] else None,
                "reference_peak_rss_mb": (e["reference"]["peak_rss_mb"]
                                          if e["reference"] else None),
                "events_per_s_spark": math.floor(e["history"]["events"]
                                                 / e["spark"]["spark_cold_s"])}
            for s, e in report["sizes"].items()},
        "master": args.master, "driver_memory": memory,
        # a class archive from `warren spark-archive` was mapped (WARREN_SPARK_CDS=0: not)
        "jvm_archive": largest["spark"]["jvm_archive"],
    }
    print(json.dumps(summary))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
