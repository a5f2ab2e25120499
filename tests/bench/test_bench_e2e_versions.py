"""`bench/e2e.py --rabbitmq-version`: the same workload against warren modelling each
release, side by side, the last line keyed by release."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.e2e import rabbit_target
from bench.e2e_versions import (
    Reference,
    parse_versions,
    plan,
    rabbit4_target,
    ratios,
    reference_for,
    table,
)

ROOT = Path(__file__).resolve().parents[2]
E2E = ROOT / "bench" / "e2e.py"


def test_releases_are_given_repeated_or_comma_separated_each_once() -> None:
    assert parse_versions(["3.10,4.0", "4.3", "4.0"]) == ["3.10", "4.0", "4.3"]


@pytest.mark.parametrize("value", ["3.9", "4.1", ","])
def test_a_release_warren_does_not_model_is_refused(value: str) -> None:
    with pytest.raises(ValueError):
        parse_versions([value])


RABBITMQ_3_10 = Reference("3.10", "3.10.8", rabbit_target)
RABBITMQ_4_0 = Reference("4.0", "4.0.5", rabbit4_target)


@pytest.mark.parametrize(("release", "real"), [
    ("3.10", RABBITMQ_3_10), ("4.0", RABBITMQ_4_0), ("4.2", RABBITMQ_4_0),
    ("4.3", RABBITMQ_4_0)])
def test_each_release_is_measured_beside_its_own_real_release_or_the_nearest(
        release: str, real: Reference) -> None:
    assert reference_for(release, [RABBITMQ_3_10, RABBITMQ_4_0]) == real


def test_without_a_real_4_x_every_release_is_measured_beside_the_real_3_10() -> None:
    assert reference_for("4.3", [RABBITMQ_3_10]) == RABBITMQ_3_10
    assert reference_for("4.3", []) is None


def test_each_real_release_runs_right_after_the_releases_measured_beside_it() -> None:
    assert plan(["4.3", "3.10", "4.0"], [RABBITMQ_3_10, RABBITMQ_4_0]) == [
        (["4.3", "4.0"], RABBITMQ_4_0), (["3.10"], RABBITMQ_3_10)]
    assert plan(["3.10", "4.2"], []) == [(["3.10", "4.2"], None)]


def test_ratios_are_warrens_figures_over_the_references_memory_included() -> None:
    ours = {"msgs_s_16b": 500.0, "confirm_p50_ms_w1": 3.0, "bytes_per_msg_leader": 900.0,
            "msgs_s_1k": 100.0}
    ref = {"msgs_s_16b": 1000.0, "confirm_p50_ms_w1": 1.5, "bytes_per_msg_leader": 1200.0,
           "msgs_s_1k": 0.0}
    assert ratios(ours, ref) == {"ratio_msgs_s_16b": 0.5, "ratio_confirm_p50_ms_w1": 2.0,
                                 "ratio_bytes_per_msg_leader": 0.75}


def test_the_table_has_a_column_per_release_and_a_line_per_figure() -> None:
    text = table({"3.10": {"machine_version": 2, "msgs_s_16b": 1234.5},
                  "4.3": {"machine_version": 8, "msgs_s_16b": 987.0,
                          "bytes_per_msg_leader": 310.2}})
    lines = [line.split("  ") for line in text.splitlines()]
    assert [c.strip() for c in lines[0] if c.strip()] == ["figure", "3.10", "4.3"]
    assert text.splitlines()[1].split()[-2:] == ["2", "8"]
    assert text.splitlines()[2].split()[-2:] == ["1,234", "987"]
    assert text.splitlines()[3].split()[-2:] == ["-", "310"]


def test_an_unknown_release_is_a_usage_error_before_anything_starts() -> None:
    done = subprocess.run([sys.executable, str(E2E), "--rabbitmq-version", "3.9",
                           "--rabbitmq", "no"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 2
    assert "--rabbitmq-version: '3.9' is not a release warren models" in done.stderr


def test_one_release_measured_end_to_end(tmp_path: Path) -> None:
    """One node modelling 3.10 (machine 2), the window-1 phase and a small memory fill:
    every figure lands under the release's key of the last line."""
    done = subprocess.run(
        [sys.executable, str(E2E), "--rabbitmq-version", "3.10", "--rabbitmq", "no",
         "--nodes", "1", "--phases", "w1", "--seconds", "1", "--warmup", "0.5",
         "--memory-messages", "500", "--dir", str(tmp_path)],
        capture_output=True, text=True, timeout=170, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    last = json.loads(done.stdout.strip().splitlines()[-1])
    assert list(last) == ["3.10"]
    figures = last["3.10"]
    assert figures["machine_version"] == 2
    assert figures["msgs_s_w1"] > 0 and figures["confirm_p50_ms_w1"] > 0
    assert figures["messages"] == 500 and "bytes_per_msg_leader" in figures
    assert "modelling RabbitMQ 3.10" in done.stdout
    assert list(tmp_path.iterdir()) == []


def test_a_release_that_refuses_the_memory_queue_keeps_its_phase_figures(
        tmp_path: Path) -> None:
    """4.3 denies transient non-exclusive classic queues, which the classic memory
    fill declares: the release's phase figures stand, with the refusal beside them."""
    done = subprocess.run(
        [sys.executable, str(E2E), "--queue-type", "classic", "--rabbitmq-version", "4.3",
         "--rabbitmq", "no", "--nodes", "1", "--phases", "w1", "--seconds", "1",
         "--warmup", "0.5", "--memory-messages", "500", "--dir", str(tmp_path)],
        capture_output=True, text=True, timeout=170, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])["4.3"]
    assert figures["msgs_s_w1"] > 0
    assert "transient_nonexcl_queues" in figures["memory_error"]


def test_4_0_measured_beside_a_real_rabbitmq_4_0_5(tmp_path: Path) -> None:
    """One warren node modelling 4.0 and one RabbitMQ 4.0.5 node from the Debian 13
    chroot, each through the window-1 phase and a small memory fill: the reference's
    figures under its own key, the release's ratios to it under the release's."""
    done = subprocess.run(
        [sys.executable, str(E2E), "--rabbitmq-version", "4.0", "--nodes", "1",
         "--phases", "w1", "--seconds", "1", "--warmup", "0.5",
         "--memory-messages", "500", "--dir", str(tmp_path)],
        capture_output=True, text=True, timeout=400, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    last = json.loads(done.stdout.strip().splitlines()[-1])
    assert list(last) == ["4.0", "rabbitmq-4.0.5"]
    assert last["rabbitmq-4.0.5"]["msgs_s_w1"] > 0
    assert last["rabbitmq-4.0.5"]["messages"] == 500
    assert "bytes_per_msg_leader" in last["rabbitmq-4.0.5"]
    ours = last["4.0"]
    assert ours["reference"] == "rabbitmq-4.0.5" and ours["reference_same_release"]
    assert ours["ratio_confirm_p50_ms_w1"] > 0
    assert "--- warren modelling RabbitMQ 4.0 (beside RabbitMQ 4.0.5)" in done.stdout
    assert list(tmp_path.iterdir()) == []
