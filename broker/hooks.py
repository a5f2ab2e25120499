"""What the metadata store's leader does when a policy change reaches queues.

RabbitMQ's `rabbit_policy` tells each queue type about queues whose
effective policy changed; `rabbit_quorum_queue:policy_changed` then sends the
queue's Ra cluster an `update_config` with the full machine config. The
metadata machine asks for this with a `mod_call` effect, which Ra runs in the
leader's server process only, where nothing may block: the commands are sent
from a short-lived process of their own.
"""

from __future__ import annotations

import logging
from typing import Any

import actors
from broker.queue_config import machine_config
from broker.running import broker_of
from channel.queue_types.queue_registry import QueueRecord
from fifo.commands import make_update_config
from ra import api

__all__ = ["policy_changed"]

log = logging.getLogger("warren.broker")


def policy_changed(records: list[QueueRecord]) -> None:
    actors.spawn(_update_configs, records)


def _update_configs(records: list[QueueRecord]) -> None:
    now = int(actors.get_node().clock.system_time_ms())
    release = broker_of().release  # the defaults of this node's release fill the gaps
    for record in records:
        if not record.servers:
            continue
        cmd: Any = make_update_config(machine_config(record, now, release))
        result = api.process_command(list(record.servers), cmd, 5000)
        if result[0] != "ok":
            log.warning("policy change not applied to %s: %r", record.name, result)
