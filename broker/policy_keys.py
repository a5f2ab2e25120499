"""The policy keys RabbitMQ knows and the check of each key's value.

RabbitMQ validates a policy definition key by key: every key belongs to the
policy validator that registered it (`rabbit_policies` for nearly all of them,
`rabbit_quorum_queue` for `target-group-size`), each validator checks its own
keys in key order and the first bad value is the error; a key no validator
registered is refused only once every known key passed. Keys never depend on
each other, so a policy holding only `dead-letter-routing-key` is valid (the
queue may take its exchange from its own `x-dead-letter-exchange`).

The keys are those of RabbitMQ 4.0. warren's quorum queues act on `max-length`,
`max-length-bytes`, `overflow`, `delivery-limit`, the `dead-letter-*` keys,
`expires`, `message-ttl`, `consumer-timeout` and `queue-leader-locator`; the
others (classic-queue, stream and exchange settings) are validated and kept,
as RabbitMQ keeps them for queues they do not apply to. RabbitMQ 4.3 adds
`consumer-disconnected-timeout` and the `delayed-retry-*` keys (whose type needs
a minimum, and whose maximum may not be below the minimum).

`queue-master-locator` is checked by a validator of its own that differs by
release: 3.10's (`rabbit_queue_location_validator`) takes the three locators it
has modules for; from 4.0 `rabbit_classic_queue` takes any leader locator while
the deprecated `queue_master_locator` feature is permitted (the default up to
4.2), and refuses the key altogether while it is denied (the default in 4.3).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from typing import Any, Literal

from channel.errors import json_term

__all__ = ["KNOWN_KEYS", "MasterLocator", "definition_errors"]

#: how the node's release treats `queue-master-locator`: "unversioned" (3.10, before
#: the deprecated-feature mechanism), "permitted" or "denied" (4.x, the deprecated
#: `queue_master_locator` feature permitted or not on this node)
MasterLocator = Literal["unversioned", "permitted", "denied"]

MAX_STREAM_MAX_SEGMENT_SIZE = 3_000_000_000
_MAX_AGE = re.compile(r"([0-9]*)(.*)", re.DOTALL)
_MAX_AGE_UNITS = frozenset("YMDhms")

#: value -> is it acceptable
Accepts = Callable[[Any], bool]


def _is_int(v: Any) -> bool:
    """Erlang's `is_integer` on a decoded JSON value (true/false are atoms there)."""
    return isinstance(v, int) and not isinstance(v, bool)


def _int_at_least(low: int, high: int | None = None) -> Accepts:
    return lambda v: _is_int(v) and v >= low and (high is None or v <= high)


def _string(v: Any) -> bool:
    return isinstance(v, str)


def _one_of(*values: Any) -> Accepts:
    return lambda v: any(type(v) is type(ok) and v == ok for ok in values)


def _max_age(v: Any) -> bool:
    """`rabbit_amqqueue:check_max_age`: a positive count and one unit, `7D`, `1h`."""
    if not isinstance(v, str):
        return False
    count, unit = _MAX_AGE.fullmatch(v).groups()  # type: ignore[union-attr]
    return count != "" and int(count) > 0 and unit in _MAX_AGE_UNITS


#: key -> (check of its value, what the error says the value is not)
_POLICIES: dict[str, tuple[Accepts, str]] = {
    "alternate-exchange": (_string, "a valid alternate exchange name"),
    "consumer-timeout": (_int_at_least(0), "a valid consumer timeout"),
    "dead-letter-exchange": (_string, "a valid dead letter exchange name"),
    "dead-letter-routing-key": (_string, "a valid dead letter routing key"),
    "dead-letter-strategy": (_one_of("at-most-once", "at-least-once"),
                             "a valid dead letter strategy"),
    "message-ttl": (_int_at_least(0), "a valid message TTL"),
    "expires": (_int_at_least(1), "a valid queue expiry"),
    "max-length": (_int_at_least(0), "a valid maximum length"),
    "max-length-bytes": (_int_at_least(0), "a valid maximum length in bytes"),
    # both in-memory keys say "bytes", as RabbitMQ's texts do
    "max-in-memory-length": (_int_at_least(0), "a valid maximum memory in bytes"),
    "max-in-memory-bytes": (_int_at_least(0), "a valid maximum memory in bytes"),
    "queue-mode": (_one_of("default", "lazy"), "a valid queue-mode value"),
    "queue-version": (_one_of(1, 2), "a valid queue-version value"),
    "overflow": (_one_of("drop-head", "reject-publish", "reject-publish-dlx"),
                 "a valid overflow value"),
    "delivery-limit": (_is_int, "a valid delivery limit"),
    "max-age": (_max_age, "a valid max age"),
    "queue-leader-locator": (_one_of("client-local", "balanced", "random", "least-leaders"),
                             "a valid queue leader locator value"),
    "initial-cluster-size": (_int_at_least(0), "a valid cluster size"),
    "stream-max-segment-size-bytes": (_int_at_least(0, MAX_STREAM_MAX_SEGMENT_SIZE),
                                      "a valid segment size"),
    "stream-filter-size-bytes": (_int_at_least(16, 255),
                                 "a valid filter size. Valid range is 16-255"),
}
#: `rabbit_quorum_queue`'s own validator
_QUORUM: dict[str, tuple[Accepts, str]] = {
    "target-group-size": (_int_at_least(1), "a valid qq target count value"),
}
_POSITIVE = "Must be a positive integer"
#: keys only a release whose quorum queues take the queue argument ``x-<key>`` knows
#: (4.3): `rabbit_policies` validates the first, `rabbit_quorum_queue` the others
_RELEASE_POLICIES: dict[str, tuple[Accepts, str]] = {
    "consumer-disconnected-timeout": (_int_at_least(0),
                                      "a valid consumer disconnected timeout"),
}
_RELEASE_QUORUM: dict[str, tuple[Accepts, str]] = {
    "delayed-retry-type": (_one_of("all", "failed", "returned", "disabled"),
                           "a valid delayed retry type. Must be one of: all, failed, "
                           "returned, disabled"),
    "delayed-retry-min": (_int_at_least(1), f"a valid delayed retry minimum delay. {_POSITIVE}"),
    "delayed-retry-max": (_int_at_least(1), f"a valid delayed retry maximum delay. {_POSITIVE}"),
}
_VALIDATORS = (_POLICIES, _QUORUM)

KNOWN_KEYS = frozenset(k for keys in _VALIDATORS for k in keys) | {"queue-master-locator"}
"""Every key a policy definition may hold in every release."""

#: 3.10's `queue_master_locator` modules
_LOCATORS_3_10 = ("min-masters", "client-local", "random")
#: `rabbit_queue_location:queue_leader_locators()` (4.x)
_LEADER_LOCATORS = ("client-local", "balanced", "random", "least-leaders", "min-masters")


def _master_locator_error(definition: Mapping[str, Any], how: MasterLocator) -> str | None:
    """The `queue-master-locator` validator of the node's release, on its one key."""
    if "queue-master-locator" not in definition:
        return None
    value = definition["queue-master-locator"]
    if how == "unversioned":
        return None if _one_of(*_LOCATORS_3_10)(value) else \
            f"{json_term(value)} invalid queue-master-locator value"
    if how == "denied":
        return "use of deprecated queue-master-locator argument is not permitted"
    return None if _one_of(*_LEADER_LOCATORS)(value) else \
        f"{json_term(value)} is not a valid master locator"


def _release_keys(keys: dict[str, tuple[Accepts, str]],
                  queue_arguments: Collection[str]) -> dict[str, tuple[Accepts, str]]:
    return {k: v for k, v in keys.items() if "x-" + k in queue_arguments}


def _delayed_retry_constraints(definition: Mapping[str, Any]) -> str | None:
    """`rabbit_quorum_queue:validate_delayed_retry_constraints/1`, once its keys passed."""
    kind = definition.get("delayed-retry-type")
    low, high = definition.get("delayed-retry-min"), definition.get("delayed-retry-max")
    if kind is not None and kind != "disabled" and low is None:
        return f"delayed-retry-min is required when delayed-retry-type is {kind}"
    if isinstance(low, int) and isinstance(high, int) and _is_int(low) and _is_int(high) \
            and high < low:
        return f"delayed-retry-max ({high}) must not be smaller than delayed-retry-min ({low})"
    return None


def definition_errors(definition: Mapping[str, Any],
                      queue_arguments: Collection[str] = (),
                      master_locator: MasterLocator = "permitted") -> str | None:
    """Why RabbitMQ refuses this (non-empty) definition, or None when it accepts it.

    `queue_arguments` are the quorum-queue arguments of the node's release: the policy
    keys of the arguments 4.3 added (`consumer-disconnected-timeout`, `delayed-retry-*`)
    are known only where they are listed. `master_locator` says how the node takes
    `queue-master-locator`, whose validator runs after the others.
    """
    policies = {**_POLICIES, **_release_keys(_RELEASE_POLICIES, queue_arguments)}
    quorum = {**_QUORUM, **_release_keys(_RELEASE_QUORUM, queue_arguments)}
    for keys in (policies, quorum):
        for key in sorted(k for k in definition if k in keys):
            accepts, what = keys[key]
            if not accepts(definition[key]):
                return f"{json_term(definition[key])} is not {what}"
    if "delayed-retry-type" in quorum:
        error = _delayed_retry_constraints(definition)
        if error is not None:
            return error
    error = _master_locator_error(definition, master_locator)
    if error is not None:
        return error
    known = KNOWN_KEYS | policies.keys() | quorum.keys()
    unknown = sorted((k, v) for k, v in definition.items() if k not in known)
    if unknown:
        terms = ",".join("{" + json_term(k) + "," + json_term(v) + "}" for k, v in unknown)
        return f"[{terms}] are not recognised policy settings"
    return None
