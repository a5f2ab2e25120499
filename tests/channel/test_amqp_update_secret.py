"""`connection.update-secret` from a hand-driven socket.

As with RabbitMQ's internal auth backend, whose credentials never expire, the
update is always accepted: the connection answers `update-secret-ok` and goes
on with the user it logged in with, whatever the new secret and whatever
happened to the user in the users table since (pika never sends this method).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pamqp import commands as C

from channel.access.auth import User
from channel.access.permissions import ALL
from tests.channel.conftest import Broker
from tests.channel.test_amqp_raw import Raw


@pytest.fixture
def raw(broker: Broker) -> Iterator[Raw]:
    r = Raw(broker.port)
    r.handshake()
    yield r
    r.close()


def update_secret(raw: Raw, secret: str) -> object:
    raw.send(C.Connection.UpdateSecret(new_secret=secret, reason="token refresh"))
    return raw.method()


def assert_connection_goes_on(raw: Raw, channel: int) -> None:
    raw.send(C.Channel.Open(), channel)
    assert raw.method().name == "Channel.OpenOk"
    raw.send(C.Exchange.Declare(exchange="after-update-secret", exchange_type="fanout"), channel)
    assert raw.method().name == "Exchange.DeclareOk"


def test_the_current_secret_is_accepted_and_the_connection_goes_on(raw: Raw) -> None:
    assert isinstance(update_secret(raw, "guest"), C.Connection.UpdateSecretOk)
    assert_connection_goes_on(raw, 1)


def test_any_secret_is_accepted_internal_credentials_never_expire(raw: Raw) -> None:
    raw.send(C.Channel.Open(), 1)
    assert raw.method().name == "Channel.OpenOk"
    assert isinstance(update_secret(raw, "not-the-password"), C.Connection.UpdateSecretOk)
    assert isinstance(update_secret(raw, ""), C.Connection.UpdateSecretOk)
    assert_connection_goes_on(raw, 2)


def test_a_user_changed_or_deleted_since_login_keeps_its_connection(broker: Broker,
                                                                     raw: Raw) -> None:
    broker.ctx.users.add(User("guest", "rotated", {"/": ALL}, ("administrator",)))
    assert isinstance(update_secret(raw, "guest"), C.Connection.UpdateSecretOk)
    del broker.ctx.users.users["guest"]
    assert isinstance(update_secret(raw, "rotated"), C.Connection.UpdateSecretOk)
    raw.send(C.Channel.Open(), 1)  # the connection is still open
    assert raw.method().name == "Channel.OpenOk"
