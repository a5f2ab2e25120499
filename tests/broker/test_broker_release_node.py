"""A node started as RabbitMQ 4.0 behaves as 4.0 end to end: its clients are told
4.0.5, `warren ctl cluster_status` names the release, and the quorum queues it
declares run `rabbit_fifo` machine version 5, the one 4.0.5 ships (4.2 ships 7, 4.3
ships 8).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.broker.broker_support import connect, ctl_json, running_cluster


@pytest.mark.parametrize("series, version, machine", [("4.0", "4.0.5", 5),
                                                      ("4.2", "4.2.9", 7),
                                                      ("4.3", "4.3.5", 8)])
def test_a_node_runs_the_release_it_is_configured_as(tmp_path: Path, series: str,
                                                     version: str, machine: int) -> None:
    with running_cluster(tmp_path, count=1, extra=["--rabbitmq-version", series]) as nodes:
        node = nodes[0]
        conn = connect(node)
        try:
            assert conn._impl.server_properties["version"] == version
            ch = conn.channel()
            ch.queue_declare("orders", durable=True, arguments={"x-queue-type": "quorum"})
            ch.confirm_delivery()
            ch.basic_publish("", "orders", b"one")  # confirmed: applied by the queue
            got = ch.basic_get("orders", auto_ack=True)
            assert got[2] == b"one"
        finally:
            conn.close()
        assert ctl_json(node.name, "cluster_status")["rabbitmq_version"] == version
        rows = ctl_json(node.name, "quorum_status", "orders")
        assert [r["machine_version"] for r in rows] == [machine]
