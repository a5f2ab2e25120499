"""Which queue type a declare gets (`rabbit_amqqueue:augment_declare_args`).

A declare that names no `x-queue-type` gets the vhost's `default_queue_type`
(its metadata, set by `add_vhost --default-queue-type`), else the node's
`default_queue_type` setting, `classic` unless configured otherwise. The
default is only applied where that type can hold such a queue: a quorum queue
is durable, never exclusive and never auto-delete, so those declares stay
classic whatever the defaults say, and exclusive queues are always classic.
The type filled in is also what a redeclare is compared with, so a queue
re-declared without `x-queue-type` is equivalent only if it has the default
type.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["NODE_DEFAULT_QUEUE_TYPE", "QUEUE_TYPES", "declared_type", "default_queue_type"]

QUEUE_TYPES = ("classic", "quorum")
"""The types a default may name (streams are not modelled)."""

NODE_DEFAULT_QUEUE_TYPE = "classic"
"""RabbitMQ's `default_queue_type` when the node's configuration sets none."""


def default_queue_type(vhost_setting: str | None, node_setting: str | None) -> str:
    """The vhost's default, else the node's, else classic."""
    return vhost_setting or node_setting or NODE_DEFAULT_QUEUE_TYPE


def declared_type(arguments: Mapping[str, Any], *, durable: bool, exclusive: bool,
                  auto_delete: bool, default: str) -> str:
    """`x-queue-type` as given, else `default` when it can hold this queue, else classic."""
    given = arguments.get("x-queue-type")
    if given is not None:
        return str(given)
    if default == "quorum" and not (durable and not exclusive and not auto_delete):
        return "classic"
    return default
