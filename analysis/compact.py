"""Rewrite a run's Arrow IPC segments into the Parquet history dataset.

Runs once after a run, in one Python process. Each `(table, node)` is read, truncated
tails of killed processes' segments are tolerated (everything up to the last complete
batch is kept), rows are sorted by `(ts_ns, emitter, seq)` and written as
`history/<table>/run_id=<id>/node=<node>/part-<k>.parquet` with zstd, ~1M-row row
groups and the schema version in the file metadata. Memory is bounded by one node's
share of one table, not by the whole run.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from analysis import schema
from analysis.model import EXIT_BAD_INPUT

log = logging.getLogger("warren.analysis")

ROW_GROUP_ROWS = 1_000_000
FILE_ROWS = 8_000_000


@dataclass
class CompactStats:
    """What compaction read and wrote; `truncated` lists segments cut short."""

    segments: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)
    truncated: list[Path] = field(default_factory=list)


def read_segment(path: Path) -> tuple[list[pa.RecordBatch], bool]:
    """All complete batches of one IPC stream; the flag says the tail was cut."""
    batches: list[pa.RecordBatch] = []
    try:
        with pa.OSFile(str(path), "rb") as source:
            reader = ipc.open_stream(source)
            schema.check_version(reader.schema.metadata)
            while True:
                try:
                    batches.append(reader.read_next_batch())
                except StopIteration:
                    return batches, False
    except (pa.ArrowInvalid, OSError, EOFError) as exc:
        log.warning("segment %s truncated after %d batches: %s", path, len(batches), exc)
        return batches, True


def compact(run_dir: str | Path) -> CompactStats:
    """Compact `<run_dir>/raw` into `<run_dir>/history`, replacing an earlier history.

    Raw segments are left as they are: they stay the source of truth, so compacting
    again gives the same dataset.
    """
    run = Path(run_dir)
    raw = run / "raw"
    if not raw.is_dir():
        raise FileNotFoundError(f"{raw} does not exist")
    if (run / "history").exists():
        shutil.rmtree(run / "history")
    stats = CompactStats()
    for table_dir in sorted(p for p in raw.iterdir() if p.is_dir()):
        table = table_dir.name
        if table not in schema.TABLES:
            log.warning("ignoring unknown table directory %s", table_dir)
            continue
        for node_dir in sorted(p for p in table_dir.iterdir() if p.is_dir()):
            batches: list[pa.RecordBatch] = []
            for segment in sorted(node_dir.glob("*.arrows")):
                got, cut = read_segment(segment)
                stats.segments += 1
                batches.extend(got)
                if cut:
                    stats.truncated.append(segment)
            if batches:
                _write(run / "history" / table, table, batches, stats)
    return stats


def _conform(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """`batch` cast to `target`; columns an older minor version lacked become nulls."""
    if batch.schema.names != target.names:
        cols = [batch.column(f.name) if f.name in batch.schema.names
                else pa.nulls(batch.num_rows, f.type) for f in target]
        batch = pa.RecordBatch.from_arrays(cols, names=target.names)
    return batch.cast(target)


def _write(out: Path, table: str, batches: list[pa.RecordBatch], stats: CompactStats) -> None:
    target = schema.schema_of(table)
    data = pa.Table.from_batches([_conform(b, target) for b in batches], schema=target)
    order = pc.sort_indices(data, sort_keys=[("ts_ns", "ascending"), ("emitter", "ascending"),
                                             ("seq", "ascending")])
    data = data.take(order)
    stats.rows[table] = stats.rows.get(table, 0) + data.num_rows
    for run_id in pc.unique(data["run_id"]).to_pylist():
        per_run = data.filter(pc.equal(data["run_id"], run_id))
        for node in pc.unique(per_run["node"]).to_pylist():
            part = per_run.filter(pc.equal(per_run["node"], node))
            part = part.drop_columns(["run_id", "node"])
            directory = out / f"run_id={run_id}" / f"node={node}"
            directory.mkdir(parents=True, exist_ok=True)
            k = len(list(directory.glob("part-*.parquet")))
            for start in range(0, part.num_rows, FILE_ROWS):
                path = directory / f"part-{k}.parquet"
                pq.write_table(part.slice(start, FILE_ROWS), path, compression="zstd",
                               row_group_size=ROW_GROUP_ROWS, write_statistics=True)
                stats.files.append(path)
                k += 1


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register `history compact` on the `warren` command's subparsers.

    Scenario runs and `warren analyze` compact on their own; the command is for a run
    recorded elsewhere (a user's own cluster, a `warren_cluster` test kept with
    ``--warren-no-analysis``) whose Parquet history is wanted without analysing it."""
    history = subparsers.add_parser("history", help="recorded run histories")
    sub = history.add_subparsers(dest="history_command", required=True)
    p = sub.add_parser("compact", help="rewrite a run's raw segments as its Parquet history",
                       description="Rewrite RUN_DIR/raw (Arrow IPC segments) into "
                       "RUN_DIR/history (Parquet), replacing an earlier history. Exit 0 "
                       "when written, 4 when RUN_DIR has no raw segments or holds a "
                       "segment of an unknown schema version.")
    p.add_argument("run_dir", help="run directory holding raw/")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Compact one run and print what was written; bad input exits 4 with the reason."""
    try:
        stats = compact(args.run_dir)
    except (FileNotFoundError, ValueError) as exc:
        print(f"warren history compact: bad input: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"{stats.segments} segments -> {len(stats.files)} files, rows {stats.rows}"
          + (f", {len(stats.truncated)} truncated" if stats.truncated else ""))
    for path in stats.truncated:
        print(f"  truncated (kept up to its last complete batch): {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m analysis.compact RUN_DIR`: the same as `warren history compact RUN_DIR`."""
    parser = argparse.ArgumentParser(prog="python -m analysis.compact")
    parser.add_argument("run_dir")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
