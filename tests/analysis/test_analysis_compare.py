"""Runs of one scenario side by side (`analysis.compare`): what each run's figures are,
and which differences between releases the comparison names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis import synthetic
from analysis.compare import Delivery, Op, RunOps, Sample, compare, describe, summarize
from analysis.compare_load import load_run
from analysis.compare_report import format_text, write_outputs
from harness.cli import main as scenario_main

MS = 1_000_000
S = 1_000_000_000


def _plain(msg_ids: range, t0: int = 0, confirm_ms: int = 2, deliver_ms: int = 5) -> list[Op]:
    """Each message published 10 ms apart, confirmed, delivered once and acked."""
    ops = []
    for i, m in enumerate(msg_ids):
        t = t0 + i * 10 * MS
        ops += [Op("publish", t, m), Op("confirm", t + confirm_ms * MS, m),
                Op("deliver", t + deliver_ms * MS, m, "client-2", False, None),
                Op("ack", t + 6 * MS, m)]
    return ops


def _poison(m: int, t0: int, counts: list[int | None], acked: bool,
            others_between: int = 0) -> list[Op]:
    """Message `m` delivered with `counts`, rejected with requeue after every delivery
    but the last (acked when `acked`); `others_between` other deliveries between each
    requeue and the redelivery (ids from 10_000 up)."""
    ops = [Op("publish", t0, m), Op("confirm", t0 + MS, m)]
    t = t0 + 2 * MS
    other = 10_000 + m * 100
    for n, count in enumerate(counts):
        ops.append(Op("deliver", t, m, "client-2", n > 0, count))
        last = n == len(counts) - 1
        if not last:
            ops.append(Op("reject", t + 1, m, "client-2", requeue=True))
            for _ in range(others_between):
                t += 10
                ops.append(Op("deliver", t, other, "client-2", False, None))
                other += 1
        elif acked:
            ops.append(Op("ack", t + 1, m))
        t += MS
    return ops


def test_a_run_s_throughput_and_latencies_come_from_its_client_operations() -> None:
    run = RunOps("4.2", "r1", "s", tuple(_plain(range(101))))
    row = summarize(run)
    # 101 confirms over the first publish to the last confirm: 1.002 s
    assert row.confirmed == row.published == row.acked == 101
    assert row.confirmed_msgs_s == pytest.approx(101 / 1.002, abs=0.1)
    assert (row.confirm_p50_ms, row.confirm_p99_ms) == (2.0, 2.0)
    assert (row.end_to_end_p50_ms, row.end_to_end_p99_ms) == (5.0, 5.0)
    assert row.requeued_msgs == 0 and row.requeue_distance_median is None


def test_memory_per_message_is_the_most_grown_node_at_the_largest_backlog() -> None:
    """1000 messages confirmed by t=1 s, none acked until t=3 s: at the sample of
    t=2 s the backlog is 1000; node b grew 500 kB by then, so 500 bytes a message."""
    ops = [Op("confirm", S // 2, m) for m in range(1000)]
    ops += [Op("ack", 3 * S, m) for m in range(1000)]
    samples = (Sample(0, "a", 10_000_000), Sample(0, "b", 20_000_000),
               Sample(2 * S, "a", 10_100_000), Sample(2 * S, "b", 20_500_000),
               Sample(4 * S, "b", 19_000_000))
    row = summarize(RunOps("4.3", "r", "s", tuple(ops), samples))
    assert (row.bytes_per_queued_msg, row.peak_backlog) == (500.0, 1000)


def test_a_backlog_too_small_to_measure_gives_no_memory_figure() -> None:
    ops = [Op("confirm", 1, m) for m in range(10)]
    row = summarize(RunOps("4.3", "r", "s", tuple(ops), (Sample(0, "a", 1), Sample(5, "a", 9))))
    assert row.bytes_per_queued_msg is None and row.peak_backlog == 10


def test_requeue_distance_tells_back_of_the_queue_from_front() -> None:
    """A requeued message redelivered after 7 others went to the back of the queue;
    one redelivered next came back first."""
    back = summarize(RunOps("3.10", "a", "s", tuple(_poison(1, 0, [None, 1, 2], True, 7))))
    front = summarize(RunOps("4.2", "b", "s", tuple(_poison(1, 0, [0, 1, 2], True, 0))))
    assert (back.requeue_distance_median, back.requeue_distance_max) == (7.0, 7)
    assert (front.requeue_distance_median, front.requeue_distance_max) == (0.0, 0)


def test_a_message_s_deliveries_read_as_its_delivery_counts_and_fate() -> None:
    counts: list[int | None] = [None, *range(1, 26)]
    assert describe(tuple(Delivery(c, i > 0) for i, c in enumerate(counts)), True) == \
        "26 deliveries (x-delivery-count -, 1..25), acked"
    assert describe((Delivery(0, False), Delivery(0, True)), False) == \
        "2 deliveries (x-delivery-count 0, 0), not acked"


def _releases() -> list[RunOps]:
    """One poison message (id 5) under three releases, beside 20 plain messages:
    3.10 counts every requeue and has no limit (the consumer acks after 25
    requeues); 4.2 counts them and removes the message after 20; 4.3 does not count
    requeues, so the consumer acks it after 25 with every count 0."""
    plain = _plain(range(100, 120), t0=S)
    return [
        RunOps("3.10", "a", "poison-requeue",
               tuple(plain + _poison(5, 0, [None, *range(1, 26)], True, 3))),
        RunOps("4.2", "b", "poison-requeue",
               tuple(plain + _poison(5, 0, list(range(0, 21)), False))),
        RunOps("4.3", "c", "poison-requeue",
               tuple(plain + _poison(5, 0, [0] * 26, True))),
    ]


def test_the_comparison_names_the_delivery_figures_that_differ_by_release() -> None:
    result = compare(_releases())
    assert [r.label for r in result.rows] == ["3.10", "4.2", "4.3"]
    assert result.differing["max_deliveries_per_msg"] == {"3.10": 26, "4.2": 21, "4.3": 26}
    assert result.differing["requeued_removed_by_broker"] == {"3.10": 0, "4.2": 1, "4.3": 0}
    assert result.differing["requeue_distance_median"] == {"3.10": 3.0, "4.2": 0.0,
                                                           "4.3": 0.0}
    # most first deliveries (the plain messages') carry no count in every run
    assert "first_delivery_count" not in result.differing
    assert "requeued_msgs" not in result.differing


def test_the_comparison_shows_the_messages_delivered_differently() -> None:
    result = compare(_releases())
    # the plain messages (and the others delivered between requeues, only in 3.10)
    # are delivered alike; the poison message is not
    assert (result.messages_differing, result.messages_compared) == (1, 21)
    assert result.examples == {5: {
        "3.10": "26 deliveries (x-delivery-count -, 1..25), acked",
        "4.2": "21 deliveries (x-delivery-count 0..20), not acked",
        "4.3": "26 deliveries (x-delivery-count 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, "
               "0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), acked"}}


def test_identical_runs_differ_in_nothing() -> None:
    ops = tuple(_plain(range(30)) + _poison(50, 2 * S, [0, 1, 2], True))
    result = compare([RunOps("4.2", "a", "s", ops), RunOps("4.2", "b", "s", ops)])
    assert result.differing == {} and result.examples == {}
    assert (result.messages_differing, result.messages_compared) == (0, 31)


def test_the_text_and_html_reports_have_a_column_per_release(tmp_path: Path) -> None:
    result = compare(_releases())
    text = format_text(result)
    header = text.splitlines()[1].split()
    assert header == ["figure", "3.10", "4.2", "4.3"]
    assert "most deliveries of one msg differs: 3.10 26, 4.2 21, 4.3 26" in text
    write_outputs(result, tmp_path)
    page = (tmp_path / "compare.html").read_text()
    assert "<th>3.10</th><th>4.2</th><th>4.3</th>" in page
    data = json.loads((tmp_path / "compare.json").read_text())
    assert [r["label"] for r in data["runs"]] == ["3.10", "4.2", "4.3"]
    assert data["examples"]["5"]["4.2"].endswith("not acked")


def test_scenario_compare_reads_recorded_runs(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """`warren scenario compare` reads run directories (here two synthetic runs, which
    name no release) and writes its report; a missing run is bad input (64)."""
    for seed in (1, 2):
        synthetic.write_run(tmp_path / f"run{seed}", synthetic.generate(seed, 50, ()))
    assert load_run(tmp_path / "run1").label == "node default"
    out = tmp_path / "cmp"
    code = scenario_main(["scenario", "compare", str(tmp_path / "run1"),
                          str(tmp_path / "run2"), "--out", str(out)])
    assert code == 0
    assert "confirmed msg/s" in capsys.readouterr().out
    assert (out / "compare.html").exists() and (out / "compare.json").exists()
    assert scenario_main(["scenario", "compare", str(tmp_path / "nowhere")]) == 64
    assert "bad input" in capsys.readouterr().err
