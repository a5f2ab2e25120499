"""Trace points: every start, exit, restart and give-up is recorded with plain fields."""

from __future__ import annotations

import pickle

import pytest

import actors
import supervision as supervisor
from actors import trace

from .sup_helpers import down_of, expect, tagged
from .sup_workers import StaticSup, worker_spec

KINDS = ("supervisor_child_start", "supervisor_child_exit", "supervisor_restart",
         "supervisor_shutdown")


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
    assert [(k, f.get("pid"), f.get("outcome") or f.get("reason")) for k, f in ours] == [
        ("supervisor_child_start", first, None),
        ("supervisor_child_exit", first, "'boom'"),
        ("supervisor_child_start", second, None),
        ("supervisor_restart", None, "ok"),
        ("supervisor_child_exit", second, "'boom'"),
        ("supervisor_shutdown", None, "reached_max_restart_intensity"),
    ]
    assert all(f["sup"] == sup for _k, f in ours)
    assert pickle.loads(pickle.dumps(ours)) == ours
