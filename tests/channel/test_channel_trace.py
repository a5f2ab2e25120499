"""Flow trace points: resource alarms are recorded as the history's flow_events."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from actors import Node, trace
from channel.limits.alarm import Alarm

Row = tuple[str, dict[str, Any]]


@pytest.fixture
def rows() -> Iterator[list[Row]]:
    seen: list[Row] = []
    previous = trace.set_sink(lambda kind, fields: seen.append((kind, fields)))
    yield seen
    trace.set_sink(previous)


def test_alarm_changes_are_recorded_once_per_change(rows: list[Row]) -> None:
    node = Node("n1@host")
    alarm = Alarm(node)
    alarm.set_alarm("memory")
    alarm.set_alarm("memory")
    alarm.set_alarm("disk")
    alarm.clear_alarm("memory")
    alarm.clear_alarm("disk")
    fields = {"node": "n1@host", "entity_type": "node", "entity_id": "n1@host", "value": 0}
    assert rows == [("mem_alarm_on", fields), ("disk_alarm_on", fields),
                    ("mem_alarm_off", fields), ("disk_alarm_off", fields)]
