"""A node that cannot start says why in one line on stderr and exits with a sysexits
code: 78 (EX_CONFIG) for a configuration value that can never work, 69
(EX_UNAVAILABLE) for a port another process holds, 73 (EX_CANTCREAT) for a data
directory it cannot create or write. No traceback, no `ready` line or file, and the
process ends by itself."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.broker.broker_support import (
    FREE_HTTP_PORTS,
    ROOT,
    ctl_json,
    env,
    launch,
    plan,
    stop_all,
    wait_ready,
)
from transports.zmq_node import free_port, stop_node_process

EX_UNAVAILABLE, EX_CANTCREAT, EX_CONFIG = 69, 73, 78


@dataclass
class Outcome:
    returncode: int | None
    stdout: str
    stderr: str

    @property
    def line(self) -> str:
        """The one line the node printed on stderr."""
        lines = self.stderr.splitlines()
        assert len(lines) == 1, self.stderr
        return lines[0]


def start_node(*args: str, timeout: float = 60.0) -> Outcome:
    """Run `warren node start ARGS` until it exits or says `ready` (then it is killed:
    a node that starts is the failure these tests look for)."""
    proc = subprocess.Popen([sys.executable, "-m", "warren_cli", "node", "start",
                             *FREE_HTTP_PORTS, *args],
                            cwd=ROOT, env=env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    out = b""
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and b"ready " not in out:
            if select.select([proc.stdout], [], [], 0.2)[0]:
                chunk = os.read(proc.stdout.fileno(), 4096)
                if not chunk:
                    break
                out += chunk
        if b"ready " in out:
            return Outcome(None, out.decode(), "")
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        return Outcome(code, out.decode(), proc.stderr.read().decode())
    finally:
        stop_node_process(proc)


@contextmanager
def held_port() -> Iterator[int]:
    """A port some other program listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def name() -> str:
    return f"a@127.0.0.1:{free_port()}"


def assert_no_ready(data_dir: Path, outcome: Outcome) -> None:
    assert "ready" not in outcome.stdout
    assert not (data_dir / "ready").exists()
    assert "Traceback" not in outcome.stderr


# ------------------------------------------------------------------ ports in use


def test_an_amqp_port_in_use_is_one_line_and_69(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with held_port() as port:
        got = start_node("--name", name(), "--amqp-port", str(port), "--data-dir", str(data))
    assert got.returncode == EX_UNAVAILABLE, got
    assert got.line == (f"warren: cannot listen for AMQP on 127.0.0.1:{port}: "
                        "Address already in use (eaddrinuse)")
    assert_no_ready(data, got)


def test_a_distribution_port_in_use_is_one_line_and_69(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with held_port() as port:
        node = f"a@127.0.0.1:{port}"
        got = start_node("--name", node, "--amqp-port", str(free_port()),
                         "--data-dir", str(data))
    assert got.returncode == EX_UNAVAILABLE, got
    assert got.line == (f"warren: cannot listen for node links on 127.0.0.1:{port} "
                        f"(node {node}): Address already in use (eaddrinuse); is a node "
                        "with this name running?")
    assert_no_ready(data, got)


def test_a_second_node_with_a_running_nodes_name_is_refused(tmp_path: Path) -> None:
    (running,) = plan(1, tmp_path)
    launch(running, ["--name", running.name, "--amqp-port", str(running.amqp_port),
                     "--data-dir", str(running.data_dir)])
    try:
        wait_ready(running)
        ready = json.loads((running.data_dir / "ready").read_text())
        second = tmp_path / "second"
        got = start_node("--name", running.name, "--amqp-port", str(free_port()),
                         "--data-dir", str(second))
        assert got.returncode == EX_UNAVAILABLE, got
        assert got.line.startswith(f"warren: cannot listen for node links on "
                                   f"127.0.0.1:{running.name.rsplit(':', 1)[1]} "
                                   f"(node {running.name}): Address already in use")
        assert_no_ready(second, got)
        # the running node is untouched: still up, same incarnation
        assert running.proc is not None and running.proc.poll() is None
        assert ctl_json(running.name, "cluster_status")["running_nodes"] == [running.name]
        assert json.loads((running.data_dir / "ready").read_text()) == ready
    finally:
        stop_all([running])


# ------------------------------------------------------------------ bad values


def test_an_amqp_port_out_of_range_is_a_config_error(tmp_path: Path) -> None:
    for port in ("70000", "-1"):
        got = start_node("--name", name(), "--amqp-port", port, "--data-dir",
                         str(tmp_path / "data"))
        assert got.returncode == EX_CONFIG, got
        assert got.line == ("warren: config key amqp_port: expected an integer from 0 to "
                            f"65535 (0: any free port), got '{port}'")
        assert_no_ready(tmp_path / "data", got)


def test_a_distribution_port_out_of_range_is_a_config_error(tmp_path: Path) -> None:
    got = start_node("--name", "a@127.0.0.1:70000", "--amqp-port", str(free_port()),
                     "--data-dir", str(tmp_path / "data"))
    assert got.returncode == EX_CONFIG, got
    assert got.line == ("warren: config key name: expected a node name name@host:port "
                        "(port 1 to 65535), got 'a@127.0.0.1:70000'")
    assert_no_ready(tmp_path / "data", got)


def test_a_negative_net_ticktime_is_a_config_error(tmp_path: Path) -> None:
    got = start_node("--name", name(), "--amqp-port", str(free_port()),
                     "--net-ticktime", "-1", "--data-dir", str(tmp_path / "data"))
    assert got.returncode == EX_CONFIG, got
    assert got.line == ("warren: config key net_ticktime: expected a number above 0 "
                        "(seconds), got '-1'")
    assert_no_ready(tmp_path / "data", got)


def test_a_mistyped_amqp_setting_stops_the_node_before_it_is_ready(tmp_path: Path) -> None:
    cfg = tmp_path / "node.json"
    data = tmp_path / "data"
    cfg.write_text(json.dumps({"name": name(), "amqp_port": free_port(),
                               "data_dir": str(data), "amqp": {"frame_max": "big"}}))
    got = start_node("--config", str(cfg))
    assert got.returncode == EX_CONFIG, got
    assert got.line == ("warren: config key amqp.frame_max: expected an integer from 4096 "
                        "to 4294967295, or 0 for no limit, got 'big'")
    assert_no_ready(data, got)


def test_an_unreadable_config_file_is_a_config_error(tmp_path: Path) -> None:
    cfg = tmp_path / "node.json"
    cfg.write_text('{"name": ')
    got = start_node("--config", str(cfg))
    assert got.returncode == EX_CONFIG, got
    assert got.line.startswith(f"warren: cannot read config {cfg}: ")


# ------------------------------------------------------------------ the data directory


def test_a_data_dir_that_is_a_file_is_one_line_and_73(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.write_text("not a directory")
    got = start_node("--name", name(), "--amqp-port", str(free_port()),
                     "--data-dir", str(data))
    assert got.returncode == EX_CANTCREAT, got
    assert got.line == (f"warren: cannot use data directory {data}: "
                        "it exists and is not a directory")
    assert data.read_text() == "not a directory"
    assert "Traceback" not in got.stderr


def test_a_data_dir_under_a_file_is_one_line_and_73(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    data = tmp_path / "file" / "data"
    got = start_node("--name", name(), "--amqp-port", str(free_port()),
                     "--data-dir", str(data))
    assert got.returncode == EX_CANTCREAT, got
    assert got.line.startswith(f"warren: cannot use data directory {data}: ")
    assert "Traceback" not in got.stderr


# ------------------------------------------------------------------ in one process


def test_a_broker_whose_listener_cannot_bind_leaves_no_process_behind() -> None:
    """What the CLI relies on: the failed start is reported with `rabbit_networking`'s
    reason, every process the start spawned has ended, and the caller lives on."""
    from actors import Node
    from broker.config import load
    from broker.node import BrokerNode, BrokerStartError
    from broker.running import RUNNING

    node = Node(name()).start()
    try:
        with held_port() as port, node.attached():
            cfg = load(None, {"name": node.name, "amqp_port": str(port)})
            callers = set(node.procs)
            with pytest.raises(BrokerStartError) as info:
                BrokerNode(cfg, node).start()
            assert info.value.reason == ("shutdown", ("failed_to_start_child", "amqp_listener", (
                "could_not_start_listener", "127.0.0.1", port, "eaddrinuse")))
            assert set(node.procs) == callers and node.names == {}
            assert node.name not in RUNNING
    finally:
        node.stop()


def test_a_rabbitmq_version_warren_does_not_model_is_a_config_error(tmp_path: Path) -> None:
    got = start_node("--name", name(), "--amqp-port", str(free_port()),
                     "--rabbitmq-version", "3.9", "--data-dir", str(tmp_path / "data"))
    assert got.returncode == EX_CONFIG, got
    assert got.line == ("warren: config key rabbitmq_version: expected a RabbitMQ release "
                        "this warren models (3.10, 4.0, 4.2, 4.3), got '3.9'")
    assert_no_ready(tmp_path / "data", got)
