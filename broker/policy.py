"""Policies: validation, matching and how a policy combines with queue arguments.

RabbitMQ keeps policies in its metadata store and, whenever a queue or a
policy changes, recomputes which policy applies to each queue (`rabbit_policy`):
the matching policy with the highest priority wins, a pattern is an
unanchored regular expression searched in the queue name, and `apply-to`
limits the kinds of object it may match. The queue type then combines the
policy's keys with the queue's own `x-` arguments, key by key, by rules that
differ per key. All of that is pure and lives here (the value checks of each
key in `broker.policy_keys`), so the metadata machine, the registry and the CLI
share it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from broker import policy_keys
from channel.errors import json_term

__all__ = [
    "APPLY_TO",
    "Policy",
    "PolicyError",
    "effective",
    "matching_policy",
    "validate",
]

APPLY_TO = ("all", "queues", "exchanges", "classic_queues", "quorum_queues", "streams")


class PolicyError(ValueError):
    """A policy that `set_policy` refuses; the message is what the CLI prints."""


@dataclass(frozen=True)
class Policy:
    vhost: str
    name: str
    pattern: str
    definition: Mapping[str, Any]
    priority: int = 0
    apply_to: str = "all"
    _regex: Any = field(default=None, compare=False, repr=False)

    def matches(self, kind: str, name: str, queue_type: str = "quorum") -> bool:
        """Does this policy apply to the `kind` ("queue" / "exchange") called `name`?"""
        if not _applies_to(self.apply_to, kind, queue_type):
            return False
        regex = self._regex or re.compile(self.pattern)
        return regex.search(name) is not None


def _applies_to(apply_to: str, kind: str, queue_type: str) -> bool:
    if apply_to == "all":
        return True
    if kind == "exchange":
        return apply_to == "exchanges"
    if apply_to == "queues":
        return True
    return apply_to == {"classic": "classic_queues", "quorum": "quorum_queues",
                        "stream": "streams"}.get(queue_type)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def validate(vhost: str, name: str, pattern: str, definition: Mapping[str, Any],
             priority: Any = 0, apply_to: str = "all",
             queue_arguments: Collection[str] = (),
             master_locator: policy_keys.MasterLocator = "permitted") -> Policy:
    """A checked `Policy`, or `PolicyError` with rabbitmqctl's message.

    As `rabbit_policy` validates a policy: every field is checked and every
    failure listed, the definition's first, then `apply-to`, the pattern and the
    priority; the definition key by key (`broker.policy_keys`), knowing the keys of
    the node release's `queue_arguments` and how it takes `queue-master-locator`.
    """
    errors: list[str] = []
    if not isinstance(definition, Mapping) or not definition:
        errors.append("no policy provided")
    else:
        error = policy_keys.definition_errors(definition, queue_arguments, master_locator)
        if error is not None:
            errors.append(error)
    if apply_to not in APPLY_TO:
        errors.append(f"apply-to '{apply_to}' unrecognised; should be one of: 'queues', "
                      "'classic_queues',  'quorum_queues', 'streams', 'exchanges', or 'all'")
    regex = None
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        errors.append(f"pattern should be regular expression but is invalid: "
                      f"{json_term(exc.msg)}")
    if not _is_int(priority):
        errors.append(f"priority should be a number, actually was {json_term(priority)}")
    if errors:
        raise PolicyError("Validation failed\n\n" + "\n".join(errors))
    return Policy(vhost, name, pattern, dict(definition), priority, apply_to, regex)


def matching_policy(policies: Iterable[Policy], vhost: str, kind: str, name: str,
                    queue_type: str = "quorum") -> Policy | None:
    """The policy that applies: highest priority, ties broken by policy name."""
    found = [p for p in policies if p.vhost == vhost and p.matches(kind, name, queue_type)]
    return min(found, key=lambda p: (-p.priority, p.name), default=None)


def _min(a: Any, b: Any) -> Any:
    present = [v for v in (a, b) if v is not None]
    return min(present) if present else None


def effective(key: str, arguments: Mapping[str, Any], policy: Mapping[str, Any],
              default_delivery_limit: int | None = None) -> Any:
    """The value of `key` (policy spelling, e.g. "max-length") for a quorum queue.

    Arguments vs policy, as `rabbit_quorum_queue` resolves them: limits and
    TTLs take the smaller value, `overflow` and `queue-leader-locator` prefer
    the policy, dead-letter settings prefer the argument, `delivery-limit`
    takes the larger value when either is negative (unlimited) and otherwise
    the smaller, defaulting to `default_delivery_limit` (the node's release's:
    20 from 4.0, none before).
    """
    arg = arguments.get("x-" + key)
    pol = policy.get(key)
    if key in ("max-length", "max-length-bytes", "expires", "message-ttl", "consumer-timeout"):
        return _min(arg, pol)
    if key in ("overflow", "queue-leader-locator"):
        return pol if pol is not None else arg
    if key in ("dead-letter-exchange", "dead-letter-routing-key", "dead-letter-strategy"):
        return arg if arg is not None else pol
    if key == "delivery-limit":
        if arg is None and pol is None:
            return default_delivery_limit
        if arg is None or pol is None:
            return arg if pol is None else pol
        return max(arg, pol) if arg < 0 or pol < 0 else min(arg, pol)
    return arg if arg is not None else pol
