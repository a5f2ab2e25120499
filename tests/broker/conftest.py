"""Fixtures shared by the broker tests that run real node processes.

`cluster` is three real nodes with the quorum metadata store per test module (a
module that needs other node flags defines its own); `amqp` is one test's
connections and queues on them (closed and deleted after the test); `queue` is
a queue name no other test uses, deleted after the test too.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.broker.amqp_support import Amqp, unique_queue_name
from tests.broker.broker_support import BrokerProc, running_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[BrokerProc]]:
    with running_cluster(tmp_path_factory.mktemp("cluster")) as nodes:
        yield nodes


@pytest.fixture
def amqp(cluster: list[BrokerProc]) -> Iterator[Amqp]:
    view = Amqp(cluster)
    try:
        yield view
    finally:
        view.close()


@pytest.fixture
def queue(amqp: Amqp, request: pytest.FixtureRequest) -> str:
    name = unique_queue_name(request.node.name)
    amqp.queues.append(name)
    return name
