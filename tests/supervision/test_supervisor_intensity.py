"""Restart intensity: whole-second buckets, inclusive window.

The node clock is pinned (see conftest), so each restart happens at an exact
instant the test chooses; nothing here depends on how fast the test runs.
"""

from __future__ import annotations

import logging

import pytest

import actors
import supervision as supervisor
from supervision.intensity import add_restart, bucket

from .sup_helpers import down_of, events, expect, sup_reports, tagged, wait_down
from .sup_workers import StaticSup, worker_spec


def restarts_trip(times: list[float], intensity: int, period: int) -> list[bool]:
    """Feed restarts at `times` (seconds) to the pure rule; which ones trip."""
    kept: list[int] = []
    out = []
    for t in times:
        kept, give_up = add_restart(kept, bucket(t), period, intensity)
        out.append(give_up)
    return out


@pytest.mark.parametrize(
    ("times", "intensity", "period", "expected"),
    [
        ([0.0, 0.0], 1, 5, [False, True]),          # defaults: 2nd restart trips
        ([0.1, 5.9], 1, 5, [False, True]),          # buckets 0 and 5: 5 apart, kept
        ([0.9, 6.0], 1, 5, [False, False]),         # buckets 0 and 6: dropped
        ([0.0, 5.0], 1, 5, [False, True]),          # exactly `period` old is kept
        ([0.0, 6.0, 12.0, 18.0], 1, 5, [False] * 4),
        ([3.0], 0, 5, [True]),                      # intensity 0: first restart trips
        ([0, 1, 2, 3, 4, 4.5], 5, 5, [False] * 5 + [True]),
        ([0, 1, 2, 3, 4, 6], 5, 5, [False] * 6),    # bucket 0 left the window
        ([-0.5, 4.2], 1, 5, [False, True]),         # floor, not truncation: -1 and 4
    ],
)
def test_intensity_rule(times, intensity, period, expected):
    assert restarts_trip(times, intensity, period) == expected


def test_restart_list_keeps_only_the_window_newest_first():
    kept, _ = add_restart([7, 5, 2, 1], 8, 5, 10)
    assert kept == [8, 7, 5]


def start_one(me, **flags):
    specs = [worker_spec(me.pid, "a"), worker_spec(me.pid, "b")]
    ok, sup = supervisor.start_link(StaticSup, (flags, specs))
    assert ok == "ok"
    events("started", 2)
    actors.monitor(sup)
    return sup


def crash(sup, cid="a"):
    """Kill child `cid`; returns once the supervisor has handled the EXIT."""
    pid = dict((c, p) for c, p, _t, _m in supervisor.which_children(sup))[cid]
    actors.exit(pid, "boom")


def crash_and_wait_restart(sup, cid="a"):
    crash(sup, cid)
    assert events("started", 1) == [cid]


def test_default_flags_give_up_on_the_second_restart_within_five_seconds(me, clock, caplog):
    sup = start_one(me)  # intensity 1, period 5
    crash_and_wait_restart(sup)
    siblings = {c: p for c, p, _t, _m in supervisor.which_children(sup)}
    with caplog.at_level(logging.ERROR, logger="warren.supervisor"):
        crash(sup)
        assert expect(down_of(sup))[4] == "shutdown"
    assert not actors.is_process_alive(siblings["b"])
    assert ("shutdown", "reached_max_restart_intensity") in sup_reports(caplog.records)


def test_intensity_zero_gives_up_on_the_first_restart(me):
    sup = start_one(me, intensity=0)
    crash(sup)
    assert expect(down_of(sup))[4] == "shutdown"


def test_intensity_five_allows_five_restarts_and_trips_on_the_sixth(me):
    sup = start_one(me, intensity=5, period=10)
    for _ in range(5):
        crash_and_wait_restart(sup)
    crash(sup)
    assert expect(down_of(sup))[4] == "shutdown"


@pytest.mark.parametrize(
    ("first", "second", "trips"),
    [(0.1, 5.9, True), (0.9, 6.0, False), (2.0, 7.0, True), (2.0, 8.0, False)],
)
def test_integer_second_edge_of_the_window(me, clock, first, second, trips):
    sup = start_one(me)
    clock.now = first
    crash_and_wait_restart(sup)
    clock.now = second
    crash(sup)
    if trips:
        assert expect(down_of(sup))[4] == "shutdown"
    else:
        assert events("started", 1) == ["a"]
        assert actors.is_process_alive(sup)


def test_clean_exits_of_permanent_children_count_too(me):
    sup = start_one(me)
    child = dict((c, p) for c, p, _t, _m in supervisor.which_children(sup))["a"]
    actors.exit(child, "shutdown")
    assert events("started", 1) == ["a"]
    crash(sup)
    assert wait_down(sup) == "shutdown"


def test_terminate_child_does_not_count_toward_intensity(me):
    sup = start_one(me, intensity=0)
    assert supervisor.terminate_child(sup, "a") == "ok"
    assert supervisor.restart_child(sup, "a")[0] == "ok"
    assert supervisor.terminate_child(sup, "a") == "ok"
    assert actors.is_process_alive(sup)
    assert expect(tagged("started"))[1] == "a"
