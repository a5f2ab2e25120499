"""Topic permissions over AMQP: every routing key of a publish to a topic
exchange (CC and BCC included) needs the write expression, a binding key on a
topic exchange needs the read expression, other exchange types are not checked
(`rabbit_channel:check_topic_authorisation`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pika
import pytest

from channel.access.auth import User
from channel.access.passwords import hash_password
from channel.access.permissions import ALL
from channel.access.topic_permissions import TopicPermission
from tests.channel.conftest import Broker, client, ok, refused

Topic = dict[str, TopicPermission]


def params(broker: Broker, user: str, password: str) -> pika.ConnectionParameters:
    return pika.ConnectionParameters("127.0.0.1", broker.port, "/", connection_attempts=1,
                                     credentials=pika.PlainCredentials(user, password))


class Setup:
    """guest's topology, and connections of user `u` (everything on `/`) with
    the topic permissions a test gives it."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.admin = client(lambda: pika.BlockingConnection(params(broker, "guest", "guest")))
        self.conns = [self.admin]
        ch = client(self.admin.channel)
        for name, type_ in (("t", "topic"), ("t2", "topic"), ("d", "direct"), ("f", "fanout"),
                            ("x2", "fanout")):
            client(lambda n=name, ty=type_: ch.exchange_declare(n, ty))
        client(lambda: ch.queue_declare("q", durable=True))
        client(lambda: ch.queue_bind("q", "t", "#"))
        self.admin_ch = ch

    def connect(self, topic: Topic, user: str = "u") -> pika.BlockingConnection:
        self.set(topic, user)
        c = client(lambda: pika.BlockingConnection(params(self.broker, user, "p")))
        self.conns.append(c)
        return c

    def set(self, topic: Topic, user: str = "u") -> None:
        self.broker.ctx.users.add(User(user, hash_password("p"), {"/": ALL},
                                       topic_permissions={"/": topic}))

    def ready(self) -> int:
        return client(lambda: self.admin_ch.queue_declare("q", passive=True)).method.message_count

    def close(self) -> None:
        for c in self.conns:
            if c.is_open:
                client(c.close)


@pytest.fixture
def setup(broker: Broker) -> Iterator[Setup]:
    s = Setup(broker)
    yield s
    s.close()


def publish(exchange: str, key: str, headers: dict[str, Any] | None = None,
            user_id: str | None = None) -> Callable[[Any], None]:
    def op(ch: Any) -> None:
        props = pika.BasicProperties(headers=headers, user_id=user_id)
        ch.basic_publish(exchange, key, b"m", props)
        ch.queue_declare("q", passive=True)  # a round trip, so a close arrives first
    return op


def text(perm: str, key: str, exchange: str = "t") -> tuple[int, str]:
    return 403, (f"ACCESS_REFUSED - {perm} access to topic '{key}' in exchange '{exchange}' "
                 "in vhost '/' refused for user 'u'")


A_ONLY = {"t": TopicPermission(r"^a\.", r"^b\.")}


def test_publish_is_checked_per_routing_key(setup: Setup) -> None:
    conn = setup.connect(A_ONLY)
    ok(conn, publish("t", "a.1"))
    assert setup.ready() == 1
    assert refused(conn, publish("t", "b.1")) == text("write", "b.1")
    assert setup.ready() == 1


def test_cc_and_bcc_keys_are_checked_too(setup: Setup) -> None:
    conn = setup.connect(A_ONLY)
    assert refused(conn, publish("t", "a.1", {"CC": ["a.2", "c.3"]})) == text("write", "c.3")
    assert refused(conn, publish("t", "a.1", {"BCC": ["d.4"]})) == text("write", "d.4")
    ok(conn, publish("t", "a.1", {"CC": ["a.2"], "BCC": ["a.3"]}))
    assert setup.ready() == 1


def test_other_exchange_types_are_not_checked(setup: Setup) -> None:
    deny_all = TopicPermission("", "")
    conn = setup.connect({"d": deny_all, "f": deny_all, "t": deny_all})
    ok(conn, publish("d", "any"))
    ok(conn, publish("f", "any"))
    ok(conn, lambda ch: ch.queue_bind("q", "d", "any"))
    assert refused(conn, publish("t", "any")) == text("write", "any")


def test_a_topic_exchange_without_a_topic_permission_is_not_restricted(setup: Setup) -> None:
    conn = setup.connect(A_ONLY)
    ok(conn, publish("t2", "z.1"))
    ok(conn, lambda ch: ch.queue_bind("q", "t2", "z.#"))


def test_an_empty_write_expression_allows_only_the_empty_key(setup: Setup) -> None:
    conn = setup.connect({"t": TopicPermission("", ".*")})
    assert refused(conn, publish("t", "a")) == text("write", "a")
    ok(conn, publish("t", ""))
    assert setup.ready() == 1


def test_bindings_need_the_read_expression_on_the_binding_key(setup: Setup) -> None:
    conn = setup.connect(A_ONLY)
    assert refused(conn, lambda ch: ch.queue_bind("q", "t", "a.#")) == text("read", "a.#")
    assert refused(conn, lambda ch: ch.queue_unbind("q", "t", "#")) == text("read", "#")
    assert refused(conn, lambda ch: ch.exchange_bind("x2", "t", "c")) == text("read", "c")
    assert refused(conn, lambda ch: ch.exchange_unbind("x2", "t", "c")) == text("read", "c")

    def allowed(ch: Any) -> None:
        ch.queue_bind("q", "t", "b.#")
        ch.exchange_bind("x2", "t", "b.x")
        ch.exchange_unbind("x2", "t", "b.x")
        ch.queue_unbind("q", "t", "b.#")
    ok(conn, allowed)


def test_the_username_and_vhost_variables_are_expanded(setup: Setup) -> None:
    conn = setup.connect({"t": TopicPermission(r"^{username}\.", r"^{vhost}\.")})
    ok(conn, publish("t", "u.1"))
    assert refused(conn, publish("t", "v.1")) == text("write", "v.1")
    ok(conn, lambda ch: ch.queue_bind("q", "t", "/.#"))
    assert refused(conn, lambda ch: ch.queue_bind("q", "t", "u.#")) == text("read", "u.#")


def test_changes_apply_to_open_channels_at_once(setup: Setup) -> None:
    conn = setup.connect({})
    ok(conn, publish("t", "b.1"))
    setup.set(A_ONLY)
    assert refused(conn, publish("t", "b.1")) == text("write", "b.1")


def test_topic_check_comes_after_the_message_is_built_and_before_user_id(
        setup: Setup) -> None:
    conn = setup.connect(A_ONLY)
    assert refused(conn, publish("t", "b.1", user_id="someone")) == text("write", "b.1")
    code, reason = refused(conn, publish("t", "b.1", {"CC": "c.1"}))
    assert (code, reason) == (
        406, 'PRECONDITION_FAILED - invalid message: {unacceptable_type_in_header,"CC",longstr}')
