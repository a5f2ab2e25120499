"""A policy reaches a 4.3 quorum queue's machine with the keys 4.3 added: the
config the broker sends at declare and on every policy change (`update_config`)
carries `consumer_disconnected_timeout` and `delayed_retry` from the queue's
arguments and its policy; a 4.2 queue's carries neither."""

from __future__ import annotations

from broker.queue_config import machine_config
from channel.queue_types.queue_registry import QueueRecord
from releases import RELEASES

RECORD = QueueRecord("/", "orders", True, {"x-queue-type": "quorum",
                                           "x-consumer-disconnected-timeout": 9000},
                     "%2F_orders", (("%2F_orders", "n1@h:1"),),
                     policy={"consumer-disconnected-timeout": 4000,
                             "delayed-retry-type": "returned", "delayed-retry-min": 250})


def test_a_4_3_queue_gets_the_policys_disconnected_timeout_and_delayed_retry() -> None:
    config = machine_config(RECORD, 0, RELEASES["4.3"])
    assert config["consumer_disconnected_timeout"] == 4000  # the smaller of the two
    assert config["delayed_retry"] == ("returned", 250, 250)


def test_a_4_2_queue_gets_neither() -> None:
    config = machine_config(RECORD, 0, RELEASES["4.2"])
    assert "consumer_disconnected_timeout" not in config and "delayed_retry" not in config
