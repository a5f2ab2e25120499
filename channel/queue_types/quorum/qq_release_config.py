"""The `rabbit_fifo` config keys that only some releases' quorum queues take.

RabbitMQ 4.3's `rabbit_quorum_queue:gather_policy_config/2` adds two keys to
the machine config, each from a queue argument and a policy key:

* ``consumer_disconnected_timeout``: the smaller of `x-consumer-disconnected-timeout`
  and the `consumer-disconnected-timeout` policy key, else the node's (60 s);
* ``delayed_retry``: ``(type, min, max)`` from `x-delayed-retry-type` /
  `delayed-retry-type` (the policy wins), `x-delayed-retry-min` and
  `x-delayed-retry-max` (the smaller of argument and policy each); `max`
  defaults to `min`; no type, `disabled`, an unknown type or no positive `min`
  turn it off (``disabled``).

A release whose `quorum_queue_arguments` do not include those arguments (4.2 and
before) passes neither key, as its `rabbit_quorum_queue` does not. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from releases import Release

__all__ = ["DEFAULT_DISCONNECTED_TIMEOUT_MS", "delayed_retry", "release_machine_config"]

#: `consumer_disconnected_timeout` of the rabbit application when unset
DEFAULT_DISCONNECTED_TIMEOUT_MS = 60_000
_DELAYED_TYPES = ("all", "failed", "returned")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _smaller(key: str, arguments: Mapping[str, Any], policy: Mapping[str, Any]) -> Any:
    """`args_policy_lookup(Key, fun min/2, Q)`: either value alone, else the smaller."""
    arg, pol = arguments.get("x-" + key), policy.get(key)
    if arg is None or pol is None:
        return pol if arg is None else arg
    return min(arg, pol)


def delayed_retry(arguments: Mapping[str, Any], policy: Mapping[str, Any]) -> Any:
    """`get_delayed_retry_config/1`: ``(type, min, max)`` or ``"disabled"``."""
    kind = policy.get("delayed-retry-type", arguments.get("x-delayed-retry-type"))
    if kind not in _DELAYED_TYPES:
        return "disabled"
    low = _int(_smaller("delayed-retry-min", arguments, policy))
    if low is None or low <= 0:
        return "disabled"
    high = _int(_smaller("delayed-retry-max", arguments, policy))
    return (kind, low, high if high is not None and high > 0 else low)


def release_machine_config(arguments: Mapping[str, Any], policy: Mapping[str, Any],
                           release: Release) -> dict[str, Any]:
    """The keys `release`'s `rabbit_quorum_queue` adds to the machine config."""
    config: dict[str, Any] = {}
    known = release.quorum_queue_arguments
    if "x-consumer-disconnected-timeout" in known:
        timeout = _int(_smaller("consumer-disconnected-timeout", arguments, policy))
        config["consumer_disconnected_timeout"] = (
            DEFAULT_DISCONNECTED_TIMEOUT_MS if timeout is None else timeout)
    if "x-delayed-retry-type" in known:
        config["delayed_retry"] = delayed_retry(arguments, policy)
    return config
