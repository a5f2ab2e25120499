"""A run records the record of the release its nodes ran beside its history, so the
analysis judges it by that release's delivery-limit rules (and by the default
release's when the run names none)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from analysis.model import RunConfig
from harness import runner
from harness.scenarios import ClientSpec, QueueSpec, Scenario
from releases import DEFAULT_SERIES, RELEASES


class _Recorder:
    def __init__(self) -> None:
        self.rows: list[tuple[str, dict[str, Any]]] = []

    def record(self, table: str, **fields: Any) -> None:
        self.rows.append((table, fields))

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("version", [None, "3.10", "4.2", "4.3"])
def test_a_run_records_the_record_of_its_nodes_release(version: str | None) -> None:
    scenario = Scenario("tiny", "one queue", queues=(QueueSpec("q1"),),
                        clients=(ClientSpec("publisher", "q1", messages=1),), nodes=1)
    rec = _Recorder()
    runner._record_meta(rec, scenario, 0, "rabbit", version)  # type: ignore[arg-type]
    ((table, fields),) = rec.rows
    config = json.loads(fields["config_json"])
    release = RELEASES[version or DEFAULT_SERIES]
    assert table == "run_meta" and config["release"] == release.recorded()
    meta = RunConfig(config=config)
    assert meta.requeue_counts_toward_limit() is release.requeue_counts_toward_limit
