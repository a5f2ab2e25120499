"""DOWN messages in the history: `down_sent` where the monitored process ends,
`down_received` where the DOWN reaches the monitor, paired by the monitor reference,
so the analysis can measure how long a DOWN takes to propagate. A monitor
removed before its target ends records nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import actors
from actors import Node, trace
from tests.actors.helpers import collect, nothing_more, wait_forever

Row = tuple[str, dict[str, Any]]


@pytest.fixture
def rows() -> Iterator[list[Row]]:
    seen: list[Row] = []
    previous = trace.set_sink(lambda kind, fields: seen.append((kind, dict(fields))))
    try:
        yield seen
    finally:
        trace.set_sink(previous)


def downs(rows: list[Row]) -> list[Row]:
    return [(k, f) for k, f in rows if k in ("down_sent", "down_received")]


@pytest.mark.parametrize("remote", [False, True], ids=["local", "remote"])
def test_a_crash_records_the_down_on_both_sides_with_one_ref(
        a: Node, b: Node, remote: bool, rows: list[Row]) -> None:
    where = b if remote else a
    with a.attached():
        me = actors.self()
        pid = where.spawn(wait_forever)
        ref = actors.monitor(pid)
        actors.exit(pid, "boom")
        assert collect(1) == [("DOWN", ref, "process", pid, "boom")]
        got = downs(rows)
    common = {"actor_path": repr(me), "monitor_of": repr(pid), "reason": repr("boom"),
              "ref": repr(ref)}
    assert got == [("down_sent", {"node": where.name, **common}),
                   ("down_received", {"node": a.name, **common})]


def test_a_demonitored_monitor_records_no_down(a: Node, rows: list[Row]) -> None:
    with a.attached():
        pid = actors.spawn(wait_forever)
        ref = actors.monitor(pid)
        actors.demonitor(ref)
        actors.exit(pid, "boom")
        assert nothing_more()
    assert [k for k, _ in downs(rows)] == []
