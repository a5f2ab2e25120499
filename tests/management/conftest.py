"""One real warren node with its management and Prometheus listeners on free ports."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.broker.broker_support import BrokerProc, running_cluster


@dataclass
class Managed:
    node: BrokerProc
    management_port: int
    prometheus_port: int

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.management_port}"


@pytest.fixture(scope="module")
def managed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Managed]:
    extra = ["--management-port", "0", "--prometheus-port", "0"]
    with running_cluster(tmp_path_factory.mktemp("mgmt"), count=1, extra=extra) as nodes:
        ready = json.loads((nodes[0].data_dir / "ready").read_text())
        yield Managed(nodes[0], ready["management_port"], ready["prometheus_port"])
