"""What happens when a child exits on its own and auto shutdown.

A child ends with a chosen reason by returning ``("stop", reason, S)`` from
`handle_cast`; the restart table is then read off `which_children`.
"""

from __future__ import annotations

import logging

import pytest

import actors
import supervision as supervisor
from actors import gen_server

from .sup_helpers import down_of, events, expect, nothing, sup_reports, tagged
from .sup_workers import StaticSup, worker_spec

CLEAN = ["normal", "shutdown", ("shutdown", "done")]
ABNORMAL = ["boom", ("exception", "RuntimeError", "x", "tb"), "killed"]


def start(me, specs, **flags):
    ok, sup = supervisor.start_link(StaticSup, ({"intensity": 10, **flags}, specs))
    assert ok == "ok", sup
    events("started", len(specs))
    actors.monitor(sup)
    return sup


def child_pid(sup, cid):
    for c, pid, _t, _m in supervisor.which_children(sup):
        if c == cid:
            return pid
    raise KeyError(cid)


def stop_child_with(sup, cid, reason):
    """Make child `cid` exit with `reason` and wait until the supervisor saw it."""
    pid = child_pid(sup, cid)
    actors.monitor(pid)
    gen_server.cast(pid, ("stop", reason))
    expect(down_of(pid))
    return pid


@pytest.mark.parametrize("reason", CLEAN + ABNORMAL)
def test_permanent_child_is_always_restarted(me, reason):
    sup = start(me, [worker_spec(me.pid, "p")])
    old = stop_child_with(sup, "p", reason)
    assert events("started", 1) == ["p"]
    assert child_pid(sup, "p") not in (old, None)


@pytest.mark.parametrize("reason", CLEAN)
def test_transient_child_ending_cleanly_is_kept_without_a_process(me, reason):
    sup = start(me, [worker_spec(me.pid, "t", restart="transient")])
    stop_child_with(sup, "t", reason)
    assert supervisor.which_children(sup) == [("t", None, "worker", [_module()])]
    nothing(tagged("started"))


@pytest.mark.parametrize("reason", ABNORMAL)
def test_transient_child_crashing_is_restarted_with_an_error_report(me, reason, caplog):
    sup = start(me, [worker_spec(me.pid, "t", restart="transient")])
    with caplog.at_level(logging.ERROR, logger="warren.supervisor"):
        stop_child_with(sup, "t", reason)
        assert events("started", 1) == ["t"]
    assert sup_reports(caplog.records) == [("child_terminated", reason)]


@pytest.mark.parametrize("reason", CLEAN + ABNORMAL)
def test_temporary_child_is_never_restarted_and_its_spec_is_deleted(me, reason, caplog):
    sup = start(me, [worker_spec(me.pid, "tmp", restart="temporary"), worker_spec(me.pid, "x")])
    with caplog.at_level(logging.ERROR, logger="warren.supervisor"):
        stop_child_with(sup, "tmp", reason)
        assert [c for c, *_ in supervisor.which_children(sup)] == ["x"]
    nothing(tagged("started"))
    expected = [] if reason in CLEAN else [("child_terminated", reason)]
    assert sup_reports(caplog.records) == expected


def test_exit_from_an_unknown_process_is_ignored(me):
    sup = start(me, [worker_spec(me.pid, "p")])
    stranger = actors.spawn(lambda: None)
    actors.send(sup, ("EXIT", stranger, "boom"))
    assert supervisor.count_children(sup)["active"] == 1
    nothing(tagged("started"))


# ------------------------------------------------------------- auto shutdown


def significant(me, cid, restart="transient"):
    return worker_spec(me.pid, cid, restart=restart, significant=True)


def test_any_significant_shuts_down_when_one_significant_child_ends(me):
    sup = start(me, [worker_spec(me.pid, "plain"), significant(me, "s1"), significant(me, "s2")],
                auto_shutdown="any_significant")
    stop_child_with(sup, "s1", "normal")
    assert expect(down_of(sup))[4] == "shutdown"


def test_any_significant_ignores_children_that_are_not_significant(me):
    sup = start(me, [worker_spec(me.pid, "t", restart="transient"), significant(me, "s")],
                auto_shutdown="any_significant")
    stop_child_with(sup, "t", "normal")
    nothing(down_of(sup))
    assert supervisor.count_children(sup)["active"] == 1


def test_a_restarted_significant_child_does_not_trigger_auto_shutdown(me):
    sup = start(me, [significant(me, "s")], auto_shutdown="any_significant")
    stop_child_with(sup, "s", "boom")  # transient + abnormal: restarted
    assert events("started", 1) == ["s"]
    nothing(down_of(sup))


def test_a_temporary_significant_child_ending_abnormally_triggers_it(me):
    sup = start(me, [significant(me, "s", "temporary"), worker_spec(me.pid, "x")],
                auto_shutdown="any_significant")
    stop_child_with(sup, "s", "boom")
    assert expect(down_of(sup))[4] == "shutdown"


def test_all_significant_waits_for_the_last_significant_child(me):
    sup = start(me, [significant(me, "s1"), significant(me, "s2"), worker_spec(me.pid, "w")],
                auto_shutdown="all_significant")
    stop_child_with(sup, "s1", "normal")
    nothing(down_of(sup))
    w = child_pid(sup, "w")
    stop_child_with(sup, "s2", ("shutdown", "bye"))
    assert expect(down_of(sup))[4] == "shutdown"
    assert not actors.is_process_alive(w)


def test_all_significant_on_simple_one_for_one_ends_with_the_last_child(me):
    spec = significant(me, "dyn")
    spec["start"] = (spec["start"][0], (me.pid,))
    ok, sup = supervisor.start_link(
        StaticSup, ({"strategy": "simple_one_for_one", "auto_shutdown": "all_significant"},
                    [spec]))
    actors.monitor(sup)
    _, p1 = supervisor.start_child(sup, ["one"])
    _, p2 = supervisor.start_child(sup, ["two"])
    gen_server.cast(p1, ("stop", "normal"))
    nothing(down_of(sup))
    gen_server.cast(p2, ("stop", "normal"))
    assert expect(down_of(sup))[4] == "shutdown"


def test_terminate_child_of_a_significant_child_is_not_an_auto_shutdown(me):
    sup = start(me, [significant(me, "s")], auto_shutdown="any_significant")
    assert supervisor.terminate_child(sup, "s") == "ok"
    nothing(down_of(sup))


def _module():
    return "tests.supervision.sup_workers"
