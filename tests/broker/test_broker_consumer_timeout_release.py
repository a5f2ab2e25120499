"""Who times out a slow quorum-queue consumer, on a real node of each release.

A consumer holds a delivery past the queue's `x-consumer-timeout`. On a 4.2 node
the channel notices on its tick and closes with 406, naming the timeout; on a
4.3 node the queue takes the message back and the client is sent `basic.cancel`,
its channel staying open. Either way the message is delivered again.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pika.exceptions as pex
import pytest

from tests.broker.broker_support import connect, running_cluster

QQ = {"x-queue-type": "quorum", "x-consumer-timeout": 500}


@pytest.mark.parametrize("series", ["4.2", "4.3"])
def test_a_slow_consumer_is_timed_out_by_its_releases_enforcer(tmp_path: Path,
                                                               series: str) -> None:
    config = tmp_path / "node.toml"
    config.write_text("[amqp]\nchannel_tick_interval = 50\n")
    with running_cluster(tmp_path, count=1,
                         extra=["--rabbitmq-version", series, "--config", str(config)]) as nodes:
        conn = connect(nodes[0])
        ch = conn.channel()
        ch.queue_declare("slow", durable=True, arguments=QQ)
        ch.confirm_delivery()
        ch.basic_publish("", "slow", b"m")
        cancelled: list[str] = []
        closed: list[Any] = []
        ch.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.consumer_tag))
        ch._impl.add_on_close_callback(lambda _ch, reason: closed.append(reason))
        got: list[bytes] = []
        ch.basic_consume("slow", lambda _c, _m, _p, body: got.append(body), consumer_tag="c1")
        deadline = time.monotonic() + 10
        while not (cancelled or closed) and time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.1)
        assert got == [b"m"]
        if series == "4.2":
            assert cancelled == [] and len(closed) == 1
            reason = closed[0]
            assert isinstance(reason, pex.ChannelClosedByBroker)
            assert (reason.reply_code, reason.reply_text) == (
                406, "PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. "
                     "Timeout value used: 500 ms. This timeout value can be configured, see "
                     "consumers doc guide to learn more")
        else:
            assert cancelled == ["c1"] and closed == [] and ch.is_open
        again = conn.channel()
        method, _props, body = again.basic_get("slow", auto_ack=True)
        assert body == b"m" and method is not None and method.redelivered
        conn.close()
