"""Connection, channel and queue limits against a live node, on hand-driven sockets:
every refusal's code, text and class/method, and that a freed slot is usable again."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from pamqp import commands as C

from channel.access.auth import User
from channel.access.passwords import hash_password
from channel.access.permissions import ALL
from tests.channel.conftest import Broker
from tests.channel.test_amqp_raw import Raw
from tests.waiting import hub_wait_until


class Clients:
    """Raw connections of one test; every socket is closed at the end."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.open: list[Raw] = []

    def connect(self, user: str = "guest", password: str = "guest", vhost: str = "/",
                ) -> tuple[Raw, Any]:
        """A new connection up to `connection.open`: (client, open-ok or close)."""
        raw = Raw(self.broker.port)
        self.open.append(raw)
        raw.sock.sendall(b"AMQP\x00\x00\x09\x01")
        assert raw.method().name == "Connection.Start"
        raw.send(C.Connection.StartOk(client_properties={"capabilities": {}},
                                      mechanism="PLAIN", response=f"\0{user}\0{password}"))
        assert raw.method().name == "Connection.Tune"
        raw.send(C.Connection.TuneOk(channel_max=2047, frame_max=131072, heartbeat=0))
        raw.send(C.Connection.Open(virtual_host=vhost))
        return raw, raw.method()

    def opened(self, user: str = "guest", password: str = "guest", vhost: str = "/") -> Raw:
        raw, reply = self.connect(user, password, vhost)
        assert reply.name == "Connection.OpenOk", reply
        return raw

    def end(self, raw: Raw) -> None:
        """Close the socket and wait until the node has forgotten the connection."""
        raw.close()
        self.open.remove(raw)
        hub_wait_until(lambda: len(self.broker.listener.readers) == len(self.open),
                       "the reader of a closed socket ends")


@pytest.fixture
def clients(broker: Broker) -> Iterator[Clients]:
    c = Clients(broker)
    yield c
    for raw in c.open:
        raw.close()


def refused(reply: Any) -> tuple[int, str, int, int]:
    assert reply.name == "Connection.Close", reply
    return reply.reply_code, reply.reply_text, reply.class_id, reply.method_id


def channel_open(raw: Raw, number: int) -> Any:
    raw.send(C.Channel.Open(), number)
    return raw.method()


def add_vhost_v(broker: Broker) -> None:
    """Vhost `v`, where guest may go too."""
    broker.ctx.topology.add_vhost("v")
    guest = broker.ctx.users.lookup("guest")
    assert guest is not None
    broker.ctx.users.add(replace(guest, permissions={**guest.permissions, "v": ALL}))


def add_user(broker: Broker, name: str, **limits: int) -> None:
    broker.ctx.users.add(User(name, hash_password("pw"), {"/": ALL, "v": ALL},
                              limits={k.replace("_", "-"): v for k, v in limits.items()}))


# -------------------------------------------------------------- connections


def test_node_connection_limit_then_a_freed_slot(broker: Broker, clients: Clients) -> None:
    broker.ctx.config.connection_max = 2
    first = clients.opened()
    clients.opened()
    third, reply = clients.connect()
    assert refused(reply) == (
        530, "NOT_ALLOWED - connection refused: node connection limit (2) is reached", 10, 40)
    clients.end(third)  # a refused connection holds its slot until its socket goes
    clients.end(first)
    clients.opened()


def test_vhost_connection_limit_then_a_freed_slot(broker: Broker, clients: Clients) -> None:
    add_vhost_v(broker)
    broker.ctx.vhost_limits.set("/", {"max-connections": 2})
    first = clients.opened()
    clients.opened()
    clients.opened(vhost="v")  # other vhosts are not counted
    _raw, reply = clients.connect()
    assert refused(reply) == (
        530, "NOT_ALLOWED - access to vhost '/' refused for user 'guest': connection limit "
             "(2) is reached", 10, 40)
    clients.end(first)
    clients.opened()


def test_vhost_limit_zero_refuses_every_connection_and_negative_none(
        broker: Broker, clients: Clients) -> None:
    broker.ctx.vhost_limits.set("/", {"max-connections": 0})
    _raw, reply = clients.connect()
    assert refused(reply)[1] == ("NOT_ALLOWED - access to vhost '/' refused for user 'guest': "
                                 "connection limit (0) is reached")
    broker.ctx.vhost_limits.set("/", {"max-connections": -1, "max-queues": 0})
    for _ in range(3):
        clients.opened()


def test_user_connection_limit_counts_all_vhosts_then_a_freed_slot(
        broker: Broker, clients: Clients) -> None:
    add_vhost_v(broker)
    add_user(broker, "u", max_connections=2)
    first = clients.opened("u", "pw")
    clients.opened("u", "pw", vhost="v")
    clients.opened()  # guest is not counted
    _raw, reply = clients.connect("u", "pw", vhost="v")
    assert refused(reply) == (
        530, "NOT_ALLOWED - connection refused for user 'u': user connection limit (2) is "
             "reached", 10, 40)
    clients.end(first)
    clients.opened("u", "pw", vhost="v")


def test_limits_are_checked_before_vhost_access(broker: Broker, clients: Clients) -> None:
    broker.ctx.users.add(User("nobody", hash_password("pw"), {}, limits={"max-connections": 0}))
    broker.ctx.vhost_limits.set("/", {"max-connections": 0})
    _raw, reply = clients.connect("nobody", "pw")
    assert "connection limit (0) is reached" in refused(reply)[1]
    broker.ctx.vhost_limits.clear("/")
    _raw, reply = clients.connect("nobody", "pw")
    assert refused(reply)[1] == ("NOT_ALLOWED - connection refused for user 'nobody': "
                                 "user connection limit (0) is reached")
    broker.ctx.users.add(User("nobody", hash_password("pw"), {}))
    _raw, reply = clients.connect("nobody", "pw")
    assert refused(reply)[1] == "NOT_ALLOWED - access to vhost '/' refused for user 'nobody'"


def test_node_limit_comes_before_the_vhost_limit(broker: Broker, clients: Clients) -> None:
    broker.ctx.config.connection_max = 0
    broker.ctx.vhost_limits.set("/", {"max-connections": 0})
    _raw, reply = clients.connect()
    assert refused(reply)[1] == ("NOT_ALLOWED - connection refused: node connection limit (0) "
                                 "is reached")


# ----------------------------------------------------------------- channels


def test_user_channel_limit_spans_connections_then_a_freed_slot(
        broker: Broker, clients: Clients) -> None:
    add_user(broker, "u", max_channels=2)
    a = clients.opened("u", "pw")
    b = clients.opened("u", "pw")
    assert channel_open(a, 1).name == "Channel.OpenOk"
    assert channel_open(b, 1).name == "Channel.OpenOk"
    assert channel_open(clients.opened(), 1).name == "Channel.OpenOk"  # guest's own
    close = channel_open(b, 2)
    assert refused(close) == (
        530, "NOT_ALLOWED - number of channels opened for user 'u' has reached the maximum "
             "allowed user limit of 2", 0, 0)
    a.send(C.Channel.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0), 1)
    assert a.method().name == "Channel.CloseOk"
    assert channel_open(a, 2).name == "Channel.OpenOk"


def test_user_channel_limit_zero(broker: Broker, clients: Clients) -> None:
    add_user(broker, "u", max_channels=0)
    assert refused(channel_open(clients.opened("u", "pw"), 1))[1] == (
        "NOT_ALLOWED - number of channels opened for user 'u' has reached the maximum "
        "allowed user limit of 0")


def test_node_channel_limit_then_a_freed_slot(broker: Broker, clients: Clients) -> None:
    broker.ctx.config.channel_max_per_node = 2
    a = clients.opened()
    b = clients.opened()
    assert channel_open(a, 1).name == "Channel.OpenOk"
    assert channel_open(b, 7).name == "Channel.OpenOk"
    assert refused(channel_open(b, 8)) == (
        530, f"NOT_ALLOWED - number of channels opened on node '{broker.node.name}' has "
             "reached the maximum allowed limit of 2", 0, 0)
    clients.end(b)
    assert channel_open(a, 2).name == "Channel.OpenOk"


def test_user_channel_limit_comes_before_the_node_limit(
        broker: Broker, clients: Clients) -> None:
    broker.ctx.config.channel_max_per_node = 1
    add_user(broker, "u", max_channels=1)
    a = clients.opened("u", "pw")
    assert channel_open(a, 1).name == "Channel.OpenOk"
    assert "for user 'u'" in refused(channel_open(a, 2))[1]


# ------------------------------------------------------------------- queues


def declare(raw: Raw, number: int, queue: str) -> Any:
    raw.send(C.Queue.Declare(queue=queue, durable=True), number)
    return raw.method()


def test_vhost_queue_limit_then_a_freed_slot(broker: Broker, clients: Clients) -> None:
    add_vhost_v(broker)
    broker.ctx.vhost_limits.set("/", {"max-queues": 2})
    raw = clients.opened()
    assert channel_open(raw, 1).name == "Channel.OpenOk"
    for name in ("q1", "q2", "q1"):  # re-declaring an existing queue is not a new one
        assert declare(raw, 1, name).name == "Queue.DeclareOk"
    close = declare(raw, 1, "q3")
    assert (close.name, close.reply_code, close.reply_text, close.class_id,
            close.method_id) == (
        "Channel.Close", 406, "PRECONDITION_FAILED - cannot declare queue 'q3': queue limit "
                              "in vhost '/' (2) is reached", 50, 10)
    raw.send(C.Channel.CloseOk(), 1)
    other = clients.opened(vhost="v")  # other vhosts are not limited by it
    assert channel_open(other, 1).name == "Channel.OpenOk"
    assert declare(other, 1, "q3").name == "Queue.DeclareOk"
    assert channel_open(raw, 2).name == "Channel.OpenOk"
    raw.send(C.Queue.Delete(queue="q1"), 2)
    assert raw.method().name == "Queue.DeleteOk"
    assert declare(raw, 2, "q3").name == "Queue.DeclareOk"


def test_vhost_queue_limit_zero(broker: Broker, clients: Clients) -> None:
    broker.ctx.vhost_limits.set("/", {"max-queues": 0})
    raw = clients.opened()
    channel_open(raw, 1)
    assert declare(raw, 1, "q").reply_text == (
        "PRECONDITION_FAILED - cannot declare queue 'q': queue limit in vhost '/' (0) is "
        "reached")


def test_cluster_queue_limit_counts_every_vhost(broker: Broker, clients: Clients) -> None:
    add_vhost_v(broker)
    broker.ctx.config.cluster_queue_limit = 2
    raw = clients.opened()
    other = clients.opened(vhost="v")
    for r in (raw, other):
        assert channel_open(r, 1).name == "Channel.OpenOk"
    assert declare(raw, 1, "a").name == "Queue.DeclareOk"
    assert declare(other, 1, "b").name == "Queue.DeclareOk"
    close = declare(raw, 1, "c")
    assert (close.reply_code, close.reply_text) == (
        406, "PRECONDITION_FAILED - cannot declare queue 'c': queue limit in cluster (2) is "
             "reached")
