"""Real client libraries against real `warren node start` processes.

Each module of this package is one library (pika's BlockingConnection and
SelectConnection, aio-pika, kombu) running its ordinary patterns, written as that
library's users write them, against one two-node cluster shared by the package's
modules (`nodes`, started when the first of them needs it). Queues are classic
unless a test says otherwise, as a declare without `x-queue-type` is on a node
with the default settings. The libraries' ordinary patterns declare transient
non-exclusive queues, which RabbitMQ 4.3 denies by default, so the cluster permits
`transient_nonexcl_queues`, as an operator running such applications on 4.3 does.
Every name a test declares is unique to it (`name`), so no test sees another's queues.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.broker.broker_support import BrokerProc, permit_transient_queues, running_cluster


@pytest.fixture(scope="package")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[BrokerProc]]:
    base = tmp_path_factory.mktemp("clients")
    with running_cluster(base / "nodes", count=2,
                         extra=permit_transient_queues(base)) as started:
        yield started


@pytest.fixture
def name() -> str:
    """A prefix for the names of this test's queues and exchanges."""
    return "t-" + uuid.uuid4().hex[:10]


def url(node: BrokerProc) -> str:
    """The AMQP URL of `node` as guest on the default vhost."""
    return f"amqp://guest:guest@127.0.0.1:{node.amqp_port}/%2F"
