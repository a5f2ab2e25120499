"""The runtime API and every result or error term of OTP's `supervisor` API."""

from __future__ import annotations

import pytest

import actors
import supervision as supervisor

from .sup_helpers import events, expect, nothing, tagged
from .sup_workers import ScriptedStart, StaticSup, start_worker, worker_spec

MODS = ["tests.supervision.sup_workers"]


@pytest.fixture
def sup(me):
    ok, pid = supervisor.start_link(StaticSup, ({"intensity": 10}, [worker_spec(me.pid, "a")]))
    events("started", 1)
    return pid


@pytest.fixture
def sofo(me):
    spec = {"id": "tmpl", "start": (start_worker, (me.pid,))}
    ok, pid = supervisor.start_link(StaticSup, ({"strategy": "simple_one_for_one"}, [spec]))
    return pid


def pid_of(sup, cid):
    return {c: p for c, p, _t, _m in supervisor.which_children(sup)}[cid]


# ---------------------------------------------------------------- start_child


def test_start_child_returns_ok_pid_and_the_child_is_started_last(me, sup):
    ok, pid = supervisor.start_child(sup, worker_spec(me.pid, "b"))
    assert ok == "ok" and events("started", 1) == ["b"]
    assert [c for c, *_ in supervisor.which_children(sup)] == ["b", "a"]


def test_start_child_passes_on_ok_pid_info(me, sup):
    def start_with_info():
        ok, pid = start_worker(me.pid, "i")
        return ("ok", pid, {"extra": 1})

    result = supervisor.start_child(sup, {"id": "i", "start": (start_with_info, ())})
    assert result[0] == "ok" and result[2] == {"extra": 1}


def test_start_child_ignore_gives_ok_none_and_keeps_the_spec(me, sup):
    spec = {"id": "ig", "start": (lambda: "ignore", ())}
    assert supervisor.start_child(sup, spec) == ("ok", None)
    assert ("ig", None, "worker", [__name__]) in supervisor.which_children(sup)


def test_start_child_ignore_of_a_temporary_child_keeps_nothing(me, sup):
    spec = {"id": "ig", "start": (lambda: "ignore", ()), "restart": "temporary"}
    assert supervisor.start_child(sup, spec) == ("ok", None)
    assert supervisor.get_childspec(sup, "ig") == ("error", "not_found")


def test_start_child_of_a_running_id_is_already_started(me, sup):
    assert supervisor.start_child(sup, worker_spec(me.pid, "a")) == (
        "error", ("already_started", pid_of(sup, "a")))


def test_start_child_of_a_kept_stopped_id_is_already_present(me, sup):
    supervisor.terminate_child(sup, "a")
    assert supervisor.start_child(sup, worker_spec(me.pid, "a")) == ("error", "already_present")


def test_start_child_failure_returns_reason_and_spec_and_discards_the_spec(me, sup):
    spec = worker_spec(me.pid, "bad", {"crash_init": "no_way"})
    result = supervisor.start_child(sup, spec)
    assert result[0] == "error"
    reason, full_spec = result[1]
    assert reason == "no_way" and full_spec["id"] == "bad" and full_spec["shutdown"] == 5000
    assert supervisor.get_childspec(sup, "bad") == ("error", "not_found")


def test_start_child_passing_on_already_started_from_the_start_function(me, sup):
    a = pid_of(sup, "a")
    spec = {"id": "dup", "start": (lambda: ("error", ("already_started", a)), ())}
    assert supervisor.start_child(sup, spec) == ("error", ("already_started", a))


def test_start_child_raising_is_an_error_not_a_supervisor_crash(me, sup):
    def boom():
        raise RuntimeError("no")

    (err, ((tag, (kind, qualname, text, _tb)), _spec)) = supervisor.start_child(
        sup, {"id": "r", "start": (boom, ())})
    assert (err, tag, kind, qualname, text) == ("error", "EXIT", "exception", "RuntimeError", "no")
    assert supervisor.count_children(sup)["active"] == 1


def test_start_child_with_an_invalid_spec_returns_the_validation_error(me, sup):
    spec = worker_spec(me.pid, "v", shutdown=-1)
    assert supervisor.start_child(sup, spec) == ("error", ("invalid_shutdown", -1))


def test_start_child_on_simple_one_for_one_appends_extra_args(me, sofo):
    ok, pid = supervisor.start_child(sofo, ["dyn", {"trap": True}])
    assert ok == "ok" and expect(tagged("started"))[1:] == ("dyn", pid)


def test_start_child_given_by_module_path(me, sup):
    spec = {"id": "s", "start": ("tests.supervision.sup_workers:start_worker", (me.pid, "s"))}
    assert supervisor.start_child(sup, spec)[0] == "ok"
    assert events("started", 1) == ["s"]
    assert supervisor.get_childspec(sup, "s")[1]["modules"] == MODS


# ------------------------------------------------------------ terminate_child


def test_terminate_child_keeps_the_spec_and_does_not_restart(me, sup):
    assert supervisor.terminate_child(sup, "a") == "ok"
    assert supervisor.which_children(sup) == [("a", None, "worker", MODS)]
    nothing(tagged("started"))


def test_terminate_child_of_a_temporary_child_deletes_its_spec(me, sup):
    supervisor.start_child(sup, worker_spec(me.pid, "t", restart="temporary"))
    assert supervisor.terminate_child(sup, "t") == "ok"
    assert supervisor.get_childspec(sup, "t") == ("error", "not_found")


def test_terminate_child_errors(me, sup, sofo):
    assert supervisor.terminate_child(sup, "nope") == ("error", "not_found")
    assert supervisor.terminate_child(sofo, "tmpl") == ("error", "simple_one_for_one")
    live_stranger = me.pid
    assert supervisor.terminate_child(sofo, live_stranger) == ("error", "not_found")


def test_terminate_child_by_pid_on_simple_one_for_one(me, sofo):
    _, pid = supervisor.start_child(sofo, ["d"])
    assert supervisor.terminate_child(sofo, pid) == "ok"
    assert not actors.is_process_alive(pid)
    assert supervisor.which_children(sofo) == []
    # a pid that is no longer alive is accepted, as in OTP
    assert supervisor.terminate_child(sofo, pid) == "ok"


# -------------------------------------------------------------- restart_child


def test_restart_child_starts_a_stopped_child(me, sup):
    supervisor.terminate_child(sup, "a")
    ok, pid = supervisor.restart_child(sup, "a")
    assert ok == "ok" and pid_of(sup, "a") == pid
    assert events("started", 1) == ["a"]


def test_restart_child_errors(me, sup, sofo):
    assert supervisor.restart_child(sup, "a") == ("error", "running")
    assert supervisor.restart_child(sup, "nope") == ("error", "not_found")
    assert supervisor.restart_child(sofo, "tmpl") == ("error", "simple_one_for_one")


def test_restart_child_passes_on_ignore_start_errors_and_info(me, sup):
    start = ScriptedStart(me.pid, "s", ["ignore", ("error", "e3"), "worker_info"])
    assert supervisor.start_child(sup, {"id": "s", "start": (start, ())}) == ("ok", None)
    assert supervisor.restart_child(sup, "s") == ("error", "e3")
    assert supervisor.which_children(sup)[0][:2] == ("s", None)
    ok, pid, info = supervisor.restart_child(sup, "s")
    assert (ok, info) == ("ok", ("info", 3)) and pid_of(sup, "s") == pid


# --------------------------------------------------------------- delete_child


def test_delete_child_of_a_stopped_child(me, sup):
    supervisor.terminate_child(sup, "a")
    assert supervisor.delete_child(sup, "a") == "ok"
    assert supervisor.which_children(sup) == []


def test_delete_child_errors(me, sup, sofo):
    assert supervisor.delete_child(sup, "a") == ("error", "running")
    assert supervisor.delete_child(sup, "nope") == ("error", "not_found")
    assert supervisor.delete_child(sofo, "tmpl") == ("error", "simple_one_for_one")


# ------------------------------------------------- which / count / childspec


def test_which_children_lists_the_last_started_first(me, sup):
    supervisor.start_child(sup, worker_spec(me.pid, "b"))
    supervisor.start_child(sup, {"id": "c", "start": (lambda: "ignore", ()),
                                 "type": "supervisor", "modules": "dynamic"})
    kids = supervisor.which_children(sup)
    assert [(c, t, m) for c, _p, t, m in kids] == [
        ("c", "supervisor", "dynamic"), ("b", "worker", MODS), ("a", "worker", MODS)]
    assert kids[0][1] is None and all(isinstance(p, actors.Pid) for _c, p, *_ in kids[1:])


def test_count_children_counts_specs_and_live_processes(me, sup):
    supervisor.start_child(sup, {"id": "s", "start": (lambda: "ignore", ()), "type": "supervisor"})
    assert supervisor.count_children(sup) == {"specs": 2, "active": 1, "supervisors": 1,
                                              "workers": 1}


def test_count_children_on_simple_one_for_one(me, sofo):
    supervisor.start_child(sofo, ["x"])
    supervisor.start_child(sofo, ["y"])
    assert supervisor.count_children(sofo) == {"specs": 1, "active": 2, "supervisors": 0,
                                               "workers": 2}


def test_get_childspec_returns_the_full_spec(me, sup):
    ok, spec = supervisor.get_childspec(sup, "a")
    assert ok == "ok"
    assert spec == {"id": "a", "start": (start_worker, (me.pid, "a", {})),
                    "restart": "permanent", "significant": False, "shutdown": 5000,
                    "type": "worker", "modules": MODS}
    assert supervisor.get_childspec(sup, "nope") == ("error", "not_found")


def test_get_childspec_by_pid_on_simple_one_for_one(me, sofo):
    _, pid = supervisor.start_child(sofo, ["x"])
    ok, spec = supervisor.get_childspec(sofo, pid)
    assert ok == "ok" and spec["id"] == "tmpl"
    assert supervisor.get_childspec(sofo, me.pid) == ("error", "not_found")


def test_api_calls_to_a_dead_supervisor_exit_with_noproc(me, sup):
    actors.exit(sup, "kill")
    with pytest.raises(actors.CallExit) as info:
        supervisor.which_children(sup)
    assert info.value.why == "noproc"
