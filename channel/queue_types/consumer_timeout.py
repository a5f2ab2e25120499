"""The consumer timeout of RabbitMQ 4.0–4.2: enforced by the channel on its tick.

Every `channel_tick_interval` (60 s) a channel looks at its *oldest* unacked
delivery. The timeout is the queue's (the smaller of the `x-consumer-timeout`
argument and the `consumer-timeout` policy key) or else the node's
`consumer_timeout` (30 minutes; None turns it off). A delivery older than that
closes the channel with 406 PRECONDITION_FAILED: the unacked messages go back
to their queues as for any channel close. (RabbitMQ 4.3 moves this into the
quorum queue, which returns the messages and keeps the channel.)

Pure: the channel gives the oldest delivery, the clock and the timeouts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from channel.errors import AmqpError

__all__ = ["DEFAULT_CONSUMER_TIMEOUT_MS", "DEFAULT_TICK_INTERVAL_MS", "queue_timeout",
           "timed_out"]

DEFAULT_CONSUMER_TIMEOUT_MS = 1_800_000
DEFAULT_TICK_INTERVAL_MS = 60_000


def queue_timeout(arguments: Mapping[str, Any], policy: Mapping[str, Any],
                  node_default: int | None) -> int | None:
    """`args_policy_lookup(<<"consumer-timeout">>, min, Q)`, else the node's value."""
    values = [v for v in (arguments.get("x-consumer-timeout"), policy.get("consumer-timeout"))
              if isinstance(v, int) and not isinstance(v, bool)]
    return min(values) if values else node_default


def timed_out(channel: int, delivered_at_ms: int | None, now_ms: int,
              timeout_ms: int | None) -> AmqpError | None:
    """The channel error when the oldest delivery waited longer than `timeout_ms`."""
    if delivered_at_ms is None or timeout_ms is None or delivered_at_ms >= now_ms - timeout_ms:
        return None
    return AmqpError(
        "PRECONDITION_FAILED",
        f"delivery acknowledgement on channel {channel} timed out. "
        f"Timeout value used: {timeout_ms} ms. "
        "This timeout value can be configured, see consumers doc guide to learn more",
        (0, 0))
