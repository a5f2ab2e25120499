"""`ManualClock`: time moves only when the test says, and timers fire exactly then.

A node built on a `ManualClock` runs `send_after`, `start_timer`,
`read_timer` and everything built on them (the gen_statem-style timeouts of
`ra.statem`) on the test's time: nothing fires one microsecond early, and
everything due fires during the `advance` that reaches its deadline.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import actors
from actors import Node
from actors.clock import Clock, ManualClock
from ra.statem import TIMEOUT, Events
from tests.actors.helpers import collect


def drain() -> list[Any]:
    """Every message already in the caller's mailbox, without waiting."""
    out = []
    while (msg := actors.receive(0)) is not actors.TIMEOUT:
        out.append(msg)
    return out


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def node(clock: ManualClock) -> Iterator[Node]:
    n = Node("manual@127.0.0.1:1", clock=clock).start()
    yield n
    n.stop()


# ------------------------------------------------------------- the clock alone


def test_it_is_a_clock() -> None:
    clock: Clock = ManualClock(monotonic_ms=5_000, system_time_ms=1_000_000)
    assert clock.monotonic() == 5.0
    assert clock.monotonic_ms() == 5_000
    assert clock.system_time_ms() == 1_000_000


def test_time_stands_still_until_advanced_and_both_clocks_move_together() -> None:
    clock = ManualClock(monotonic_ms=0, system_time_ms=1_000_000)
    assert clock.monotonic_ms() == 0
    clock.advance(1500)
    assert clock.monotonic_ms() == 1500
    assert clock.monotonic() == 1.5
    assert clock.system_time_ms() == 1_001_500
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_a_timer_fires_at_its_deadline_and_not_a_microsecond_before() -> None:
    clock = ManualClock()
    fired: list[int] = []
    clock.call_later(0.07, lambda: fired.append(clock.monotonic_ms()))  # 0.07 is not exact
    clock.advance(69.999)
    assert fired == []
    clock.advance(0.001)
    assert fired == [70]
    assert clock.pending() == 0


def test_due_timers_fire_in_deadline_order_each_at_its_own_time() -> None:
    clock = ManualClock()
    fired: list[tuple[str, int]] = []
    for name, seconds in (("c", 0.03), ("a", 0.01), ("b1", 0.02), ("b2", 0.02)):
        clock.call_later(seconds, lambda n: fired.append((n, clock.monotonic_ms())), name)
    clock.advance(100)
    # equal deadlines fire in the order they were set
    assert fired == [("a", 10), ("b1", 20), ("b2", 20), ("c", 30)]
    assert clock.monotonic_ms() == 100


def test_a_timer_set_by_a_firing_timer_fires_in_the_same_advance_if_due() -> None:
    clock = ManualClock()
    fired: list[tuple[str, int]] = []

    def first() -> None:
        fired.append(("first", clock.monotonic_ms()))
        clock.call_later(0.01, lambda: fired.append(("second", clock.monotonic_ms())))
        clock.call_later(1.0, lambda: fired.append(("late", clock.monotonic_ms())))

    clock.call_later(0.01, first)
    clock.advance(50)
    assert fired == [("first", 10), ("second", 20)]
    assert clock.pending() == 1


def test_a_cancelled_timer_never_fires() -> None:
    clock = ManualClock()
    fired: list[str] = []
    handle = clock.call_later(0.01, fired.append, "x")
    handle.cancel()
    assert clock.pending() == 0
    clock.advance(1000)
    assert fired == []


# ------------------------------------------------------- a node on the clock


def test_send_after_is_delivered_exactly_when_the_clock_reaches_it(
        node: Node, clock: ManualClock) -> None:
    with node.attached() as me:
        tref = actors.send_after(60_000, me.pid, "a minute later")
        assert actors.read_timer(tref) == 60_000
        clock.advance(59_999)
        assert actors.read_timer(tref) == 1
        assert drain() == []
        clock.advance(1)
        assert drain() == ["a minute later"]
        assert actors.read_timer(tref) is False


def test_start_timer_and_send_after_fire_in_expiry_order(node: Node, clock: ManualClock) -> None:
    with node.attached() as me:
        trefs = {ms: actors.start_timer(ms, me.pid, ms) for ms in (40, 10, 30, 20)}
        clock.advance(25)
        assert drain() == [("timeout", trefs[10], 10), ("timeout", trefs[20], 20)]
        clock.advance(15)
        assert drain() == [("timeout", trefs[30], 30), ("timeout", trefs[40], 40)]


def test_a_cancelled_timer_reports_what_was_left_and_stays_silent(
        node: Node, clock: ManualClock) -> None:
    with node.attached() as me:
        tref = actors.send_after(5000, me.pid, "never")
        clock.advance(1234)
        assert actors.cancel_timer(tref) == 3766
        clock.advance(10_000)
        assert drain() == []
        assert clock.pending() == 0


def test_a_stopped_node_leaves_no_timer_on_the_clock(clock: ManualClock) -> None:
    n = Node("short@127.0.0.1:1", clock=clock).start()
    with n.attached() as me:
        actors.send_after(1000, me.pid, "x")
        actors.send_after(2000, "some_name", "y")
    assert clock.pending() == 1  # the timer to a pid went with its process
    n.stop()
    assert clock.pending() == 0


def test_statem_state_and_generic_timeouts_fire_when_advanced(
        node: Node, clock: ManualClock) -> None:
    with node.attached():
        events = Events()
        events.set_state_timeout(500, "election")
        events.set_timeout("tick", 200, "heartbeat")
        clock.advance(199)
        assert events.take_waiting() is None
        clock.advance(1)
        assert events.take_waiting() == (TIMEOUT, "heartbeat")
        events.set_timeout("tick", 200, "heartbeat")  # re-armed at 200: due at 400
        events.state_changed()  # a state change cancels the state timeout
        clock.advance(10_000)
        assert events.take_waiting() == (TIMEOUT, "heartbeat")
        assert events.take_waiting() is None


def test_a_process_waiting_for_a_timer_wakes_when_the_test_advances(
        node: Node, clock: ManualClock) -> None:
    with node.attached() as me:
        parent = me.pid

        def sleeper() -> None:
            actors.send_after(300, actors.self(), "wake")
            actors.send(parent, "armed")
            actors.send(parent, ("woke", actors.receive(), actors.get_node().clock.monotonic_ms()))

        actors.spawn(sleeper)
        assert collect(1) == ["armed"]
        clock.advance(300)
        assert collect(1) == [("woke", "wake", 300)]
