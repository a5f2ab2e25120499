"""Resource alarms are cluster-wide, on three real nodes:
a memory alarm raised on node 1 blocks a publisher connected to node 2 until
the alarm clears, or until node 1 is seen down."""

from __future__ import annotations

import signal
import threading
from typing import Any

import pika

from tests.broker.broker_support import (
    BrokerProc,
    ctl,
    ctl_json,
    eventually,
    stop_all,
)

QQ = {"x-queue-type": "quorum"}


class Publisher:
    """A pika publisher with confirms; `BlockingChannel.basic_publish` waits for the
    confirm, so the publish runs in a thread while the test watches the broker."""

    def __init__(self, b: BrokerProc, queue: str) -> None:
        self.queue = queue
        self.conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", b.amqp_port))
        self.events: list[str] = []
        self.conn.add_on_connection_blocked_callback(
            lambda _c, m: self.events.append(m.method.reason))
        self.conn.add_on_connection_unblocked_callback(
            lambda _c, _m: self.events.append("unblocked"))
        self.ch = self.conn.channel()
        self.ch.confirm_delivery()
        self.ch.queue_declare(queue, durable=True, arguments=QQ)
        self.outcome: list[Any] = []
        self.thread: threading.Thread | None = None

    def publish_in_background(self, body: bytes) -> None:
        self.thread = threading.Thread(target=self._publish, args=(body,), daemon=True)
        self.thread.start()

    def _publish(self, body: bytes) -> None:
        try:
            self.ch.basic_publish("", self.queue, body)
            self.outcome.append("confirmed")
        except Exception as exc:  # the test reports it
            self.outcome.append(exc)

    def waiting(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def wait_outcome(self, timeout: float = 60.0) -> list[Any]:
        assert self.thread is not None
        self.thread.join(timeout)
        return self.outcome

    def notifications(self) -> list[str]:
        """connection.blocked / unblocked as pika reports them (once the publish is over)."""
        assert not self.waiting()
        self.conn.process_data_events(0)
        return self.events

    def close(self) -> None:
        if not self.waiting() and self.conn.is_open:
            self.conn.close()


def memory_alarm_of(node: str) -> list[dict[str, str]]:
    return [{"type": "resource_limit", "resource": "memory", "node": node}]


def connection_states(node: str) -> list[str]:
    return sorted(r["state"] for r in ctl_json(node, "list_connections"))


def blocked_with_alarm_of(alarmed: str, publisher: Publisher, on: str) -> None:
    """Raise the memory alarm on `alarmed`; publish through `on`; see it held back."""
    assert ctl(alarmed, "set_vm_memory_high_watermark", "0").returncode == 0
    assert eventually(lambda: ctl_json(on, "alarms") == memory_alarm_of(alarmed))
    publisher.publish_in_background(b"held back")
    assert eventually(lambda: connection_states(on) == ["blocked"])
    assert publisher.waiting(), publisher.outcome


def test_an_alarm_on_one_node_holds_back_publishers_on_another(
        cluster: list[BrokerProc]) -> None:
    n1, n2, n3 = (b.name for b in cluster)
    publisher = Publisher(cluster[1], "held-by-n1")
    try:
        blocked_with_alarm_of(n1, publisher, on=n2)
        # every node reports the alarm as node 1's
        assert ctl_json(n3, "cluster_status")["alarms"] == memory_alarm_of(n1)
        assert ctl(n1, "set_vm_memory_high_watermark", "0.6").returncode == 0
        assert publisher.wait_outcome() == ["confirmed"]
        assert publisher.notifications() == ["low on memory", "unblocked"]
        assert eventually(lambda: all(ctl_json(n, "alarms") == [] for n in (n1, n2, n3)))
    finally:
        ctl(n1, "set_vm_memory_high_watermark", "0.6")
        publisher.wait_outcome(30)
        publisher.close()


def test_killing_the_alarmed_node_releases_publishers_on_the_others(
        cluster: list[BrokerProc]) -> None:
    """Runs last in this module: node 1 stays dead."""
    n1, n2 = cluster[0], cluster[1]
    publisher = Publisher(n2, "held-until-n1-dies")
    try:
        blocked_with_alarm_of(n1.name, publisher, on=n2.name)
        assert n1.proc is not None
        n1.proc.send_signal(signal.SIGKILL)
        n1.proc.wait(10)
        assert publisher.wait_outcome() == ["confirmed"]
        assert publisher.notifications() == ["low on memory", "unblocked"]
        assert ctl_json(n2.name, "alarms") == []
    finally:
        stop_all([n1])
        publisher.wait_outcome(30)
        publisher.close()
