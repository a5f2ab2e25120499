"""Read a recorded run directory into what `analysis.compare` compares.

The comparison needs a few columns of two tables (the workload clients' operations
and the broker nodes' resource samples) and the release the run's nodes modelled
(its metadata), so it reads them with pyarrow directly: no Spark session, and a run
recorded with `--no-analyze` compares as well as an analysed one. A run directory
with raw segments only is compacted first, as `warren analyze` does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds

from analysis import compact
from analysis.compare import Op, RunOps, Sample

__all__ = ["load_run"]

_OPS = ("kind", "ts_ns", "msg_id", "node", "redelivered", "delivery_count", "requeue")
_KINDS = ("publish", "confirm", "deliver", "ack", "nack", "reject")


def _rows(run: Path, table: str, columns: tuple[str, ...]) -> list[dict[str, Any]]:
    path = run / "history" / table
    if not path.is_dir():
        return []
    return ds.dataset(str(path), partitioning="hive").to_table(
        columns=list(columns)).to_pylist()


def load_run(run: Path) -> RunOps:
    """The client operations, node samples and release of the run in `run`."""
    if not run.is_dir():
        raise FileNotFoundError(f"run directory {run} does not exist")
    if not (run / "history").is_dir():
        if not (run / "raw").is_dir():
            raise ValueError(f"{run} holds no recorded history")
        compact.compact(run)
    metas = _rows(run, "run_meta", ("run_id", "config_json"))
    if not metas:
        raise ValueError(f"{run} has no run metadata")
    config = json.loads(metas[0]["config_json"] or "{}")
    version = config.get("rabbitmq_version")
    scenario = (config.get("scenario") or {}).get("name", "")
    ops = tuple(
        Op(r["kind"], r["ts_ns"], r["msg_id"], str(r["node"]), r["redelivered"],
           r["delivery_count"], r["requeue"])
        for r in _rows(run, "client_ops", _OPS)
        if r["kind"] in _KINDS and str(r["node"]).startswith("client-"))
    samples = tuple(Sample(r["ts_ns"], str(r["node"]), r["rss_bytes"])
                    for r in _rows(run, "samples", ("ts_ns", "node", "rss_bytes"))
                    if r["rss_bytes"] is not None and not str(r["node"]).startswith("client-"))
    return RunOps(version or "node default", metas[0]["run_id"], scenario, ops, samples)
