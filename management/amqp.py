"""AMQP operations of the HTTP API, done over a connection to the node's own listener.

RabbitMQ's management plugin declares, deletes, purges, publishes and gets through
an AMQP connection opened as the requesting user, so the channel's own checks
(permissions, argument equivalence, exclusivity) answer. Here that connection is
pika's blocking client, run in a thread of gevent's pool: the hub keeps serving
the listener the thread talks to. A channel error becomes RabbitMQ's HTTP answer:
404 for NOT_FOUND, 401 for ACCESS_REFUSED, 400 with the AMQP text otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import gevent
import pika
import pika.exceptions as pex

from management.errors import HttpError, bad_request, not_authorised, not_found

__all__ = ["AmqpTarget", "run"]

T = TypeVar("T")

NOT_FOUND = 404
ACCESS_REFUSED = 403


class AmqpTarget:
    """Where and as whom: the node's listener, one vhost, the HTTP request's user."""

    def __init__(self, host: str, port: int, vhost: str, user: str, password: str) -> None:
        self.host = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host
        self.port, self.vhost, self.user, self.password = port, vhost, user, password


def _error(code: int, text: str) -> HttpError:
    if code == NOT_FOUND:
        return not_found(text)
    if code == ACCESS_REFUSED:
        return not_authorised(text)
    return bad_request(text)


def _blocking(target: AmqpTarget, fn: Callable[[Any], T]) -> T:
    params = pika.ConnectionParameters(
        target.host, target.port, target.vhost,
        pika.PlainCredentials(target.user, target.password),
        connection_attempts=1, heartbeat=0, blocked_connection_timeout=30)
    try:
        conn = pika.BlockingConnection(params)
    except pex.ProbableAccessDeniedError as exc:
        raise not_authorised(str(exc)) from None
    except pex.AMQPConnectionError as exc:
        raise HttpError(503, "service_unavailable", repr(exc)) from None
    try:
        return fn(conn.channel())
    except pex.ChannelClosedByBroker as exc:
        raise _error(exc.reply_code, exc.reply_text) from None
    except pex.ConnectionClosedByBroker as exc:
        raise _error(exc.reply_code, exc.reply_text) from None
    finally:
        if conn.is_open:
            try:
                conn.close()
            except pex.AMQPError:
                pass


def run(target: AmqpTarget, fn: Callable[[Any], T]) -> T:
    """`fn(channel)` on a fresh channel of `target`, in a pool thread."""
    return gevent.get_hub().threadpool.apply(_blocking, (target, fn))
