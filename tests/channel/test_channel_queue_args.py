"""queue.declare argument checks for quorum queues: every argument, RabbitMQ's exact texts."""

from __future__ import annotations

from typing import Any

import pytest

from channel.errors import AmqpError
from channel.queue_types.consumer_args import check_consume_arguments
from channel.queue_types.queue_args import (
    Declared,
    check_declare_properties,
    check_equivalence,
    check_queue_name,
    int_arg_error,
    validate_quorum_args,
)
from releases import RELEASES

PREFIX = "PRECONDITION_FAILED - invalid arg '{}' for queue 'q' in vhost '/': "


def refused(args: dict[str, Any]) -> str:
    with pytest.raises(AmqpError) as info:
        validate_quorum_args("q", "/", args)
    assert info.value.code == 406
    return info.value.reply_text


@pytest.mark.parametrize(
    ("key", "value", "term"),
    [
        ("x-max-length", -5, "{value_negative,-5}"),
        ("x-max-length", "10", "\"expected integer, got longstr\""),
        ("x-max-length-bytes", -1, "{value_negative,-1}"),
        ("x-max-in-memory-length", -2, "{value_negative,-2}"),
        ("x-max-in-memory-bytes", True, "\"expected integer, got bool\""),
        ("x-overflow", "nope", "invalid_overflow"),
        ("x-overflow", 1, "{unacceptable_type,signedint}"),
        ("x-dead-letter-exchange", 5, "{unacceptable_type,signedint}"),
        ("x-dead-letter-exchange", b"dlx", "{unacceptable_type,binary}"),
        ("x-dead-letter-strategy", "twice", "invalid_dlx_strategy"),
        ("x-message-ttl", -1, "{value_negative,-1}"),
        ("x-message-ttl", 315_360_000_001, "{value_too_large,315360000001}"),
        ("x-message-ttl", 1.5, "\"expected integer, got double\""),
        ("x-expires", 0, "{value_zero,0}"),
        ("x-expires", -3, "{value_negative,-3}"),
        ("x-expires", 315_360_000_001, "{value_too_large,315360000001}"),
        ("x-single-active-consumer", "true", "{unacceptable_type,longstr}"),
        ("x-quorum-initial-group-size", 0, "{value_zero,0}"),
        ("x-quorum-initial-group-size", -1, "{value_negative,-1}"),
        ("x-queue-leader-locator", "closest", "invalid_queue_locator_arg"),
        ("x-consumer-timeout", -1, "{value_negative,-1}"),
        ("x-consumer-disconnected-timeout", "x", "\"expected integer, got longstr\""),
        ("x-queue-type", "lazy", "\"unsupported queue type 'lazy'\""),
        ("x-max-length", 2**40 * -1, "{value_negative,-1099511627776}"),
    ],
)
def test_bad_values_are_refused_with_the_erlang_term(key: str, value: Any, term: str) -> None:
    assert refused({key: value}) == PREFIX.format(key) + term


@pytest.mark.parametrize("key", [
    "x-expires", "x-message-ttl", "x-max-length", "x-max-length-bytes",
    "x-max-in-memory-length", "x-max-in-memory-bytes", "x-consumer-timeout",
    "x-consumer-disconnected-timeout", "x-quorum-initial-group-size",
])
def test_an_integer_argument_sent_as_a_string_names_the_type_it_got(key: str) -> None:
    assert refused({key: "500"}) == PREFIX.format(key) + '"expected integer, got longstr"'


def test_queue_and_consumer_arguments_share_the_integer_check() -> None:
    with pytest.raises(AmqpError) as info:
        check_consume_arguments("q", "/", "quorum", {"x-consumer-timeout": "500"})
    assert info.value.reply_text == (
        PREFIX.format("x-consumer-timeout") + '"expected integer, got longstr"')
    assert int_arg_error("500") == "expected integer, got longstr"
    assert int_arg_error(2**40) is None


def test_routing_key_needs_a_dead_letter_exchange() -> None:
    assert refused({"x-dead-letter-routing-key": "rk"}) == (
        PREFIX.format("x-dead-letter-routing-key") + "routing_key_but_no_dlx_defined")
    validate_quorum_args("q", "/", {"x-dead-letter-exchange": "dlx",
                                    "x-dead-letter-routing-key": "rk"})


@pytest.mark.parametrize(
    "args",
    [
        {"x-queue-type": "quorum"},
        {"x-max-length": 0, "x-max-length-bytes": 2**40, "x-overflow": "reject-publish"},
        {"x-overflow": "drop-head"},
        {"x-overflow": "reject-publish-dlx"},  # accepted, treated as drop-head
        {"x-delivery-limit": -1},               # not validated
        {"x-delivery-limit": "anything"},
        {"x-dead-letter-strategy": "at-least-once", "x-dead-letter-exchange": ""},
        {"x-message-ttl": 0, "x-expires": 1},
        {"x-single-active-consumer": False},
        {"x-quorum-initial-group-size": 5},
        {"x-queue-leader-locator": "balanced"},
        {"x-queue-leader-locator": "min-masters"},
        {"x-consumer-timeout": 0},
        {"x-unknown-to-everyone": 1},
    ],
)
def test_acceptable_arguments_pass(args: dict[str, Any]) -> None:
    validate_quorum_args("q", "/", args)


@pytest.mark.parametrize("key", ["x-max-priority", "x-queue-mode", "x-max-age",
                                 "x-queue-version", "x-stream-max-segment-size-bytes"])
def test_arguments_of_other_queue_types_are_refused(key: str) -> None:
    assert refused({key: 1}) == (
        f"PRECONDITION_FAILED - invalid arg '{key}' for queue 'q' in vhost '/' "
        "of queue type rabbit_quorum_queue")


def test_value_checks_run_before_the_other_type_check_and_in_fixed_order() -> None:
    # x-queue-mode comes first in the table but x-max-length's value check wins
    assert refused({"x-queue-mode": "lazy", "x-max-length": -5}) == (
        PREFIX.format("x-max-length") + "{value_negative,-5}")
    # x-expires is checked before x-max-length whatever the client's order
    assert refused({"x-max-length": -1, "x-expires": 0}) == (
        PREFIX.format("x-expires") + "{value_zero,0}")
    # x-queue-type before everything
    assert refused({"x-expires": 0, "x-queue-type": "nope"}).startswith(
        PREFIX.format("x-queue-type"))


def test_error_text_is_cut_to_255_characters() -> None:
    text = refused({"x-queue-type": "t" * 300})
    assert len(text) == 255


@pytest.mark.parametrize(
    ("flags", "prop"),
    [
        ({"durable": True, "exclusive": False, "auto_delete": True}, "auto-delete"),
        ({"durable": True, "exclusive": True, "auto_delete": True}, "auto-delete"),
        ({"durable": True, "exclusive": True, "auto_delete": False}, "exclusive-owner"),
        ({"durable": False, "exclusive": True, "auto_delete": False}, "exclusive-owner"),
        ({"durable": False, "exclusive": False, "auto_delete": False}, "non-durable"),
    ],
)
def test_quorum_queues_refuse_auto_delete_exclusive_and_non_durable(
        flags: dict[str, bool], prop: str) -> None:
    with pytest.raises(AmqpError) as info:
        check_declare_properties("q", "/", **flags)
    assert info.value.reply_text == (
        f"PRECONDITION_FAILED - invalid property '{prop}' for queue 'q' in vhost '/'")


def test_durable_non_exclusive_quorum_queue_passes() -> None:
    check_declare_properties("q", "/", durable=True, exclusive=False, auto_delete=False)


def test_server_named_and_reserved_names() -> None:
    with pytest.raises(AmqpError) as info:
        check_queue_name("")
    assert info.value.reply_text == ("PRECONDITION_FAILED - Cannot declare a server-named "
                                     "queue for type rabbit_quorum_queue")
    with pytest.raises(AmqpError) as info:
        check_queue_name("amq.x")
    assert info.value.code == 403
    assert info.value.reply_text == (
        "ACCESS_REFUSED - queue name 'amq.x' contains reserved prefix 'amq.*'")
    check_queue_name("orders")


QQ = {"x-queue-type": "quorum"}


@pytest.mark.parametrize(
    ("current", "new", "text"),
    [
        (Declared(True, False, QQ), Declared(False, False, QQ),
         "inequivalent arg 'durable' for queue 'q' in vhost '/': "
         "received 'false' but current is 'true'"),
        (Declared(True, False, QQ), Declared(True, False, {"x-queue-type": "classic"}),
         "inequivalent arg 'x-queue-type' for queue 'q' in vhost '/': "
         "received 'classic' but current is 'quorum'"),
        (Declared(True, False, {**QQ, "x-max-length": 10}), Declared(True, False, QQ),
         "inequivalent arg 'x-max-length' for queue 'q' in vhost '/': "
         "received none but current is the value '10' of type 'signedint'"),
        (Declared(True, False, QQ), Declared(True, False, {**QQ, "x-delivery-limit": 5}),
         "inequivalent arg 'x-delivery-limit' for queue 'q' in vhost '/': "
         "received the value '5' of type 'signedint' but current is none"),
        (Declared(True, False, {**QQ, "x-max-length": 10}),
         Declared(True, False, {**QQ, "x-max-length": 20}),
         "inequivalent arg 'x-max-length' for queue 'q' in vhost '/': "
         "received '20' but current is '10'"),
    ],
)
def test_redeclare_equivalence_errors(current: Declared, new: Declared, text: str) -> None:
    with pytest.raises(AmqpError) as info:
        check_equivalence("q", "/", current, new, RELEASES["4.2"].quorum_queue_arguments)
    assert info.value.reply_text == "PRECONDITION_FAILED - " + text


def test_integers_compare_by_value_whatever_their_width() -> None:
    keys = RELEASES["4.2"].quorum_queue_arguments
    check_equivalence("q", "/", Declared(True, False, {**QQ, "x-max-length": 2**40}),
                      Declared(True, False, {**QQ, "x-max-length": 2**40}), keys)
    check_equivalence("q", "/", Declared(True, False, QQ),
                      Declared(True, False, {**QQ, "x-custom": 1}), keys)  # not a QQ argument
