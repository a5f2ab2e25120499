"""The reference checker's history and result records, and the helpers every check
uses to build them.

`RefHistory` reads whole tables into lists of dicts (rows completed to their schema),
so the reference checker is for tests and small runs only. `RefResult` carries the
same counts, status, note and violation rows as a Spark `CheckResult`; `vrow` builds a
violation row in `model.VIOLATION_COLUMNS` order and `check_result` sorts the rows so
that two results compare equal exactly when the checks agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds

from analysis import schema
from analysis.model import RunConfig, Violation

Row = dict[str, Any]
BIG = 2**63 - 1


@dataclass
class RefHistory:
    """Rows of every table plus the parsed run metadata."""

    tables: dict[str, list[Row]]
    meta: RunConfig = field(default_factory=RunConfig)

    def rows(self, table: str, *kinds: str) -> list[Row]:
        rows = self.tables.get(table, [])
        return [r for r in rows if r["kind"] in kinds] if kinds else rows

    @property
    def run_end_ns(self) -> int:
        return max((r["ts_ns"] for rows in self.tables.values() for r in rows), default=0)

    @property
    def drained(self) -> bool:
        return any(r["outcome"] == "ok" for r in self.rows("client_ops", "drain_end"))

    @classmethod
    def from_rows(cls, tables: dict[str, list[Row]]) -> RefHistory:
        full = {t: [_complete(t, r) for r in tables.get(t, [])] for t in schema.TABLES}
        meta_rows = full["run_meta"]
        return cls(full, RunConfig.from_row(meta_rows[0] if meta_rows else None))

    @classmethod
    def from_dataset(cls, history_dir: str | Path) -> RefHistory:
        tables: dict[str, list[Row]] = {}
        for table in schema.TABLES:
            path = Path(history_dir) / table
            if path.is_dir():
                tables[table] = ds.dataset(path, partitioning="hive").to_table().to_pylist()
        return cls.from_rows(tables)


def _complete(table: str, row: Row) -> Row:
    names = schema.schema_of(table).names
    return {n: row.get(n) for n in names}


def okey(r: Row) -> tuple[int, str, int]:
    return (r["ts_ns"], r["emitter"] or "", r["seq"] or 0)


@dataclass
class RefResult:
    check: str
    status: str
    examined: int
    violations: list[Violation]
    counts: dict[str, int]
    note: str = ""


def vrow(check: str, violation: str, queue: str | None = None, msg_id: int | None = None,
         other_id: int | None = None, key: str | None = None, raft_index: int | None = None,
         ts_ns: int | None = None, detail: str | None = None) -> Violation:
    return (check, violation, queue, msg_id, other_id, key, raft_index, ts_ns, detail)


def check_result(check: str, examined: int, violations: list[Violation],
                 counts: dict[str, int], status_note: tuple[str, str]) -> RefResult:
    return RefResult(check, status_note[0], examined, sorted(violations, key=repr), counts,
                     status_note[1])
