"""Per-vhost permissions: which operation needs which permission on which resource,
and RabbitMQ's exact 403 texts
(`rabbit_access_control:check_resource_access`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pika
import pika.exceptions as pex
import pytest

from channel.access.auth import User
from channel.access.passwords import hash_password
from channel.access.permissions import Permission, check_resource_access
from channel.errors import AmqpError
from tests.channel.conftest import Broker, client, ok, refused


def params(broker: Broker, user: str = "u", password: str = "p",
           vhost: str = "/") -> pika.ConnectionParameters:
    return pika.ConnectionParameters("127.0.0.1", broker.port, vhost, connection_attempts=1,
                                     credentials=pika.PlainCredentials(user, password))


@pytest.fixture
def setup(broker: Broker) -> Iterator[Callable[[Permission], pika.BlockingConnection]]:
    """Topology made by guest, then a connection of user `u` with the given permission."""
    admin = client(lambda: pika.BlockingConnection(params(broker, "guest", "guest")))
    ch = client(admin.channel)
    client(lambda: ch.exchange_declare("x", "direct"))
    client(lambda: ch.queue_declare("q", durable=True))
    client(lambda: ch.queue_bind("q", "x", "k"))
    client(lambda: ch.basic_publish("", "q", b"m"))
    conns: list[pika.BlockingConnection] = [admin]

    def connect(perm: Permission) -> pika.BlockingConnection:
        broker.ctx.users.add(User("u", hash_password("p"), {"/": perm}))
        c = client(lambda: pika.BlockingConnection(params(broker)))
        conns.append(c)
        return c
    yield connect
    for c in conns:
        if c.is_open:
            client(c.close)


NOTHING = Permission("", "", "")


def _consume(ch: Any) -> Any:
    return ch.basic_consume("q", lambda *a: None)


@pytest.mark.parametrize(("op", "text"), [
    (lambda ch: ch.queue_declare("new"), "configure access to queue 'new'"),
    (lambda ch: ch.queue_delete("q"), "configure access to queue 'q'"),
    (lambda ch: ch.queue_purge("q"), "read access to queue 'q'"),
    (lambda ch: ch.basic_get("q"), "read access to queue 'q'"),
    (_consume, "read access to queue 'q'"),
    (lambda ch: ch.queue_bind("q", "x", "k2"), "write access to queue 'q'"),
    (lambda ch: ch.queue_unbind("q", "x", "k"), "write access to queue 'q'"),
    (lambda ch: ch.exchange_declare("x2", "fanout"), "configure access to exchange 'x2'"),
    (lambda ch: ch.exchange_delete("x"), "configure access to exchange 'x'"),
    (lambda ch: ch.exchange_bind("x", "amq.fanout"), "write access to exchange 'x'"),
    (lambda ch: ch.queue_declare("q", passive=True), "configure access to queue 'q'"),
    (lambda ch: ch.exchange_declare("x", passive=True), "configure access to exchange 'x'"),
])
def test_each_operation_needs_its_permission(
        setup: Callable[[Permission], pika.BlockingConnection],
        op: Callable[[Any], Any], text: str) -> None:
    conn = setup(NOTHING)
    assert refused(conn, op) == (
        403, f"ACCESS_REFUSED - {text} in vhost '/' refused for user 'u'")


def test_publishing_needs_write_on_the_exchange_default_is_amq_default(
        setup: Callable[[Permission], pika.BlockingConnection]) -> None:
    conn = setup(Permission(".*", "", ".*"))

    def publish(ch: Any) -> None:
        ch.basic_publish("", "q", b"m")
        ch.queue_declare("q", passive=True)  # a round trip, so the close arrives
    assert refused(conn, publish) == (
        403, "ACCESS_REFUSED - write access to exchange 'amq.default' in vhost '/' "
             "refused for user 'u'")


def test_binding_needs_read_on_the_source_after_write_on_the_destination(
        setup: Callable[[Permission], pika.BlockingConnection]) -> None:
    conn = setup(Permission("", "^q$", "^q$"))
    assert refused(conn, lambda ch: ch.queue_bind("q", "x", "k2")) == (
        403, "ACCESS_REFUSED - read access to exchange 'x' in vhost '/' refused for user 'u'")


def test_passive_declare_accepts_any_one_permission(
        setup: Callable[[Permission], pika.BlockingConnection]) -> None:
    conn = setup(Permission("", "", "^q$"))
    assert ok(conn, lambda ch: ch.queue_declare("q", passive=True).method.message_count) == 1


def test_permissions_are_unanchored_regular_expressions(
        setup: Callable[[Permission], pika.BlockingConnection]) -> None:
    conn = setup(Permission("mine", ".*", ".*"))
    ok(conn, lambda ch: ch.queue_declare("not-mine-either", durable=True))
    assert refused(conn, lambda ch: ch.queue_declare("yours"))[0] == 403


def test_a_dead_letter_exchange_needs_write_on_it(
        setup: Callable[[Permission], pika.BlockingConnection]) -> None:
    conn = setup(Permission(".*", "^(?!dlx$)", ".*"))
    args = {"x-dead-letter-exchange": "dlx"}
    assert refused(conn, lambda ch: ch.queue_declare("dl", arguments=args)) == (
        403, "ACCESS_REFUSED - write access to exchange 'dlx' in vhost '/' refused for user 'u'")


def test_granted_operations_work(setup: Callable[[Permission], pika.BlockingConnection]) -> None:
    conn = setup(Permission("^own", "^(own|x)", "^(own|x|q)$"))

    def work(ch: Any) -> int:
        ch.queue_declare("own", durable=True)
        ch.queue_bind("own", "x", "k")
        method, _props, body = ch.basic_get("q", auto_ack=True)
        assert body == b"m"
        return ch.queue_delete("own").method.message_count
    assert ok(conn, work) == 0


def test_a_user_without_a_permission_on_the_vhost_cannot_open_it(broker: Broker) -> None:
    broker.ctx.users.add(User("u", hash_password("p"), {"other": Permission(".*", ".*", ".*")}))

    def connect() -> BaseException:
        with pytest.raises(pex.ProbableAccessDeniedError) as info:
            pika.BlockingConnection(params(broker))
        return info.value
    assert client(connect).args[0] == (
        "ConnectionClosedByBroker: (530) \"NOT_ALLOWED - access to vhost '/' refused for "
        "user 'u'\"")


def test_a_broken_regular_expression_refuses() -> None:
    user = User("u", "p", {"/": Permission("(", ".*", ".*")})
    with pytest.raises(AmqpError) as info:
        check_resource_access(user, "/", "queue", "q", "configure")
    assert info.value.code == 403
