"""Timers: send_after / start_timer / cancel_timer / read_timer."""

from __future__ import annotations

import actors
from actors import Node
from tests.actors.helpers import collect, nothing_more, wait_forever


def test_send_after_fires(a: Node) -> None:
    with a.attached() as me:
        actors.send_after(20, me.pid, "tick")
        assert collect(1) == ["tick"]


def test_start_timer_wraps_with_its_ref(a: Node) -> None:
    with a.attached() as me:
        tref = actors.start_timer(10, me.pid, "payload")
        assert collect(1) == [("timeout", tref, "payload")]


def test_cancel_returns_remaining_ms_and_prevents_delivery(a: Node) -> None:
    with a.attached() as me:
        tref = actors.send_after(5000, me.pid, "never")
        remaining = actors.read_timer(tref)
        assert isinstance(remaining, int) and 4000 < remaining <= 5000
        left = actors.cancel_timer(tref)
        assert left is not False and 4000 < left <= 5000
        assert actors.cancel_timer(tref) is False
        assert actors.read_timer(tref) is False
        assert nothing_more(50)


def test_cancel_after_fire_returns_false_and_message_stays(a: Node) -> None:
    with a.attached() as me:
        tref = actors.send_after(5, me.pid, "fired")
        actors.sleep(50)
        assert actors.cancel_timer(tref) is False
        assert collect(1) == ["fired"]


def test_cancel_unknown_timer_is_false(a: Node) -> None:
    with a.attached():
        assert actors.cancel_timer(actors.make_ref()) is False


def test_pid_timer_is_cancelled_when_its_target_dies(a: Node) -> None:
    with a.attached():
        pid = actors.spawn(wait_forever)
        tref = actors.send_after(5000, pid, "late")
        actors.exit(pid, "kill")
        actors.sleep(10)
        assert actors.cancel_timer(tref) is False


def test_name_timer_resolves_at_expiry(a: Node) -> None:
    with a.attached() as me:
        # nobody holds the name when the timer is set: allowed, resolved later
        actors.send_after(30, "late_name", "found you")
        actors.register("late_name", me.pid)
        assert collect(1) == ["found you"]
        actors.unregister("late_name")
        actors.send_after(10, "late_name", "dropped")
        actors.sleep(40)
        assert nothing_more(20)


def test_timers_fire_in_expiry_order(a: Node) -> None:
    with a.attached() as me:
        for ms in (40, 10, 30, 20):
            actors.send_after(ms, me.pid, ms)
        assert collect(4) == [10, 20, 30, 40]
