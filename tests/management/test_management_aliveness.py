"""`GET /api/aliveness-test/<vhost>` as each release answers it.

RabbitMQ 3.10 and 4.0.5 declare a transient `aliveness-test` queue in the vhost and
send a message through it; from 4.0.6 and 4.1 the check is a no-op that only opens
a channel on the vhost. On 4.3, which denies transient non-exclusive queues by
default, the old check could not work, so a healthy 4.3 node answers ok and leaves
no queue behind.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker.broker_support import ctl_json, running_cluster
from tests.management.conftest import Managed
from tests.management.test_management_http import call


@pytest.fixture(params=["4.0", "4.3"])
def managed_release(request: pytest.FixtureRequest,
                    tmp_path: Path) -> Iterator[tuple[str, Managed]]:
    extra = ["--management-port", "0", "--prometheus-port", "0",
             "--rabbitmq-version", request.param]
    with running_cluster(tmp_path, count=1, extra=extra) as nodes:
        ready = json.loads((nodes[0].data_dir / "ready").read_text())
        yield request.param, Managed(nodes[0], ready["management_port"],
                                     ready["prometheus_port"])


def test_the_aliveness_test_declares_its_queue_only_where_the_release_does(
        managed_release: tuple[str, Managed]) -> None:
    series, managed = managed_release
    assert call(managed, "GET", "/api/aliveness-test/%2F") == (200, {"status": "ok"})
    names = [row["name"] for row in ctl_json(managed.node.name, "list_queues", "name")]
    assert ("aliveness-test" in names) is (series == "4.0")
