"""The memory alarm: watermark arithmetic, run-time changes, the periodic check."""

from __future__ import annotations

from collections.abc import Iterator

import gevent
import pytest

from actors import Node
from channel.limits.alarm import Alarm
from channel.limits.memory_monitor import DEFAULT_WATERMARK, MemoryMonitor, parse_absolute
from tests.waiting import hub_wait_until

TOTAL = 10_000


@pytest.fixture
def alarm() -> Iterator[Alarm]:
    node = Node("mem@127.0.0.1:1").start()
    yield Alarm(node)
    greenlets = [p.greenlet for p in list(node.procs.values()) if p.greenlet is not None]
    node.stop()
    gevent.joinall(greenlets, timeout=5)
    assert all(g.dead for g in greenlets)


def test_default_limit_is_sixty_percent_of_total_memory(alarm: Alarm) -> None:
    monitor = MemoryMonitor(alarm, total=TOTAL)
    assert monitor.watermark == DEFAULT_WATERMARK
    assert monitor.limit == 6000


def test_alarm_only_above_the_limit_and_cleared_without_hysteresis(alarm: Alarm) -> None:
    monitor = MemoryMonitor(alarm, total=TOTAL)
    monitor.force_reading(6000)
    assert alarm.active == set()
    monitor.force_reading(6001)
    assert alarm.active == {"memory"}
    monitor.force_reading(6000)
    assert alarm.active == set()


def test_watermark_zero_at_run_time_raises_the_alarm(alarm: Alarm) -> None:
    monitor = MemoryMonitor(alarm, total=TOTAL, measure=lambda: 1)
    assert monitor.check() is False
    monitor.set_watermark(0)
    assert alarm.active == {"memory"}
    monitor.set_watermark(0.5)
    assert alarm.active == set()


def test_an_unusable_fraction_falls_back_to_forty_percent(alarm: Alarm) -> None:
    monitor = MemoryMonitor(alarm, total=TOTAL, watermark=1.5)
    assert monitor.limit == 4000


def test_absolute_limit_wins_over_the_fraction(alarm: Alarm) -> None:
    monitor = MemoryMonitor(alarm, total=TOTAL, watermark=0.9, absolute="2Ki")
    assert monitor.limit == 2048


@pytest.mark.parametrize(("text", "value"), [
    (1000, 1000), ("1000", 1000), ("1024MiB", 1024**3), ("4Gi", 4 * 1024**3),
    ("2GB", 2_000_000_000), ("10kB", 10_000), ("3k", 3072),
])
def test_absolute_values_accept_rabbitmq_units(text: int | str, value: int) -> None:
    assert parse_absolute(text) == value


def test_an_unknown_unit_is_refused() -> None:
    with pytest.raises(ValueError):
        parse_absolute("12 parsecs")


def test_the_periodic_check_follows_the_measured_usage(alarm: Alarm) -> None:
    usage = [100]
    monitor = MemoryMonitor(alarm, total=TOTAL, measure=lambda: usage[0],
                            interval_ms=10).start(alarm.node)
    usage[0] = 9000
    hub_wait_until(lambda: alarm.active == {"memory"}, "alarm raised by a periodic check")
    usage[0] = 100
    hub_wait_until(lambda: alarm.active == set(), "alarm cleared by a periodic check")
    monitor.stop()
