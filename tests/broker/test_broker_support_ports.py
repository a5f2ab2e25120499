"""The test clusters' own start: a node whose port was taken between the draw and its
bind fails with `Address already in use`; the cluster is started again on fresh ports
instead of failing every test of the module."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.broker import broker_support
from tests.broker.broker_support import BrokerProc, connect, running_cluster


def test_a_taken_amqp_port_restarts_the_cluster_on_fresh_ports(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_plan = broker_support.plan
    plans: list[list[BrokerProc]] = []
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()

        def plan(count: int, base: Path) -> list[BrokerProc]:
            nodes = real_plan(count, base)
            if not plans:  # the first plan's node gets a port someone else holds
                nodes[0].amqp_port = taken.getsockname()[1]
            plans.append(nodes)
            return nodes

        monkeypatch.setattr(broker_support, "plan", plan)
        with running_cluster(tmp_path, count=1) as nodes:
            assert len(plans) == 2 and nodes is plans[1]
            assert plans[0][0].proc is not None and plans[0][0].proc.poll() is not None
            conn = connect(nodes[0])
            assert conn.is_open
            conn.close()


def test_any_other_start_failure_is_raised_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plans: list[list[BrokerProc]] = []
    real_plan = broker_support.plan

    def plan(count: int, base: Path) -> list[BrokerProc]:
        plans.append(real_plan(count, base))
        return plans[-1]

    monkeypatch.setattr(broker_support, "plan", plan)
    with pytest.raises(RuntimeError, match="not ready"), \
            running_cluster(tmp_path, count=1, backend="no-such-backend"):
        pass
    assert len(plans) == 1
