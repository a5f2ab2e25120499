"""Formatting ``ra_event`` messages before they reach clients (Ra's ``ra_event_formatter``).

A server config may carry ``"ra_event_formatter": (fun, args)``, the Python
form of Ra's ``{M, F, A}``. Every event the server sends a client (``applied``
notifications, ``rejected`` commands, machine messages sent with the
``ra_event`` option) is then built as ``fun(from_id, (event_type, body),
*args)`` instead of ``("ra_event", from_id, (event_type, body))``. A client
library uses it to receive the server's events in its own message format
(RabbitMQ's quorum queues wrap them for the channel this way).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Formatter = Callable[[Any, tuple[Any, Any]], Any]


class BadFormatter(ValueError):
    """A ``ra_event_formatter`` that is not ``(callable, args)``."""


def resolve(spec: Any) -> Formatter | None:
    """The formatting function of a config value; ``None`` when there is none."""
    if spec is None:
        return None
    match spec:
        case (fun, args) if callable(fun) and isinstance(args, list | tuple):
            extra = tuple(args)
            return lambda from_id, evt: fun(from_id, evt, *extra)
    raise BadFormatter(spec)


def wrap(formatter: Formatter | None, from_id: Any, event_type: str, body: Any) -> Any:
    """The message a client gets for one event."""
    if formatter is None:
        return ("ra_event", from_id, (event_type, body))
    return formatter(from_id, (event_type, body))
