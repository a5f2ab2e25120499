"""Flags, child specs and start-up."""

from __future__ import annotations

import pytest

import actors
import supervision as supervisor

from .sup_helpers import events, expect, nothing, tagged
from .sup_workers import ReturnsSup, StaticSup, start_worker, worker_spec


def ok_spec(**kw):
    return {"id": "x", "start": (start_worker, ()), **kw}


@pytest.mark.parametrize(
    ("specs", "error"),
    [
        ([ok_spec(), ok_spec()], ("duplicate_child_name", "x")),
        ([{"start": (start_worker, ())}], "missing_id"),
        ([{"id": "x"}], "missing_start"),
        ([ok_spec(start=(start_worker,))], ("invalid_mfa", (start_worker,))),
        ([ok_spec(start=(42, ()))], ("invalid_mfa", (42, ()))),
        ([ok_spec(restart="sometimes")], ("invalid_restart_type", "sometimes")),
        ([ok_spec(type="manager")], ("invalid_child_type", "manager")),
        ([ok_spec(shutdown=-1)], ("invalid_shutdown", -1)),
        ([ok_spec(shutdown="soon")], ("invalid_shutdown", "soon")),
        ([ok_spec(shutdown=True)], ("invalid_shutdown", True)),
        ([ok_spec(modules="all")], ("invalid_modules", "all")),
        ([ok_spec(modules=[1])], ("invalid_module", 1)),
        ([ok_spec(significant="yes", restart="transient")], ("invalid_significant", "yes")),
        ([ok_spec(significant=True)],
         ("bad_combination", [("restart", "permanent"), ("significant", True)])),
        (["not a spec"], ("invalid_child_spec", "not a spec")),
    ],
)
def test_check_childspecs_rejects(specs, error):
    assert supervisor.check_childspecs(specs) == ("error", error)


def test_check_childspecs_accepts_and_checks_significance_against_auto_shutdown():
    specs = [ok_spec(id="a"), ok_spec(id="b", restart="transient", significant=True,
                                      shutdown="brutal_kill", type="supervisor",
                                      modules="dynamic")]
    assert supervisor.check_childspecs(specs) == "ok"
    assert supervisor.check_childspecs(specs, "any_significant") == "ok"
    assert supervisor.check_childspecs(specs, "never") == (
        "error", ("bad_combination", [("auto_shutdown", "never"), ("significant", True)]))
    assert supervisor.check_childspecs("x") == ("error", ("badarg", "x"))
    assert supervisor.check_childspecs([], "sometimes") == ("error", ("badarg", "sometimes"))


def test_spec_defaults(me):
    ok, sup = supervisor.start_link(StaticSup, ({}, [
        {"id": "w", "start": (lambda: "ignore", ())},
        {"id": "s", "start": (lambda: "ignore", ()), "type": "supervisor"}]))
    assert supervisor.get_childspec(sup, "w")[1] == {
        "id": "w", "start": supervisor.get_childspec(sup, "w")[1]["start"],
        "restart": "permanent", "significant": False, "shutdown": 5000,
        "type": "worker", "modules": [__name__]}
    assert supervisor.get_childspec(sup, "s")[1]["shutdown"] == "infinity"


@pytest.mark.parametrize(
    ("flags", "error"),
    [
        ({"strategy": "one_for_some"}, ("invalid_strategy", "one_for_some")),
        ({"intensity": -1}, ("invalid_intensity", -1)),
        ({"period": 0}, ("invalid_period", 0)),
        ({"auto_shutdown": "maybe"}, ("invalid_auto_shutdown", "maybe")),
        ("flags", ("invalid_type", "flags")),
    ],
)
def test_bad_flags_make_start_link_fail_with_supervisor_data(me, flags, error):
    assert supervisor.start_link(StaticSup, (flags, [])) == (
        "error", ("supervisor_data", error))


def test_bad_specs_make_start_link_fail_with_start_spec(me):
    specs = [ok_spec(), ok_spec()]
    assert supervisor.start_link(StaticSup, ({}, specs)) == (
        "error", ("start_spec", ("duplicate_child_name", "x")))
    significant = [ok_spec(restart="temporary", significant=True)]
    assert supervisor.start_link(StaticSup, ({}, significant)) == (
        "error", ("start_spec",
                  ("bad_combination", [("auto_shutdown", "never"), ("significant", True)])))


@pytest.mark.parametrize("specs", [[], [ok_spec(id="a"), ok_spec(id="b")]])
def test_simple_one_for_one_needs_exactly_one_spec(me, specs):
    assert supervisor.start_link(StaticSup, ({"strategy": "simple_one_for_one"}, specs)) == (
        "error", ("bad_start_spec", specs))


def test_init_returning_ignore_or_garbage(me):
    assert supervisor.start_link(ReturnsSup, "ignore") == "ignore"
    assert supervisor.start_link(ReturnsSup, ("ok", "what")) == (
        "error", ("bad_return", ("ReturnsSup", "init", ("ok", "what"))))


def test_failed_child_start_stops_the_started_ones_in_reverse_and_fails(me):
    specs = [worker_spec(me.pid, "a", {"trap": True}), worker_spec(me.pid, "b", {"trap": True}),
             worker_spec(me.pid, "c", {"crash_init": "nope"}), worker_spec(me.pid, "d")]
    assert supervisor.start_link(StaticSup, ({}, specs)) == (
        "error", ("shutdown", ("failed_to_start_child", "c", "nope")))
    assert events("started", 2) == ["a", "b"]
    assert events("terminate", 2) == ["b", "a"]
    nothing(tagged("started"))
    nothing(lambda m: m[0] == "EXIT")  # the failed supervisor's EXIT is consumed


def test_ignored_children_keep_their_spec_unless_temporary(me):
    specs = [{"id": "perm", "start": (lambda: "ignore", ())},
             {"id": "temp", "start": (lambda: "ignore", ()), "restart": "temporary"},
             worker_spec(me.pid, "w")]
    ok, sup = supervisor.start_link(StaticSup, ({}, specs))
    assert [(c, p is None) for c, p, *_ in supervisor.which_children(sup)] == [
        ("w", False), ("perm", True)]


def test_registered_name_and_calls_by_name(me):
    ok, sup = supervisor.start_link(StaticSup, ({}, [worker_spec(me.pid, "w")]), name="top_sup")
    assert actors.whereis("top_sup") == sup
    assert supervisor.count_children("top_sup")["active"] == 1
    assert supervisor.start_link(StaticSup, ({}, []), name="top_sup") == (
        "error", ("already_started", sup))


def test_a_supervisor_whose_parent_exits_stops_its_children(node):
    with node.attached() as parent:
        ok, sup = supervisor.start_link(StaticSup, ({}, [worker_spec(parent.pid, "w")]))
        w = expect(tagged("started"))[2]
    with node.attached():
        actors.monitor(sup)
        actors.monitor(w)
        reasons = {msg[3]: msg[4] for msg in (expect(lambda m: m[0] == "DOWN")
                                              for _ in range(2))}
    assert reasons == {sup: "normal", w: "shutdown"}
