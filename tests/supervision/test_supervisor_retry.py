"""Failed restarts: the child stays ``restarting`` and the
supervisor retries by casting to itself, each retry counting as a restart.

Gated start functions stop inside the supervisor before answering, so the
test can queue a request at an exact point: between two attempts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import actors
import supervision as supervisor

from .sup_helpers import down_of, events, expect, sup_reports, tagged
from .sup_workers import ScriptedStart, StaticSup, worker_spec

NOPE = ("error", "nope")


def between_attempts(me: actors.Process, sup: actors.Pid, n: int,
                     request: Callable[[actors.Pid], Any]) -> Any:
    """Release attempt `n` and, right behind it, make `request` from another process.

    The request is queued before the retry the failed attempt casts, so it
    observes the supervisor exactly between attempt `n` and the next one.
    """
    me_pid = me.pid

    def asker() -> None:
        actors.send(sup, ("go", n))
        actors.send(me_pid, ("answer", n, request(sup)))

    actors.spawn(asker)
    return expect(lambda m: type(m) is tuple and m[:2] == ("answer", n))[2]


def attempt(n: int) -> Callable[[Any], bool]:
    return lambda m: type(m) is tuple and len(m) == 3 and m[0] == "attempt" and m[2] == n


def start_sup(start: ScriptedStart, **flags: Any) -> actors.Pid:
    spec = {"id": start.id, "start": (start, ())}
    ok, sup = supervisor.start_link(StaticSup, (flags, [spec]))
    assert ok == "ok"
    return sup


MODS = ["tests.supervision.sup_workers"]


def test_failed_restart_leaves_the_child_restarting_and_other_requests_get_in(me):
    start = ScriptedStart(me.pid, "a", ["worker", NOPE, NOPE, NOPE, NOPE, "worker"],
                          gate=frozenset({2, 3, 4, 5, 6}))
    sup = start_sup(start, intensity=10)
    actors.exit(expect(tagged("started"))[2], "kill")
    asks = {
        2: (supervisor.which_children, [("a", "restarting", "worker", MODS)]),
        3: (lambda s: supervisor.restart_child(s, "a"), ("error", "restarting")),
        4: (lambda s: supervisor.delete_child(s, "a"), ("error", "restarting")),
        5: (supervisor.count_children, {"specs": 1, "active": 0, "supervisors": 0,
                                        "workers": 1}),
    }
    for n, (request, answer) in asks.items():
        expect(attempt(n))
        assert between_attempts(me, sup, n, request) == answer
    expect(attempt(6))
    actors.send(sup, ("go", 6))
    new = expect(tagged("started"))[2]
    assert supervisor.which_children(sup) == [("a", new, "worker", MODS)]
    assert start.calls == 6


def test_terminate_child_between_attempts_cancels_the_retry(me):
    start = ScriptedStart(me.pid, "a", ["worker", NOPE], gate=frozenset({2}))
    sup = start_sup(start, intensity=10)
    actors.exit(expect(tagged("started"))[2], "kill")
    expect(attempt(2))
    assert between_attempts(me, sup, 2, lambda s: supervisor.terminate_child(s, "a")) == "ok"
    assert supervisor.which_children(sup) == [("a", None, "worker", MODS)]
    assert start.calls == 2


def test_every_retry_counts_toward_intensity(me, caplog):
    start = ScriptedStart(me.pid, "a", ["worker"], default=NOPE)
    sup = start_sup(start, intensity=3)
    actors.monitor(sup)
    with caplog.at_level(logging.ERROR, logger="warren.supervisor"):
        actors.exit(expect(tagged("started"))[2], "boom")
        assert expect(down_of(sup))[4] == "shutdown"
    # one start at init, then three failed restarts; the fourth restart trips
    assert start.calls == 4
    assert sup_reports(caplog.records) == [
        ("child_terminated", "boom"),
        ("start_error", "nope"), ("start_error", "nope"), ("start_error", "nope"),
        ("shutdown", "reached_max_restart_intensity"),
    ]


def test_group_restart_that_fails_midway_retries_from_the_failed_child(me):
    b_start = ScriptedStart(me.pid, "b", ["worker", NOPE, "worker"], gate=frozenset({2}))
    specs = [worker_spec(me.pid, "a"), {"id": "b", "start": (b_start, ())},
             worker_spec(me.pid, "c")]
    ok, sup = supervisor.start_link(StaticSup, ({"strategy": "rest_for_one", "intensity": 10},
                                                specs))
    assert events("started", 3) == ["a", "b", "c"]
    a = supervisor.which_children(sup)[2][1]
    actors.exit(a, "kill")
    assert events("started", 1) == ["a"]
    expect(attempt(2))
    states = between_attempts(me, sup, 2, supervisor.which_children)
    assert [(cid, pid if isinstance(pid, str | None) else "pid") for cid, pid, *_ in states] == [
        ("c", None), ("b", "restarting"), ("a", "pid")]
    assert events("started", 2) == ["b", "c"]


def test_simple_one_for_one_child_that_fails_to_restart_is_shown_restarting(me):
    start = ScriptedStart(me.pid, None, ["worker", NOPE, NOPE], gate=frozenset({2, 3, 4}))
    ok, sup = supervisor.start_link(
        StaticSup, ({"strategy": "simple_one_for_one", "intensity": 10},
                    [{"id": "tmpl", "start": (start, ())}]))
    _, pid = supervisor.start_child(sup, ["x"])
    expect(tagged("started"))
    actors.exit(pid, "kill")
    expect(attempt(2))
    assert between_attempts(me, sup, 2, supervisor.which_children) == [
        (None, "restarting", "worker", MODS)]
    expect(attempt(3))
    assert between_attempts(me, sup, 3, supervisor.count_children) == {
        "specs": 1, "active": 0, "supervisors": 0, "workers": 1}
    expect(attempt(4))
    actors.send(sup, ("go", 4))
    new = expect(tagged("started"))[2]
    assert supervisor.which_children(sup) == [(None, new, "worker", MODS)]
    assert supervisor.count_children(sup)["active"] == 1
