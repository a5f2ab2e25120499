"""set_policy validation: every key RabbitMQ knows, each checked on its own, its texts."""

from __future__ import annotations

from typing import Any

import pytest

from broker import policy, policy_keys
from broker.policy_keys import KNOWN_KEYS
from releases import RELEASES

VALID: dict[str, Any] = {
    "alternate-exchange": "ae",
    "consumer-timeout": 0,
    "dead-letter-exchange": "",
    "dead-letter-routing-key": "k",
    "dead-letter-strategy": "at-least-once",
    "message-ttl": 0,
    "expires": 1,
    "max-length": 0,
    "max-length-bytes": 2**40,
    "max-in-memory-length": 0,
    "max-in-memory-bytes": 0,
    "queue-mode": "lazy",
    "queue-version": 2,
    "overflow": "reject-publish-dlx",
    "delivery-limit": -1,
    "max-age": "7D",
    "queue-leader-locator": "least-leaders",
    "initial-cluster-size": 0,
    "stream-max-segment-size-bytes": 3_000_000_000,
    "stream-filter-size-bytes": 16,
    "target-group-size": 3,
    "queue-master-locator": "client-local",
}


def refusal(definition: Any, apply_to: str = "all", pattern: str = ".*",
            priority: Any = 0) -> str:
    with pytest.raises(policy.PolicyError) as info:
        policy.validate("/", "p", pattern, definition, priority, apply_to)
    return str(info.value)


def test_every_known_key_has_a_valid_example() -> None:
    assert set(VALID) == KNOWN_KEYS


@pytest.mark.parametrize("key", sorted(VALID))
def test_each_key_is_accepted_on_its_own(key: str) -> None:
    p = policy.validate("/", "p", ".*", {key: VALID[key]}, 0, "queues")
    assert dict(p.definition) == {key: VALID[key]}


def test_a_dead_letter_routing_key_alone_is_a_valid_policy() -> None:
    # the queue may name the exchange itself (x-dead-letter-exchange)
    p = policy.validate("/", "rk", "^src$", {"dead-letter-routing-key": "k"}, 0, "queues")
    assert dict(p.definition) == {"dead-letter-routing-key": "k"}


@pytest.mark.parametrize(("key", "value", "text"), [
    ("alternate-exchange", 1, "1 is not a valid alternate exchange name"),
    ("consumer-timeout", -1, "-1 is not a valid consumer timeout"),
    ("dead-letter-exchange", 1, "1 is not a valid dead letter exchange name"),
    ("dead-letter-routing-key", 5, "5 is not a valid dead letter routing key"),
    ("dead-letter-strategy", "x", '<<"x">> is not a valid dead letter strategy'),
    ("message-ttl", "x", '<<"x">> is not a valid message TTL'),
    ("expires", 0, "0 is not a valid queue expiry"),
    ("max-length", "abc", '<<"abc">> is not a valid maximum length'),
    ("max-length", -1, "-1 is not a valid maximum length"),
    ("max-length-bytes", True, "true is not a valid maximum length in bytes"),
    ("max-in-memory-length", -1, "-1 is not a valid maximum memory in bytes"),
    ("max-in-memory-bytes", None, "null is not a valid maximum memory in bytes"),
    ("queue-mode", "fast", '<<"fast">> is not a valid queue-mode value'),
    ("queue-version", 3, "3 is not a valid queue-version value"),
    ("overflow", 3, "3 is not a valid overflow value"),
    ("delivery-limit", 1.5, "1.5 is not a valid delivery limit"),
    ("max-age", "7W", '<<"7W">> is not a valid max age'),
    ("max-age", "0D", '<<"0D">> is not a valid max age'),
    ("queue-leader-locator", "x", '<<"x">> is not a valid queue leader locator value'),
    ("initial-cluster-size", -1, "-1 is not a valid cluster size"),
    ("stream-max-segment-size-bytes", 3_000_000_001,
     "3000000001 is not a valid segment size"),
    ("stream-filter-size-bytes", 15,
     "15 is not a valid filter size. Valid range is 16-255"),
    ("target-group-size", 0, "0 is not a valid qq target count value"),
])
def test_each_bad_value_is_refused_with_rabbitmq_text(key: str, value: Any, text: str) -> None:
    assert refusal({key: value}) == f"Validation failed\n\n{text}"


def test_unknown_keys_are_listed_once_the_known_ones_passed() -> None:
    assert refusal({"foo": 1, "bar": [1, None]}) == (
        'Validation failed\n\n[{<<"bar">>,[1,null]},{<<"foo">>,1}] '
        "are not recognised policy settings")
    # a bad known value is the error, not the unknown key
    assert refusal({"foo": 1, "max-length": "x"}) == (
        'Validation failed\n\n<<"x">> is not a valid maximum length')


def test_the_first_bad_key_in_key_order_is_the_error() -> None:
    assert refusal({"max-length": -1, "expires": "a"}) == (
        'Validation failed\n\n<<"a">> is not a valid queue expiry')


def test_every_bad_field_is_listed_definition_first() -> None:
    assert refusal({}) == "Validation failed\n\nno policy provided"
    assert refusal({"max-length": -1}, apply_to="everything", priority="high") == (
        "Validation failed\n\n-1 is not a valid maximum length\n"
        "apply-to 'everything' unrecognised; should be one of: 'queues', 'classic_queues',  "
        "'quorum_queues', 'streams', 'exchanges', or 'all'\n"
        'priority should be a number, actually was <<"high">>')
    assert refusal({"max-length": 1}, pattern="(").startswith(
        "Validation failed\n\npattern should be regular expression but is invalid: ")


R43 = RELEASES["4.3"].quorum_queue_arguments


def refusal_in(queue_arguments: Any, definition: Any) -> str:
    with pytest.raises(policy.PolicyError) as info:
        policy.validate("/", "p", ".*", definition, 0, "queues", queue_arguments)
    return str(info.value)


def test_4_3_knows_the_disconnected_timeout_and_delayed_retry_keys() -> None:
    definition = {"consumer-disconnected-timeout": 0, "delayed-retry-type": "failed",
                  "delayed-retry-min": 100, "delayed-retry-max": 100}
    p = policy.validate("/", "p", ".*", definition, 0, "queues", R43)
    assert dict(p.definition) == definition
    # a release before 4.3 does not know them
    assert refusal_in(RELEASES["4.2"].quorum_queue_arguments,
                      {"delayed-retry-type": "all"}) == (
        'Validation failed\n\n[{<<"delayed-retry-type">>,<<"all">>}] '
        "are not recognised policy settings")


@pytest.mark.parametrize(("definition", "text"), [
    ({"consumer-disconnected-timeout": -1}, "-1 is not a valid consumer disconnected timeout"),
    ({"delayed-retry-type": "later"}, '<<"later">> is not a valid delayed retry type. Must be '
                                      "one of: all, failed, returned, disabled"),
    ({"delayed-retry-min": 0}, "0 is not a valid delayed retry minimum delay. Must be a "
                               "positive integer"),
    ({"delayed-retry-max": "x"}, '<<"x">> is not a valid delayed retry maximum delay. Must '
                                 "be a positive integer"),
    ({"delayed-retry-type": "all"}, "delayed-retry-min is required when delayed-retry-type "
                                    "is all"),
    ({"delayed-retry-min": 10, "delayed-retry-max": 5},
     "delayed-retry-max (5) must not be smaller than delayed-retry-min (10)"),
])
def test_4_3_refuses_bad_delayed_retry_policies_with_rabbitmq_text(definition: Any,
                                                                  text: str) -> None:
    assert refusal_in(R43, definition) == f"Validation failed\n\n{text}"


def test_a_disabled_delayed_retry_needs_no_minimum() -> None:
    p = policy.validate("/", "p", ".*", {"delayed-retry-type": "disabled"}, 0, "queues", R43)
    assert dict(p.definition) == {"delayed-retry-type": "disabled"}


@pytest.mark.parametrize(("how", "value", "text"), [
    # 3.10: the three locators it has modules for
    ("unversioned", "min-masters", None),
    ("unversioned", "balanced", '<<"balanced">> invalid queue-master-locator value'),
    # 4.x, the deprecated feature permitted: any leader locator
    ("permitted", "balanced", None),
    ("permitted", "min-masters", None),
    ("permitted", "nearest", '<<"nearest">> is not a valid master locator'),
    # denied (4.3's default): whatever the value
    ("denied", "client-local",
     "use of deprecated queue-master-locator argument is not permitted"),
])
def test_queue_master_locator_is_taken_as_the_node_release_takes_it(
        how: policy_keys.MasterLocator, value: str, text: str | None) -> None:
    definition = {"queue-master-locator": value}
    if text is None:
        assert dict(policy.validate("/", "p", ".*", definition, 0, "all", (),
                                    how).definition) == definition
    else:
        with pytest.raises(policy.PolicyError) as info:
            policy.validate("/", "p", ".*", definition, 0, "all", (), how)
        assert str(info.value) == f"Validation failed\n\n{text}"
