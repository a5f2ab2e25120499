"""Run every check on a loaded history and gather verdict rows and violations.

The single place that turns lazy check results into numbers: it counts and samples
each violations DataFrame once (cached), and times every check for summary.json.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analysis import model
from analysis.checks import ALL, CheckResult
from analysis.load import History
from analysis.model import Params

SAMPLE = 10


@dataclass
class Verdict:
    check: str
    status: str
    examined: int
    violations: int
    sample: list[int | str]
    note: str
    counts: dict[str, int] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        return {"check": self.check, "status": self.status, "examined": self.examined,
                "violations": self.violations,
                "sample": ",".join(str(s) for s in self.sample), "note": self.note}


@dataclass
class Analysis:
    verdicts: list[Verdict]
    violations: dict[str, DataFrame]
    timings_s: dict[str, float]

    @property
    def valid(self) -> bool | str:
        statuses = {v.status for v in self.verdicts}
        if model.FAIL in statuses:
            return False
        if model.UNKNOWN in statuses:
            return "unknown"
        return True


def _sample(df: DataFrame) -> list[int | str]:
    rows = (df.select(F.coalesce(F.col("msg_id").cast("string"), F.col("key"),
                                 F.col("raft_index").cast("string")).alias("id"))
            .orderBy("id").limit(SAMPLE).collect())
    return [r["id"] for r in rows if r["id"] is not None]


def verdict_of(result: CheckResult) -> tuple[Verdict, DataFrame]:
    df = result.violations.cache()
    n = df.count()
    status, note = result.status, result.note
    if status is None:
        status, _ = model.simple_status(n, True)
    return (Verdict(result.check, status, result.examined, n,
                    _sample(df) if n else [], note, result.counts), df)


def run_checks(h: History, p: Params | None = None,
               only: list[str] | None = None) -> Analysis:
    p = p or Params()
    verdicts: list[Verdict] = []
    violations: dict[str, DataFrame] = {}
    timings: dict[str, float] = {}
    for name, fn in ALL.items():
        if only and name not in only:
            continue
        start = time.perf_counter()
        verdict, df = verdict_of(fn(h, p))
        timings[name] = round(time.perf_counter() - start, 3)
        verdicts.append(verdict)
        violations[name] = df
    return Analysis(verdicts, violations, timings)
