"""queue.declare of a quorum queue on a three-node cluster: what is refused, with
RabbitMQ's exact reply codes and texts.

A refused declare closes the channel (406 / 403) and creates nothing: a passive
declare of the same name afterwards is a 404 on every node's view of the queue
table.
"""

from __future__ import annotations

from typing import Any

import pika.exceptions as pex
import pytest

from releases import DEFAULT_SERIES, RELEASES
from tests.broker.amqp_support import QQ, Amqp, closed_by_broker

PF = "PRECONDITION_FAILED - "


def refused(amqp: Amqp, queue: str, *, node: int = 0, durable: bool = True,
            exclusive: bool = False, auto_delete: bool = False,
            arguments: dict[str, Any] | None = None) -> tuple[int, str]:
    ch = amqp.blocking(node).channel()
    return closed_by_broker(lambda: ch.queue_declare(
        queue, durable=durable, exclusive=exclusive, auto_delete=auto_delete,
        arguments={**QQ, **(arguments or {})}))


def assert_absent(amqp: Amqp, queue: str, node: int) -> None:
    ch = amqp.blocking(node).channel()
    assert closed_by_broker(lambda: ch.queue_declare(queue, passive=True)) == (
        404, f"NOT_FOUND - no queue '{queue}' in vhost '/'")


@pytest.mark.parametrize(("arguments", "term"), [
    ({"x-overflow": "drop-tail"}, "invalid_overflow"),
    ({"x-quorum-initial-group-size": "three"}, '"expected integer, got longstr"'),
    ({"x-quorum-initial-group-size": 0}, "{value_zero,0}"),
    ({"x-quorum-initial-group-size": -2}, "{value_negative,-2}"),
    ({"x-max-length": -5}, "{value_negative,-5}"),
    ({"x-message-ttl": 315_360_000_001}, "{value_too_large,315360000001}"),
    ({"x-single-active-consumer": "yes"}, "{unacceptable_type,longstr}"),
    ({"x-dead-letter-routing-key": "k"}, "routing_key_but_no_dlx_defined"),
    ({"x-queue-leader-locator": "nearest"}, "invalid_queue_locator_arg"),
])
def test_a_bad_argument_value_is_refused_with_its_erlang_term_and_creates_nothing(
        amqp: Amqp, queue: str, arguments: dict[str, Any], term: str) -> None:
    [key] = arguments
    assert refused(amqp, queue, arguments=arguments) == (
        406, f"{PF}invalid arg '{key}' for queue '{queue}' in vhost '/': {term}")
    assert_absent(amqp, queue, node=1)


@pytest.mark.parametrize("key", ["x-max-priority", "x-queue-mode", "x-max-age"])
def test_an_argument_of_another_queue_type_is_refused(amqp: Amqp, queue: str,
                                                      key: str) -> None:
    assert refused(amqp, queue, arguments={key: 10 if key == "x-max-priority" else "lazy"}) == (
        406, f"{PF}invalid arg '{key}' for queue '{queue}' in vhost '/' "
        "of queue type rabbit_quorum_queue")
    assert_absent(amqp, queue, node=2)


def test_value_checks_come_before_the_other_queue_type_check(amqp: Amqp, queue: str) -> None:
    assert refused(amqp, queue, arguments={"x-queue-mode": "lazy", "x-max-length": -5}) == (
        406, f"{PF}invalid arg 'x-max-length' for queue '{queue}' in vhost '/': "
        "{value_negative,-5}")


@pytest.mark.parametrize(("flags", "prop"), [
    ({"exclusive": True}, "exclusive-owner"),
    ({"auto_delete": True}, "auto-delete"),
    ({"durable": False, "exclusive": True, "auto_delete": True}, "auto-delete"),
])
def test_properties_a_quorum_queue_cannot_have_are_refused_in_rabbitmq_order(
        amqp: Amqp, queue: str, flags: dict[str, bool], prop: str) -> None:
    assert refused(amqp, queue, **flags) == (
        406, f"{PF}invalid property '{prop}' for queue '{queue}' in vhost '/'")
    assert_absent(amqp, queue, node=0)


def test_a_non_durable_quorum_declare_is_refused_as_the_nodes_release_refuses_it(
        amqp: Amqp, queue: str) -> None:
    """Up to 4.2 the quorum queue type refuses the property; where the release denies
    `transient_nonexcl_queues` (4.3) the declare is refused before the queue type has a
    say, and the connection closes with 541."""
    if RELEASES[DEFAULT_SERIES].permits("transient_nonexcl_queues"):
        assert refused(amqp, queue, durable=False) == (
            406, f"{PF}invalid property 'non-durable' for queue '{queue}' in vhost '/'")
    else:
        ch = amqp.blocking(0).channel()
        with pytest.raises(pex.ConnectionClosedByBroker) as info:
            ch.queue_declare(queue, durable=False, arguments=QQ)
        assert info.value.reply_code == 541
        assert info.value.reply_text.startswith(
            "INTERNAL_ERROR - Feature `transient_nonexcl_queues` is deprecated.")
    assert_absent(amqp, queue, node=0)


@pytest.mark.parametrize("kind", ["lazy", "stream"])
def test_a_queue_type_warren_does_not_run_is_refused(amqp: Amqp, queue: str,
                                                     kind: str) -> None:
    # a stream must not quietly become a quorum queue
    assert refused(amqp, queue, arguments={"x-queue-type": kind}) == (
        406, f"{PF}invalid arg 'x-queue-type' for queue '{queue}' in vhost '/': "
        f"\"unsupported queue type '{kind}'\"")
    assert_absent(amqp, queue, node=1)


def test_names_a_quorum_queue_cannot_have(amqp: Amqp) -> None:
    assert refused(amqp, "") == (
        406, f"{PF}Cannot declare a server-named queue for type rabbit_quorum_queue")
    assert refused(amqp, "amq.mine") == (
        403, "ACCESS_REFUSED - queue name 'amq.mine' contains reserved prefix 'amq.*'")


def test_redeclaring_with_another_queue_type_or_other_arguments_is_inequivalent(
        amqp: Amqp, queue: str) -> None:
    amqp.declare(queue, node=0, **{"x-max-length": 10})
    where = f"for queue '{queue}' in vhost '/'"
    # from another node: the queue table is the cluster's
    assert refused(amqp, queue, node=2, arguments={"x-queue-type": "classic",
                                                   "x-max-length": 10}) == (
        406, f"{PF}inequivalent arg 'x-queue-type' {where}: "
        "received 'classic' but current is 'quorum'")
    assert refused(amqp, queue, node=1, durable=False, arguments={"x-max-length": 10}) == (
        406, f"{PF}inequivalent arg 'durable' {where}: received 'false' but current is 'true'")
    assert refused(amqp, queue, node=1, auto_delete=True,
                   arguments={"x-max-length": 10}) == (
        406, f"{PF}inequivalent arg 'auto_delete' {where}: "
        "received 'true' but current is 'false'")
    locked = (f"RESOURCE_LOCKED - cannot obtain exclusive access to locked queue '{queue}' in "
              "vhost '/'. It could be originally declared on another connection or the "
              "exclusive property value does not match that of the original declaration.")
    # a reply text over 255 characters keeps its first 252 and ends in "..."
    assert refused(amqp, queue, node=0, exclusive=True, arguments={"x-max-length": 10}) == (
        405, locked if len(locked) <= 255 else locked[:252] + "...")
    assert refused(amqp, queue, node=1, arguments={"x-max-length": 20}) == (
        406, f"{PF}inequivalent arg 'x-max-length' {where}: received '20' but current is '10'")
    assert refused(amqp, queue, node=1) == (
        406, f"{PF}inequivalent arg 'x-max-length' {where}: "
        "received none but current is the value '10' of type 'signedint'")
    # without x-queue-type the node's default type (classic) is compared
    ch = amqp.blocking(1).channel()
    assert closed_by_broker(lambda: ch.queue_declare(
        queue, durable=True, arguments={"x-max-length": 10})) == (
        406, f"{PF}inequivalent arg 'x-queue-type' {where}: "
        "received 'classic' but current is 'quorum'")
    # an equivalent re-declare is fine
    ok = amqp.blocking(1).channel().queue_declare(queue, durable=True,
                                                  arguments={**QQ, "x-max-length": 10})
    assert (ok.method.queue, ok.method.message_count, ok.method.consumer_count) == (queue, 0, 0)


def test_a_refused_declare_closes_only_its_channel_with_the_select_adapter(
        amqp: Amqp, queue: str) -> None:
    client = amqp.select(1)
    bad, good = client.channel(), client.channel()
    with pytest.raises(pex.ChannelClosedByBroker) as info:
        bad.declare(queue, {"x-message-ttl": -1})
    assert (info.value.reply_code, info.value.reply_text) == (
        406, f"{PF}invalid arg 'x-message-ttl' for queue '{queue}' in vhost '/': "
        "{value_negative,-1}")
    assert good.declare(queue).method.queue == queue
    assert client.conn.is_open and good.closed is None
