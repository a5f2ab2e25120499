"""Load a run's Parquet history into Spark, refusing files of an unknown schema.

Every table is read with its declared schema (a missing table becomes an empty
DataFrame of that schema), so the checks never depend on schema inference and a run
that lacks, say, replica events still runs every client-side check.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from analysis import model, schema, uris


class BadInput(Exception):
    """The history cannot be analysed as given (missing, or of an unknown schema)."""


@dataclass
class History:
    """One run's tables as DataFrames plus what the driver needs to know up front."""

    spark: SparkSession
    tables: dict[str, DataFrame]
    meta: model.RunConfig = field(default_factory=model.RunConfig)

    derived: dict[str, DataFrame] = field(default_factory=dict)
    #: what the Parquet footers say, when the driver could read them: rows per table and
    #: the largest and smallest `ts_ns` (None when a row group has no statistics); see
    #: `footers`
    footer_rows: dict[str, int] | None = None
    footer_ts_max: dict[str, int | None] | None = None
    footer_ts_min: dict[str, int | None] | None = None
    _derived_lock: threading.RLock = field(default_factory=threading.RLock, repr=False,
                                           compare=False)
    #: a lock per derived frame's name, held while it is built
    _building: dict[str, threading.Lock] = field(default_factory=dict, repr=False,
                                                 compare=False)
    #: the JVM RDDs holding the derived frames' rows, released by `unpersist`
    _checkpoints: list[Any] = field(default_factory=list, repr=False, compare=False)

    def __getitem__(self, table: str) -> DataFrame:
        return self.tables[table]

    def cached(self, name: str, build: Callable[[], DataFrame]) -> DataFrame:
        """A derived frame shared by several checks, computed once and kept.

        Checks run in several threads (`analysis.runner`): the first to ask builds the
        frame while the others wait for it; a build may ask for other derived frames,
        and frames of other names are built meanwhile (one lock per name).

        The frame is computed at once into Spark's block store (`localCheckpoint`), and
        what the checks get is a frame over those rows: its plan is one leaf, not the
        build's whole plan. With `cache()` instead, every query over a derived frame
        carried the build's plan, which Spark analyses again for each new frame made
        from it before swapping the cached data in, and the cache stored the rows in
        compressed columns that every reader decoded. Cold, alternated, on one machine:
        10M events 114.8 / 118.2 / 140.1 s against 138.7 / 137.9 / 150.7 s, 50k events
        43.0 / 42.3 s against 48.2 / 49.2 s (docs/analysis-performance.md)."""
        with self._derived_lock:
            if name in self.derived:
                return self.derived[name]
            lock = self._building.setdefault(name, threading.Lock())
        with lock:
            with self._derived_lock:
                if name in self.derived:
                    return self.derived[name]
            df = build().localCheckpoint(eager=True)
            with self._derived_lock:
                self._checkpoints.append(df._jdf.queryExecution().analyzed().rdd())
                self.derived[name] = df
            return df

    def keep(self, name: str, df: DataFrame) -> DataFrame:
        """Have `unpersist` drop `df` too: a frame cached for this analysis alone, such as
        a check's violations, which are read again after the check returned."""
        with self._derived_lock:
            self.derived[name] = df
        return df

    def unpersist(self) -> None:
        """Drop derived frames, their stored rows and cached tables once the analysis is
        done (the derived frames cannot be read after this)."""
        with self._derived_lock:
            for df in [*self.derived.values(), *self.tables.values()]:
                df.unpersist()
            for rdd in self._checkpoints:
                rdd.unpersist(True)
            self._checkpoints.clear()
            self.derived.clear()
            self._building.clear()

    def has(self, table: str) -> bool:
        return table in self._present

    @cached_property
    def _present(self) -> set[str]:
        if self.footer_rows is not None:
            return {t for t in self.tables if self.footer_rows.get(t, 0) > 0}
        return {t for t, df in self.tables.items() if not df.isEmpty()}

    @cached_property
    def run_end_ns(self) -> int:
        known = self.footer_ts_max
        if known is not None and all(known.get(t) is not None for t in self._present):
            return max((int(known[t]) for t in self._present), default=0)  # type: ignore[arg-type]
        maxima = [self.tables[t].agg(F.max("ts_ns").alias("m")) for t in sorted(self._present)]
        if not maxima:
            return 0
        union = maxima[0]
        for df in maxima[1:]:
            union = union.unionByName(df)
        return int(_single(union.agg(F.max("m"))) or 0)

    def first_ts_ns(self, table: str) -> int:
        """The smallest `ts_ns` of `table` (0 when it has no rows): from the Parquet
        footers when they know it, else by a query."""
        known = (self.footer_ts_min or {}).get(table)
        if known is not None:
            return int(known)
        if not self.has(table):
            return 0
        return int(_single(self.tables[table].agg(F.min("ts_ns"))) or 0)

    @cached_property
    def drain_end_ns(self) -> int | None:
        """When the last completed drain ended (None: the clients never drained)."""
        ops = self.tables["client_ops"]
        return _single(ops.where((F.col("kind") == "drain_end") & (F.col("outcome") == "ok"))
                       .agg(F.max("ts_ns")))

    @property
    def drained(self) -> bool:
        return self.drain_end_ns is not None

    @cached_property
    def windows(self) -> list[model.FaultWindow]:
        rows = [r.asDict() for r in self.tables["nemesis_events"]
                .select("kind", "fault", "ts_ns", "emitter", "seq").collect()]
        return model.fault_windows(rows, self.run_end_ns)


def spark_schema(table: str) -> Any:
    return from_arrow_schema(schema.schema_of(table))


def empty(spark: SparkSession, table: str) -> DataFrame:
    return spark.createDataFrame([], spark_schema(table))


def from_arrow(spark: SparkSession, tables: dict[str, pa.Table]) -> History:
    """A History from in-memory Arrow tables (tests, synthetic runs)."""
    dfs = {}
    for t in schema.TABLES:
        if t in tables and tables[t].num_rows:
            dfs[t] = spark.createDataFrame(tables[t].cast(schema.schema_of(t)))
        else:
            dfs[t] = empty(spark, t)
    return History(spark, dfs, _meta(tables.get("run_meta")))


def _meta(table: pa.Table | None) -> model.RunConfig:
    rows = table.to_pylist() if table is not None else []
    return model.RunConfig.from_row(rows[0] if rows else None)


def validate(history_dir: Path) -> list[Path]:
    """Every Parquet file of the dataset, after checking its schema version."""
    if not history_dir.is_dir():
        raise BadInput(f"no history at {history_dir} (run `warren analyze` on a run directory "
                       "whose raw segments were compacted)")
    files = sorted(history_dir.rglob("*.parquet"))
    if not files:
        raise BadInput(f"{history_dir} holds no Parquet files")
    for f in files:
        try:
            schema.check_version(pq.read_schema(f).metadata)
        except (ValueError, pa.ArrowInvalid) as exc:
            raise BadInput(f"{f}: {exc}") from exc
    return files


def footers(history_dir: Path, files: list[Path]) -> tuple[dict[str, int],
                                                         dict[str, int | None],
                                                         dict[str, int | None]]:
    """Rows per table and each table's largest and smallest `ts_ns`, from the Parquet
    footers alone (the bounds are None for a table with a row group without statistics).

    Why: whether a table has rows, when the run began and when it ended are asked before
    most checks and metrics; in Spark each is a query, and on a cold JVM every query
    costs about a second of planning and compilation, while the footers are at hand."""
    rows: dict[str, int] = {}
    ts_max: dict[str, int | None] = {}
    ts_min: dict[str, int | None] = {}
    unknown: set[str] = set()  # tables with a row group that has no ts_ns statistics
    for f in files:
        table = f.relative_to(history_dir).parts[0]
        meta = pq.read_metadata(f)
        rows[table] = rows.get(table, 0) + meta.num_rows
        col = meta.schema.to_arrow_schema().get_field_index("ts_ns")
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            if group.num_rows == 0:
                continue
            stats = group.column(col).statistics if col >= 0 else None
            if stats is None or not stats.has_min_max:
                unknown.add(table)
                continue
            top, bottom = ts_max.get(table), ts_min.get(table)
            ts_max[table] = stats.max if top is None else max(top, stats.max)
            ts_min[table] = stats.min if bottom is None else min(bottom, stats.min)
    for table in unknown:
        ts_max[table] = ts_min[table] = None
    return rows, ts_max, ts_min


def history_rows(history_dir: Path) -> int:
    """Rows of a local history, from its Parquet footers (known before Spark starts)."""
    rows, _, _ = footers(history_dir, validate(history_dir))
    return sum(rows.values())


def load(spark: SparkSession, run_dir: str | Path) -> History:
    """Read `<run_dir>/history`: a local path or `file://` URI, or a URI only Spark reads."""
    if uris.is_remote(run_dir):
        return _load_uri(spark, str(run_dir))
    history_dir = uris.local_path(run_dir) / "history"
    files = validate(history_dir)
    dfs: dict[str, DataFrame] = {}
    meta_table: pa.Table | None = None
    for t in schema.TABLES:
        path = history_dir / t
        if path.is_dir():
            # not cached: each check reads only the columns it needs, and a Parquet scan
            # of those costs less than building the in-memory cache of every column
            # (at 10M events caching replica_events alone took 19 s of a 177 s analysis)
            dfs[t] = (spark.read.schema(spark_schema(t)).option("basePath", str(path))
                      .parquet(str(path)))
            if t == "run_meta":
                meta_table = ds.dataset(path, partitioning="hive").to_table()
        else:
            dfs[t] = empty(spark, t)
    rows, ts_max, ts_min = footers(history_dir, files)
    return History(spark, dfs, _meta(meta_table), footer_rows=rows, footer_ts_max=ts_max,
                   footer_ts_min=ts_min)


def _load_uri(spark: SparkSession, run_uri: str) -> History:
    """`load` for storage only Spark can read (hdfs://, s3a://): no local schema scan, a
    table that is absent is empty, run_meta comes back through Spark."""
    from pyspark.errors import AnalysisException

    dfs: dict[str, DataFrame] = {}
    for t in schema.TABLES:
        path = uris.join(run_uri, "history", t)
        try:
            dfs[t] = (spark.read.schema(spark_schema(t)).option("basePath", path)
                      .parquet(path)).cache()
        except AnalysisException:  # PATH_NOT_FOUND: the run recorded no such table
            dfs[t] = empty(spark, t)
    return History(spark, dfs, _meta(dfs["run_meta"].toArrow()))


def _single(aggregate: DataFrame) -> Any:
    """The value of a one-column aggregate without grouping, which always has one row."""
    row = aggregate.first()
    assert row is not None
    return row[0]
