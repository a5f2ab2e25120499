"""A node process collects cycles less often than CPython's default, and says why not
when told to use thresholds it cannot read."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from actors.gc_policy import ENV, NODE_THRESHOLDS, node_thresholds, tune_node_process


@pytest.fixture
def saved_thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    try:
        yield
    finally:
        gc.set_threshold(*before)


def test_a_node_collects_full_generations_ten_times_less_often_than_cpython() -> None:
    assert node_thresholds({}) == NODE_THRESHOLDS == (5000, 10, 100)
    assert node_thresholds({ENV: "  "}) == NODE_THRESHOLDS


def test_the_environment_overrides_the_thresholds() -> None:
    assert node_thresholds({ENV: "700,10,10"}) == (700, 10, 10)
    assert node_thresholds({ENV: " 0, 0 ,0 "}) == (0, 0, 0)


@pytest.mark.parametrize("raw", ["700,10", "a,b,c", "700,-1,10", "1,2,3,4", "1.5,2,3"])
def test_thresholds_it_cannot_read_are_refused_naming_the_variable(raw: str) -> None:
    with pytest.raises(ValueError) as info:
        node_thresholds({ENV: raw})
    assert str(info.value) == (f"{ENV}={raw!r}: expected three non-negative integers, "
                               "such as 5000,10,100")


def test_tuning_sets_this_process_collector(saved_thresholds: None) -> None:
    assert tune_node_process({}) == NODE_THRESHOLDS
    assert gc.get_threshold() == NODE_THRESHOLDS
    assert tune_node_process({ENV: "900,9,90"}) == (900, 9, 90)
    assert gc.get_threshold() == (900, 9, 90)
