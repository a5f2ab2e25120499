"""The `rabbit_fifo` config map of a quorum queue, from its arguments and policy.

`rabbit_quorum_queue` builds the machine's full config map at declare and
again on every policy change (`update_config` replaces every field, so the
map must always be complete). The broker needs it in both
places — the registry when it starts a queue's Ra cluster, the policy hook
when a policy changes — so it is one pure function here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from broker.policy import effective
from channel.queue_types.queue_registry import QueueRecord
from channel.queue_types.quorum.qq_dead_letter import handler
from channel.queue_types.quorum.qq_release_config import release_machine_config
from releases import Release

__all__ = ["dead_letter_handler", "machine_config", "queue_resource", "ra_name"]

log = logging.getLogger("warren.broker")


def queue_resource(vhost: str, name: str) -> tuple[str, str, str, str]:
    """`#resource{virtual_host, kind = queue, name}` in warren's spelling."""
    return ("resource", vhost, "queue", name)


def ra_name(vhost: str, name: str) -> str:
    """`rabbit_quorum_queue:qname_to_internal_name`: vhost (url-quoted) `_` name."""
    from urllib.parse import quote

    return f"{quote(vhost, safe='')}_{name}"


def dead_letter_handler(arguments: Mapping[str, Any], policy: Mapping[str, Any],
                        resource: Any = None) -> Any:
    """`undefined` (None), `at_least_once` or `(at_most_once, (M, F, A))`, as upstream's.

    The at-most-once arguments are `[exchange, routing_key, resource]`, the
    source queue being the one whose deaths are recorded.
    """
    overflow = effective("overflow", arguments, policy) or "drop-head"
    return handler(effective("dead-letter-exchange", arguments, policy),
                   effective("dead-letter-routing-key", arguments, policy),
                   effective("dead-letter-strategy", arguments, policy), overflow, resource)


def machine_config(record: QueueRecord, created_ms: int, release: Release) -> dict[str, Any]:
    """The full `rabbit_fifo` init / `update_config` map for `record`, with the
    defaults of `release` (the node's) where neither argument nor policy says."""
    args, policy = record.arguments, record.policy
    overflow = effective("overflow", args, policy) or "drop-head"
    if overflow == "reject-publish-dlx":
        log.warning("overflow reject-publish-dlx is not supported by quorum queues; "
                    "using drop-head for %s", record.name)
        overflow = "drop-head"
    return {
        "name": record.ra_name,
        "queue_resource": queue_resource(record.vhost, record.name),
        "dead_letter_handler": dead_letter_handler(
            args, policy, queue_resource(record.vhost, record.name)),
        "overflow_strategy": overflow.replace("-", "_"),
        "max_length": effective("max-length", args, policy),
        "max_bytes": effective("max-length-bytes", args, policy),
        "single_active_consumer_on": bool(args.get("x-single-active-consumer", False)),
        "delivery_limit": effective("delivery-limit", args, policy,
                                    release.default_delivery_limit),
        "expires": effective("expires", args, policy),
        "msg_ttl": effective("message-ttl", args, policy),
        "created": created_ms,
        **release_machine_config(args, policy, release),
    }
