"""Monitors: independent, fire once, DOWN even for dead targets."""

from __future__ import annotations

import pytest

import actors
from actors import Node
from tests.actors.helpers import collect, nothing_more, wait_forever


@pytest.mark.parametrize("remote", [False, True], ids=["local", "remote"])
def test_monitor_dead_pid_gives_immediate_noproc(a: Node, b: Node, remote: bool) -> None:
    where = b if remote else a
    with a.attached():
        dead = where.spawn(lambda: None)
        actors.sleep(20)
        ref = actors.monitor(dead)
        assert collect(1) == [("DOWN", ref, "process", dead, "noproc")]


@pytest.mark.parametrize("remote", [False, True], ids=["local", "remote"])
def test_monitor_unknown_name_gives_noproc_with_name_node_object(
    a: Node, b: Node, remote: bool
) -> None:
    with a.attached():
        target = ("ghost", b.name) if remote else "ghost"
        ref = actors.monitor(target)
        node = b.name if remote else a.name
        assert collect(1) == [("DOWN", ref, "process", ("ghost", node), "noproc")]


def test_monitor_by_name_reports_the_name_and_resolves_once(a: Node) -> None:
    with a.attached():
        first = actors.spawn(wait_forever)
        actors.register("svc", first)
        ref = actors.monitor("svc")
        actors.exit(first, "bye")
        assert collect(1) == [("DOWN", ref, "process", ("svc", a.name), "bye")]


@pytest.mark.parametrize("remote", [False, True], ids=["local", "remote"])
def test_n_monitors_give_n_downs(a: Node, b: Node, remote: bool) -> None:
    where = b if remote else a
    with a.attached():
        pid = where.spawn(wait_forever)
        refs = [actors.monitor(pid) for _ in range(3)]
        assert len(set(refs)) == 3
        actors.send(pid, 1)
        actors.send(pid, 2)
        downs = collect(3)
        assert sorted(d[1] for d in downs) == sorted(refs)
        assert all(d[4] == "normal" for d in downs)
        assert nothing_more()


def test_demonitor_before_down_removes_monitor(a: Node) -> None:
    with a.attached():
        pid = actors.spawn(wait_forever)
        ref = actors.monitor(pid)
        assert actors.demonitor(ref, info=True) is True
        actors.exit(pid, "kill")
        assert nothing_more()


def test_demonitor_truth_table_when_down_is_already_queued(a: Node) -> None:
    with a.attached():
        refs = []
        for _ in range(4):
            pid = actors.spawn(wait_forever)
            refs.append(actors.monitor(pid))
            actors.exit(pid, "kill")
        actors.sleep(10)
        # the DOWNs are all queued now
        assert actors.demonitor(refs[0]) is True  # plain: no-op, True
        assert actors.demonitor(refs[1], info=True) is False  # already fired
        assert actors.demonitor(refs[2], flush=True, info=True) is False  # flush was needed
        assert actors.demonitor(refs[3], flush=True) is True
        left = collect(2)
        assert [m[1] for m in left] == [refs[0], refs[1]]
        assert nothing_more()


def test_unknown_ref_demonitor_is_a_noop(a: Node) -> None:
    with a.attached():
        assert actors.demonitor(actors.make_ref()) is True
        assert actors.demonitor(actors.make_ref(), info=True) is False


@pytest.mark.parametrize("remote", [False, True], ids=["local", "remote"])
def test_spawn_monitor_is_atomic(a: Node, b: Node, remote: bool) -> None:
    with a.attached():
        pid, ref = actors.spawn_monitor(_raise, node=b.name if remote else None)
        (down,) = collect(1)
        assert down[:4] == ("DOWN", ref, "process", pid)
        assert down[4][0] == "exception" and down[4][1] == "ValueError"


def _raise() -> None:
    raise ValueError("at once")


def test_monitor_fires_once_and_is_gone_on_both_sides(a: Node) -> None:
    with a.attached() as me:
        pid = actors.spawn(wait_forever)
        actors.monitor(pid)
        target = a.procs[pid.serial]
        assert len(target.watchers) == 1
        actors.send(pid, 1)
        actors.send(pid, 2)
        collect(1)
        assert me.monitors == {}
