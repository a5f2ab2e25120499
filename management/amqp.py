"""AMQP operations of the HTTP API, done over a connection to the node's own listener.

RabbitMQ's management plugin declares, deletes, purges, publishes and gets through
an AMQP connection opened as the requesting user, so the channel's own checks
(permissions, argument equivalence, exclusivity) answer. Here that connection is
pika's blocking client, run in a thread of a pool of its own: the hub keeps serving
the listener the thread talks to, and requests waiting for their confirms never
hold the threads of the hub's pool, which the Ra WAL syncs its batches on.

A channel error becomes RabbitMQ's HTTP answer, which depends on how RabbitMQ
makes the request: a declare, delete, bind or purge (a method it runs on a direct
channel) answers 404 for NOT_FOUND, 401 for
ACCESS_REFUSED and 400 otherwise, with the AMQP explanation alone; a publish or a
get (over its own connection) answers 400 with the code and the whole reply text,
``404 NOT_FOUND - no exchange 'x' in vhost '/'``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import pika
import pika.exceptions as pex
from gevent.threadpool import ThreadPool

from management.errors import HttpError, bad_request, not_authorised, not_found

__all__ = ["AmqpTarget", "run", "run_method"]

T = TypeVar("T")

NOT_FOUND = 404
ACCESS_REFUSED = 403
#: AMQP requests of the API at once (more wait for a thread)
POOL_SIZE = 8
_pool: ThreadPool | None = None


def _threads() -> ThreadPool:
    global _pool
    if _pool is None:
        _pool = ThreadPool(POOL_SIZE)
    return _pool


class AmqpTarget:
    """Where and as whom: the node's listener, one vhost, the HTTP request's user."""

    def __init__(self, host: str, port: int, vhost: str, user: str, password: str) -> None:
        self.host = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host
        self.port, self.vhost, self.user, self.password = port, vhost, user, password


def _method_error(code: int, text: str) -> HttpError:
    explanation = text.split(" - ", 1)[1] if " - " in text else text
    if code == NOT_FOUND:
        return not_found(explanation)
    if code == ACCESS_REFUSED:
        return not_authorised(explanation)
    return bad_request(explanation)


def _request_error(code: int, text: str) -> HttpError:
    return bad_request(f"{code} {text}")


def _blocking(target: AmqpTarget, fn: Callable[[Any], T],
              error: Callable[[int, str], HttpError]) -> T:
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
    except (pex.ChannelClosedByBroker, pex.ConnectionClosedByBroker) as exc:
        raise error(exc.reply_code, exc.reply_text) from None
    finally:
        if conn.is_open:
            try:
                conn.close()
            except pex.AMQPError:
                pass


def run(target: AmqpTarget, fn: Callable[[Any], T]) -> T:
    """`fn(channel)` on a fresh channel of `target`, in a pool thread: a publish or
    a get, whose channel errors are answered with their code and reply text."""
    return _threads().apply(_blocking, (target, fn, _request_error))


def run_method(target: AmqpTarget, fn: Callable[[Any], T]) -> T:
    """As `run`, for a declare, delete, bind or purge: errors as RabbitMQ answers a
    method it runs itself."""
    return _threads().apply(_blocking, (target, fn, _method_error))
