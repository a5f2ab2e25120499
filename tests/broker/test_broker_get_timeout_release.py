"""A message taken with `basic.get` and left unacknowledged, past the node's
`consumer_timeout`, on a real node of each release (the queue names no timeout).

Up to 4.2 the channel's tick sees the oldest unacknowledged delivery, a got message
included, and closes the channel with 406 naming the timeout it used. In 4.3 the
channel no longer looks; the quorum queue holds a got message for the queue's
timeout, else the node's (`rabbit_queue_type:dequeue/5`), takes it back when that
passes, and the channel, which has no consumer to cancel, closes with the same 406
and -1 for the timeout it does not know. Either way the message is delivered again.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pika.exceptions as pex
import pytest

from tests.broker.broker_support import connect, running_cluster

TEXT = ("PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. "
        "Timeout value used: {} ms. This timeout value can be configured, see "
        "consumers doc guide to learn more")


@pytest.mark.parametrize(("series", "used"), [("4.2", 500), ("4.3", -1)])
def test_a_got_message_held_past_the_node_timeout_closes_the_channel(
        tmp_path: Path, series: str, used: int) -> None:
    config = tmp_path / "node.toml"
    config.write_text("[amqp]\nconsumer_timeout = 500\nchannel_tick_interval = 50\n")
    with running_cluster(tmp_path, count=1,
                         extra=["--rabbitmq-version", series, "--config", str(config)]) as nodes:
        conn = connect(nodes[0])
        ch = conn.channel()
        ch.queue_declare("held", durable=True, arguments={"x-queue-type": "quorum"})
        ch.confirm_delivery()
        ch.basic_publish("", "held", b"m")
        closed: list[Any] = []
        ch._impl.add_on_close_callback(lambda _ch, reason: closed.append(reason))
        method, _props, body = ch.basic_get("held")
        assert body == b"m" and method is not None
        deadline = time.monotonic() + 15
        while not closed and time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.1)
        assert len(closed) == 1
        reason = closed[0]
        assert isinstance(reason, pex.ChannelClosedByBroker)
        assert (reason.reply_code, reason.reply_text) == (406, TEXT.format(used))
        again = conn.channel()
        method, _props, body = again.basic_get("held", auto_ack=True)
        assert body == b"m" and method is not None and method.redelivered
        conn.close()
