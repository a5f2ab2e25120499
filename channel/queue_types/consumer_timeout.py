"""The consumer timeout of RabbitMQ 4.0–4.2: enforced by the channel on its tick.

Every `channel_tick_interval` (60 s) a channel looks at its *oldest* unacked
delivery. The timeout is the queue's (the smaller of the `x-consumer-timeout`
argument and the `consumer-timeout` policy key) or else the node's
`consumer_timeout` (30 minutes; None turns it off). A delivery older than that
closes the channel with 406 PRECONDITION_FAILED: the unacked messages go back
to their queues as for any channel close.

RabbitMQ 4.3 moves this into the quorum queue: each consumer is given its
timeout when it subscribes (`consumer_timeout`: its own `x-consumer-timeout`,
else the queue's, else the node's, 24 hours when the node sets none), the queue
returns what a consumer held too long and tells the channel
(`{released, QName, CTag, Ids, timeout}`), and the channel cancels the consumer
(`basic.cancel` to a client with `consumer_cancel_notify`, else it closes with
`released_error`'s 406).

Pure: the channel gives the oldest delivery, the clock and the timeouts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from channel.errors import AmqpError

__all__ = ["DEFAULT_CONSUMER_TIMEOUT_MS", "DEFAULT_TICK_INTERVAL_MS", "UNSET_TIMEOUT_MS",
           "consumer_timeout", "queue_timeout", "released_error", "timed_out"]

DEFAULT_CONSUMER_TIMEOUT_MS = 1_800_000
DEFAULT_TICK_INTERVAL_MS = 60_000
#: 4.3's `rabbit_queue_type:get_consumer_timeout/2` when the node sets none: 24 hours
UNSET_TIMEOUT_MS = 86_400_000


def queue_timeout(arguments: Mapping[str, Any], policy: Mapping[str, Any],
                  node_default: int | None) -> int | None:
    """`args_policy_lookup(<<"consumer-timeout">>, min, Q)`, else the node's value."""
    values = [v for v in (arguments.get("x-consumer-timeout"), policy.get("consumer-timeout"))
              if isinstance(v, int) and not isinstance(v, bool)]
    return min(values) if values else node_default


def consumer_timeout(consumer_args: Mapping[str, Any], arguments: Mapping[str, Any],
                     policy: Mapping[str, Any], node_default: int | None) -> int:
    """A 4.3 consumer's timeout (`rabbit_queue_type:consume/3`): its `x-consumer-timeout`,
    else the queue's, else the node's, else 24 hours."""
    own = consumer_args.get("x-consumer-timeout")
    if isinstance(own, int) and not isinstance(own, bool):
        return own
    timeout = queue_timeout(arguments, policy, node_default)
    return UNSET_TIMEOUT_MS if timeout is None else timeout


def released_error(channel: int) -> AmqpError:
    """4.3's channel error for a consumer the queue timed out, when the client cannot
    be sent `basic.cancel`: the timeout is not known there and is given as -1."""
    return _timed_out_error(channel, -1)


def _timed_out_error(channel: int, timeout_ms: int) -> AmqpError:
    return AmqpError(
        "PRECONDITION_FAILED",
        f"delivery acknowledgement on channel {channel} timed out. "
        f"Timeout value used: {timeout_ms} ms. "
        "This timeout value can be configured, see consumers doc guide to learn more",
        (0, 0))


def timed_out(channel: int, delivered_at_ms: int | None, now_ms: int,
              timeout_ms: int | None) -> AmqpError | None:
    """The channel error when the oldest delivery waited longer than `timeout_ms`."""
    if delivered_at_ms is None or timeout_ms is None or delivered_at_ms >= now_ms - timeout_ms:
        return None
    return _timed_out_error(channel, timeout_ms)
