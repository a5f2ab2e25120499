"""The differential suite's own machinery: its two clusters start side by side and
both stop however the start ends, and the raw-bytes capture of a probe keeps working
while a probe against the other broker captures at the same time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pika
import pytest

from tests.broker.broker_support import eventually
from tests.differential import conftest
from tests.differential.conftest import Pairs, started_together
from tests.differential.probes import Target
from tests.differential.real_brokers import STARTERS
from tests.differential.wire_types import capture, raw_properties


def _decoded() -> pika.BasicProperties:
    raw = b"".join(pika.BasicProperties(headers={"a": 1}).encode())
    props = pika.BasicProperties()
    props.decode(raw)
    return props


def test_a_capture_ending_leaves_an_overlapping_one_capturing() -> None:
    first, second = capture(), capture()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    try:
        assert raw_properties(_decoded()) is not None
    finally:
        second.__exit__(None, None, None)
    assert raw_properties(_decoded()) is None  # pika's own decode is back


@contextmanager
def _cluster(events: list[str], name: str, fails: bool = False) -> Iterator[Target]:
    """A stand-in cluster that notes when it goes up and down."""
    if fails:
        raise RuntimeError(f"{name} did not boot")
    events.append(f"{name} up")
    try:
        yield Target(name, [1], lambda _i: None)
    finally:
        events.append(f"{name} down")


def test_clusters_started_together_all_stop_when_one_fails_to_start() -> None:
    events: list[str] = []

    def cluster(name: str, fails: bool) -> Any:
        return _cluster(events, name, fails)

    with pytest.raises(RuntimeError, match="b did not boot"), \
            started_together(cluster("a", False), cluster("b", True)):
        pass
    assert events == ["a up", "a down"]

    with started_together(cluster("c", False), cluster("d", False)) as (c, d):
        assert (c.name, d.name) == ("c", "d")
    assert events[2:] == ["c up", "d up", "d down", "c down"] or \
        events[2:] == ["d up", "c up", "d down", "c down"]


def test_the_next_series_starts_while_the_one_before_is_tested(
        monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    events: list[str] = []
    def real(series: str) -> Callable[[], Any]:
        return lambda: _cluster(events, f"real {series}")
    for series in ("x", "y"):
        monkeypatch.setitem(STARTERS, series, real(series))

    def warren(series: str, _base: Path) -> Any:
        return _cluster(events, f"warren {series}")
    monkeypatch.setattr(conftest, "warren", warren)

    pairs = Pairs(["x", "y"], tmp_path_factory)
    try:
        first = pairs.take("x")
        assert (first.rabbitmq.name, first.warren.name) == ("real x", "warren x")
        assert eventually(lambda: {"real y up", "warren y up"} <= set(events)), events
        pairs.stop("x")
        assert {"real x down", "warren x down"} <= set(events)
        assert not {"real y down", "warren y down"} & set(events)
        assert pairs.take("y").warren.name == "warren y"
    finally:
        pairs.close()
    assert {"real y down", "warren y down"} <= set(events)
