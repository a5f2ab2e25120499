"""Exchange types, exchange/binding management and routing, with RabbitMQ's errors."""

from __future__ import annotations

from typing import Any

import pytest

from channel.errors import AmqpError
from channel.exchanges.exchange import Topology
from channel.exchanges.routing import headers_match, routing_keys, topic_match


@pytest.mark.parametrize(
    ("binding", "key", "match"),
    [
        ("a.b.c", "a.b.c", True),
        ("a.*.c", "a.b.c", True),
        ("a.*.c", "a.c", False),
        ("a.#", "a", True),
        ("a.#", "a.b.c", True),
        ("#", "", True),
        ("#", "anything.at.all", True),
        ("#.c", "c", True),
        ("#.c", "a.b.c", True),
        ("a.#.c", "a.c", True),
        ("a.#.c", "a.x.y.c", True),
        ("a.#.c", "a.x.y.d", False),
        ("*", "a.b", False),
        ("*.*", "a.b", True),
        ("*", "", True),   # the empty routing key is one empty word
        ("a.*.#", "a", False),
        ("#.#", "a.b", True),
        ("a", "a.b", False),
    ],
)
def test_topic_matching(binding: str, key: str, match: bool) -> None:
    assert topic_match(binding, key) is match


@pytest.mark.parametrize(
    ("args", "headers", "match"),
    [
        ({"a": 1, "b": "x"}, {"a": 1, "b": "x", "c": 3}, True),     # x-match all by default
        ({"a": 1, "b": "x"}, {"a": 1}, False),
        ({"x-match": "any", "a": 1, "b": 2}, {"b": 2}, True),
        ({"x-match": "any", "a": 1}, {"a": 2}, False),
        ({"x-match": "any"}, {"a": 1}, False),                       # any with nothing usable
        ({"x-match": "all"}, {}, True),                              # all with nothing
        ({"x-match": "all", "a": None}, {"a": "whatever"}, True),    # void: presence only
        ({"x-match": "all", "a": None}, {}, False),
        ({"x-match": "all", "x-k": 1}, {}, True),                    # x- args ignored
        ({"x-match": "all-with-x", "x-k": 1}, {}, False),
        ({"x-match": "any-with-x", "x-k": 1}, {"x-k": 1}, True),
        ({"a": True}, {"a": 1}, False),                              # types must agree
        ({"a": 1}, {"a": 2**40 // 2**40}, True),                     # ints by value
    ],
)
def test_headers_matching(args: dict[str, Any], headers: dict[str, Any], match: bool) -> None:
    assert headers_match(args, headers) is match


def test_routing_keys_include_cc_and_bcc() -> None:
    assert routing_keys("rk", {"CC": ["a", 5, "b"], "BCC": ["c"]}) == ["rk", "a", "b", "c"]
    assert routing_keys("rk", None) == ["rk"]
    with pytest.raises(AmqpError) as info:
        routing_keys("rk", {"CC": "a"})
    assert info.value.reply_text == (
        'PRECONDITION_FAILED - invalid message: {unacceptable_type_in_header,"CC",longstr}')


def err(fn: Any, *args: Any, **kwargs: Any) -> tuple[int, str]:
    with pytest.raises(AmqpError) as info:
        fn(*args, **kwargs)
    return info.value.code, info.value.reply_text


def exists(_name: str) -> bool:
    return True


@pytest.fixture
def topo() -> Topology:
    return Topology()


def test_predeclared_exchanges(topo: Topology) -> None:
    names = {name: x.type for name, x in topo.vhosts["/"].exchanges.items()}
    assert names == {"": "direct", "amq.direct": "direct", "amq.fanout": "fanout",
                     "amq.topic": "topic", "amq.headers": "headers", "amq.match": "headers"}


def test_declare_errors(topo: Topology) -> None:
    assert err(topo.declare, "/", "x", "weird") == (
        406, "PRECONDITION_FAILED - unknown exchange type 'weird'")
    assert err(topo.declare, "/", "", "direct") == (
        403, "ACCESS_REFUSED - operation not permitted on the default exchange")
    assert err(topo.declare, "/", "amq.mine", "direct") == (
        403, "ACCESS_REFUSED - exchange name 'amq.mine' contains reserved prefix 'amq.*'")
    assert err(topo.declare, "/", "nope", "direct", passive=True) == (
        404, "NOT_FOUND - no exchange 'nope' in vhost '/'")
    assert err(topo.declare, "/", "", "direct", passive=True)[0] == 403
    topo.declare("/", "x", "direct", durable=True)
    assert err(topo.declare, "/", "x", "fanout", durable=True) == (
        406, "PRECONDITION_FAILED - inequivalent arg 'type' for exchange 'x' in vhost '/': "
             "received 'fanout' but current is 'direct'")
    assert err(topo.declare, "/", "x", "direct", durable=False) == (
        406, "PRECONDITION_FAILED - inequivalent arg 'durable' for exchange 'x' in vhost '/': "
             "received 'false' but current is 'true'")
    assert topo.declare("/", "x", "fanout", passive=True).type == "direct"  # passive ignores
    assert err(topo.declare, "/", "y", "direct", arguments={"alternate-exchange": 1}) == (
        406, "PRECONDITION_FAILED - invalid type 'signedint' for arg 'alternate-exchange' in "
             "exchange 'y' in vhost '/'")


def test_delete_errors(topo: Topology) -> None:
    assert err(topo.delete, "/", "amq.direct")[1] == (
        "ACCESS_REFUSED - deletion of system exchange 'amq.direct' in vhost '/' not allowed")
    assert err(topo.delete, "/", "")[0] == 403
    topo.delete("/", "missing")  # no error
    topo.declare("/", "x", "direct")
    topo.bind("/", "x", "queue", "q", "k", {}, exists)
    assert err(topo.delete, "/", "x", if_unused=True) == (
        406, "PRECONDITION_FAILED - exchange 'x' in vhost '/' in use")
    topo.delete("/", "x")
    assert topo.lookup("/", "x") is None


def test_bind_errors(topo: Topology) -> None:
    assert err(topo.bind, "/", "", "queue", "q", "k", {}, exists)[0] == 403
    assert err(topo.bind, "/", "nope", "queue", "q", "k", {}, exists) == (
        404, "NOT_FOUND - no exchange 'nope' in vhost '/'")
    assert err(topo.bind, "/", "amq.direct", "queue", "q", "k", {}, lambda n: False) == (
        404, "NOT_FOUND - no queue 'q' in vhost '/'")
    assert err(topo.bind, "/", "amq.headers", "queue", "q", "", {"x-match": "some"}, exists) == (
        406, 'PRECONDITION_FAILED - Invalid x-match field value "some"; expected all, any, '
             "all-with-x, or any-with-x")
    topo.unbind("/", "nope", "queue", "nope", "k", {})  # unbinding nothing succeeds


def test_routing_through_every_exchange_type(topo: Topology) -> None:
    topo.bind("/", "amq.direct", "queue", "q1", "k", {}, exists)
    topo.bind("/", "amq.direct", "queue", "q2", "other", {}, exists)
    topo.bind("/", "amq.fanout", "queue", "q1", "", {}, exists)
    topo.bind("/", "amq.fanout", "queue", "q2", "ignored", {}, exists)
    topo.bind("/", "amq.topic", "queue", "q1", "a.*", {}, exists)
    topo.bind("/", "amq.topic", "queue", "q2", "a.#", {}, exists)
    topo.bind("/", "amq.headers", "queue", "q3", "", {"x-match": "any", "h": 1}, exists)
    assert topo.route("/", "amq.direct", ["k"], None) == ["q1"]
    assert topo.route("/", "amq.fanout", ["x"], None) == ["q1", "q2"]
    assert topo.route("/", "amq.topic", ["a.b"], None) == ["q1", "q2"]
    assert topo.route("/", "amq.topic", ["a.b.c"], None) == ["q2"]
    assert topo.route("/", "amq.headers", ["x"], {"h": 1}) == ["q3"]
    assert topo.route("/", "", ["any-name", "any-name"], None) == ["any-name"]
    assert topo.route("/", "amq.direct", ["k", "other"], None) == ["q1", "q2"]  # CC keys


def test_exchange_to_exchange_and_alternate_exchange(topo: Topology) -> None:
    topo.declare("/", "ae", "fanout")
    topo.declare("/", "main", "direct", arguments={"alternate-exchange": "ae"})
    topo.bind("/", "ae", "queue", "unrouted", "", {}, exists)
    topo.bind("/", "main", "queue", "q", "k", {}, exists)
    topo.bind("/", "main", "exchange", "amq.fanout", "k", {}, exists)
    topo.bind("/", "amq.fanout", "queue", "q", "", {}, exists)   # same queue twice
    topo.bind("/", "amq.fanout", "exchange", "main", "", {}, exists)  # a cycle
    assert topo.route("/", "main", ["k"], None) == ["q"]
    assert topo.route("/", "main", ["nothing"], None) == ["unrouted"]


def test_auto_delete_exchange_goes_with_its_last_binding(topo: Topology) -> None:
    topo.declare("/", "tmp", "fanout", auto_delete=True)
    topo.bind("/", "tmp", "queue", "q", "", {}, exists)
    topo.remove_queue("/", "q")
    assert topo.lookup("/", "tmp") is None
