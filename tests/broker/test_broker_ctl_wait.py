"""`warren ctl wait --pid PID` and `warren ctl await_startup`, as rabbitmqctl's.

A script that starts a node in the background waits on its OS pid: `wait` returns
once the node answers and its broker has booted, says `process_not_running` (69)
when the process is gone, and times out with rabbitmqctl's text and 75.
`await_startup` needs a node that answers now (69 otherwise), then waits for it to
boot. The polling rule itself is a pure function of a clock.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from broker.ctl_wait import command_timeout, poll
from tests.broker.broker_support import (
    ROOT,
    BrokerProc,
    ctl,
    env,
    launch,
    plan,
    stop_all,
)
from transports.zmq_node import free_port


def test_wait_returns_once_a_node_started_in_the_background_has_booted(
        tmp_path: Path) -> None:
    (node,) = plan(1, tmp_path)
    try:
        launch(node, ["--name", node.name, "--amqp-port", "0", "--backend", "memory",
                      "--data-dir", str(node.data_dir)])
        assert node.proc is not None
        out = ctl(node.name, "wait", "--pid", str(node.proc.pid), timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines() == [
            f"Waiting for erlang distribution on node '{node.name}' while OS process "
            f"'{node.proc.pid}' is running",
            f"Waiting for applications '[rabbit_and_plugins]' to start on node '{node.name}'",
            f"Applications '[rabbit_and_plugins]' are running on node '{node.name}'"]
        # booted: the ready file is there and commands are answered
        assert (node.data_dir / "ready").exists()
        assert ctl(node.name, "list_queues").returncode == 0
        assert ctl(node.name, "await_startup").returncode == 0
    finally:
        stop_all([node])


def test_wait_on_a_process_that_is_gone_is_process_not_running() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    out = ctl(f"n@127.0.0.1:{free_port()}", "wait", "--pid", str(gone.pid))
    assert out.returncode == 69
    assert out.stderr == "Error:\nprocess_not_running\n"


def test_wait_on_a_live_process_that_never_answers_times_out_with_75() -> None:
    name = f"n@127.0.0.1:{free_port()}"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        out = ctl(name, "wait", "--pid", str(sleeper.pid), timeout=1)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert out.returncode == 75
    assert out.stderr == (f"Error: operation wait on node {name} timed out. "
                          "Timeout value used: 1000\n")


def test_await_startup_on_a_node_that_does_not_answer_is_unreachable() -> None:
    name = f"n@127.0.0.1:{free_port()}"
    out = ctl(name, "await_startup", timeout=1)
    assert out.returncode == 69
    assert f"node {name} is unreachable" in out.stderr


def test_await_startup_on_a_bare_node_times_out_as_it_never_boots_a_broker(
        tmp_path: Path) -> None:
    node = BrokerProc(f"n@127.0.0.1:{free_port()}", 0, tmp_path / "n")
    try:
        launch(node, ["--name", node.name, "--bare"])
        assert node.proc is not None
        assert ctl(node.name, "wait", "--pid", str(node.proc.pid),
                   timeout=1).returncode == 75
        out = ctl(node.name, "await_startup", timeout=1)
        assert out.returncode == 75
        assert out.stderr == (f"Error: operation await_startup on node {node.name} "
                              "timed out. Timeout value used: 1000\n")
    finally:
        stop_all([node])


def test_wait_on_a_node_whose_process_dies_before_it_boots_is_process_not_running(
        tmp_path: Path) -> None:
    node = BrokerProc(f"n@127.0.0.1:{free_port()}", 0, tmp_path / "n")
    try:
        launch(node, ["--name", node.name, "--bare"])  # answers, never boots a broker
        assert node.proc is not None
        waiting = subprocess.Popen(
            [sys.executable, "-m", "warren_cli", "ctl", "--node", node.name, "--timeout", "120",
             "wait", "--pid", str(node.proc.pid)],
            cwd=ROOT, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert waiting.stdout is not None
            for line in waiting.stdout:  # the node answers: now it waits for the boot
                if line.startswith("Waiting for applications"):
                    break
            node.proc.kill()
            node.proc.wait()  # reaped, as a shell reaps its background job
            out, err = waiting.communicate(timeout=60)
        finally:
            if waiting.poll() is None:
                waiting.kill()
                waiting.communicate()
        assert (waiting.returncode, err) == (69, "Error:\nprocess_not_running\n")
    finally:
        stop_all([node])


def test_wait_needs_the_pid_of_the_node_process() -> None:
    out = ctl(f"n@127.0.0.1:{free_port()}", "wait")
    assert out.returncode == 64


class FakeClock:
    """A clock that moves only when slept on."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_poll_returns_the_first_answer_and_sleeps_between_looks() -> None:
    clock = FakeClock()
    answers = iter([None, None, "up"])
    assert poll(lambda: next(answers), 10, clock, clock.sleep, interval=0.5) == "up"
    assert clock.slept == [0.5, 0.5]


def test_poll_gives_up_at_the_timeout_without_sleeping_past_it() -> None:
    clock = FakeClock()
    assert poll(lambda: None, 1.2, clock, clock.sleep, interval=0.5) is None
    assert [round(s, 6) for s in clock.slept] == [0.5, 0.5, 0.2]


def test_poll_looks_at_least_once_even_with_no_time_left() -> None:
    clock = FakeClock()
    assert poll(lambda: "up", 0, clock, clock.sleep) == "up"
    assert clock.slept == []


def test_the_waiting_commands_wait_300_seconds_unless_told_and_the_others_30() -> None:
    assert command_timeout("wait", None, 30.0) == 300.0
    assert command_timeout("await_startup", None, 30.0) == 300.0
    assert command_timeout("list_queues", None, 30.0) == 30.0
    assert command_timeout("wait", 5.0, 30.0) == 5.0
