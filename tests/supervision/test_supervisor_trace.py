"""Trace points: every start, exit, restart and give-up is recorded with plain fields."""

from __future__ import annotations

import pickle

import pytest

import actors
import supervision as supervisor
from actors import trace

from .sup_helpers import down_of, expect, tagged
from .sup_workers import StaticSup, worker_spec

KINDS = ("started", "restarted", "crashed", "stopped", "intensity_exceeded")


@pytest.fixture
def recorded():
    seen: list[tuple[str, dict]] = []
    previous = trace.set_sink(lambda kind, fields: seen.append((kind, fields)))
    yield seen
    trace.set_sink(previous)


def test_supervisor_trace_points(me, recorded):
    ok, sup = supervisor.start_link(StaticSup, ({}, [worker_spec(me.pid, "a")]))
    first = expect(tagged("started"))[2]
    actors.monitor(sup)
    actors.exit(first, "boom")
    second = expect(tagged("started"))[2]
    actors.exit(second, "boom")
    expect(down_of(sup))
    ours = [(k, f) for k, f in recorded if k in KINDS]
    label = f"StaticSup<{sup.serial}.{sup.creation}>"
    path = f"{actors.node()}/{label}"
    assert [(k, f["actor_path"], f.get("pid"), f.get("reason"), f["restart_count"])
            for k, f in ours] == [
        ("started", f"{path}/a", first, None, 0),
        ("crashed", f"{path}/a", first, "'boom'", 0),
        ("restarted", f"{path}/a", second, None, 1),
        ("crashed", f"{path}/a", second, "'boom'", 1),
        ("intensity_exceeded", path, None, "reached_max_restart_intensity", 0),
    ]
    assert {f["supervisor"] for _k, f in ours} == {label}
    assert {f["sup_pid"] for _k, f in ours} == {sup}
    assert [(f.get("restart_type"), f.get("child_type"), f.get("significant"))
            for _k, f in ours] == [("permanent", "worker", False)] * 4 + [(None, None, None)]
    assert pickle.loads(pickle.dumps(ours)) == ours
