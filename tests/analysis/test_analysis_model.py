"""Shared definitions: percentiles from log-bucketed histograms, fault windows, and
verdict rules, decided once for Spark and the reference alike."""

from __future__ import annotations

import math

from analysis import model
from analysis.model import FaultWindow


def test_log_bucket_has_one_percent_resolution() -> None:
    for ns in (1, 999, 1_000_000, 123_456_789):
        lower = model.bucket_value_ms(model.log_bucket(ns)) * 1e6
        assert lower <= ns * (1 + 1e-12)
        assert ns < lower * 1.01 * (1 + 1e-12)


def test_percentiles_read_cumulative_counts() -> None:
    b1, b2, b3 = (model.log_bucket(x) for x in (1_000_000, 2_000_000, 50_000_000))
    hist = {b1: 90, b2: 9, b3: 1}
    got = model.percentiles(hist)
    assert got["p50"] == round(model.bucket_value_ms(b1), 6)
    assert got["p90"] == round(model.bucket_value_ms(b1), 6)
    assert got["p99"] == round(model.bucket_value_ms(b2), 6)
    assert got["p99.9"] == round(model.bucket_value_ms(b3), 6)
    assert math.isclose(got["p99.9"], 50, rel_tol=0.01)
    assert model.percentiles({}) == {}


def test_fault_windows_pair_by_type_and_close_at_run_end() -> None:
    rows = [
        {"kind": "start", "fault": "kill", "ts_ns": 10},
        {"kind": "start", "fault": "partition", "ts_ns": 20},
        {"kind": "stop", "fault": "kill", "ts_ns": 30},
    ]
    assert model.fault_windows(rows, 100) == [FaultWindow("kill", 10, 30, False),
                                              FaultWindow("partition", 20, 100, True)]


def test_total_queue_verdicts() -> None:
    assert model.total_queue_status({"lost": 1}, drained=True, drain_expected=True)[0] == "fail"
    assert model.total_queue_status({"lost": 1}, drained=False, drain_expected=True)[0] == \
        "unknown"
    assert model.total_queue_status({"unexpected": 1}, False, True)[0] == "fail"
    assert model.total_queue_status({}, drained=False, drain_expected=False)[0] == "pass"
    assert [model.exit_code(v) for v in (True, False, "unknown")] == [0, 1, 2]


def test_dead_letter_chains_and_delivery_limits_follow_the_queue_settings() -> None:
    meta = model.RunConfig(queues={
        "a": {"type": "quorum", "delivery_limit": 2, "dlx_target": "b"},
        "b": {"type": "quorum", "dlx_target": "c"},
        "c": {"type": "quorum", "dlx_target": "a"},  # loops back: the chain ends
        "classic": {"type": "classic"},
    })
    assert meta.dlx_chain("a") == ["b", "c"]
    assert meta.dlx_chain("classic") == []
    assert meta.delivery_limit("a") == 2
    assert meta.delivery_limit("b") == model.DEFAULT_QQ_DELIVERY_LIMIT == 20
    assert meta.delivery_limit("classic") is None
    assert meta.delivery_limit("unknown") is None


def test_a_run_under_a_release_takes_that_release_s_default_delivery_limit() -> None:
    """A run whose nodes modelled a release records its default limit for quorum
    queues: 3.10 has none, so a quorum queue declared without one has none either."""
    queues = {"q": {"type": "quorum"}, "limited": {"type": "quorum", "delivery_limit": 5}}
    under_310 = model.RunConfig(queues=queues, config={"quorum_default_delivery_limit": None})
    assert under_310.delivery_limit("q") is None
    assert under_310.delivery_limit("limited") == 5
    under_43 = model.RunConfig(queues=queues, config={"quorum_default_delivery_limit": 20})
    assert under_43.delivery_limit("q") == 20
