"""Where a node serves its management API and metrics, and what a port in use does."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from broker.config import load
from broker.startup import EX_UNAVAILABLE
from tests.broker.broker_support import ROOT, env
from transports.zmq_node import free_port


def test_rabbitmq_s_ports_on_loopback_by_default() -> None:
    cfg = load(None, {"name": "a@127.0.0.1:25671"})
    assert (cfg.management_port, cfg.prometheus_port) == (15672, 15692)
    assert cfg.management_listener_ip == "127.0.0.1"


def test_a_null_port_in_a_config_file_serves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "node.json"
    path.write_text('{"name": "a@127.0.0.1:25671", "management_port": null, '
                    '"prometheus_port": null}')
    cfg = load(path)
    assert (cfg.management_port, cfg.prometheus_port) == (None, None)


def test_a_management_port_in_use_is_one_line_and_69(tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "warren_cli", "node", "start",
             "--name", f"a@127.0.0.1:{free_port()}", "--amqp-port", str(free_port()),
             "--data-dir", str(tmp_path / "data"), "--management-port", str(port),
             "--prometheus-port", "0"],
            cwd=ROOT, env=env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == EX_UNAVAILABLE, done
    assert done.stderr.strip() == (f"warren: cannot listen for HTTP on 127.0.0.1:{port}: "
                                   "Address already in use (eaddrinuse)")
    assert "ready" not in done.stdout
