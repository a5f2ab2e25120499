"""AMQP 0-9-1 reply codes and the error value channels and readers raise.

RabbitMQ raises `#amqp_error{name, explanation, method}` and decides late
whether it closes the channel (soft) or the connection (hard). warren does the
same with `AmqpError`; the reply text on the wire is built exactly as
`rabbit_binary_generator` does: NAME - explanation, and a text longer than 255
characters cut to its first 252 followed by "...".
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CODES",
    "HARD",
    "INTERNAL_ERROR_CLOSE",
    "AmqpError",
    "erlang_term",
    "json_term",
    "protocol_error",
    "rs",
]

CODES: dict[str, int] = {
    "REPLY_SUCCESS": 200,
    "CONTENT_TOO_LARGE": 311,
    "NO_ROUTE": 312,
    "NO_CONSUMERS": 313,
    "CONNECTION_FORCED": 320,
    "INVALID_PATH": 402,
    "ACCESS_REFUSED": 403,
    "NOT_FOUND": 404,
    "RESOURCE_LOCKED": 405,
    "PRECONDITION_FAILED": 406,
    "FRAME_ERROR": 501,
    "SYNTAX_ERROR": 502,
    "COMMAND_INVALID": 503,
    "CHANNEL_ERROR": 504,
    "UNEXPECTED_FRAME": 505,
    "RESOURCE_ERROR": 506,
    "NOT_ALLOWED": 530,
    "NOT_IMPLEMENTED": 540,
    "INTERNAL_ERROR": 541,
}

HARD = frozenset(
    {
        "CONNECTION_FORCED", "INVALID_PATH", "FRAME_ERROR", "SYNTAX_ERROR",
        "COMMAND_INVALID", "CHANNEL_ERROR", "UNEXPECTED_FRAME", "RESOURCE_ERROR",
        "NOT_ALLOWED", "NOT_IMPLEMENTED", "INTERNAL_ERROR",
    }
)


class AmqpError(Exception):
    """A protocol error: `name` (e.g. NOT_FOUND), explanation, failing method ids."""

    def __init__(self, name: str, explanation: str = "", method: tuple[int, int] = (0, 0)):
        if name not in CODES:
            raise ValueError(f"unknown AMQP error name {name!r}")
        super().__init__(name, explanation, method)
        self.name = name
        self.explanation = explanation
        self.method = method

    @property
    def code(self) -> int:
        return CODES[self.name]

    @property
    def hard(self) -> bool:
        return self.name in HARD

    def closes_connection(self, channel: int) -> bool:
        """`map_exception`: hard errors, and any error on channel 0, close the connection."""
        return self.hard or channel == 0

    @property
    def reply_text(self) -> str:
        text = f"{self.name} - {self.explanation}" if self.explanation else self.name
        return text if len(text) <= 255 else text[:252] + "..."

    def with_method(self, method: tuple[int, int]) -> AmqpError:
        """Stamp the failing method's ids unless the error already names one."""
        if self.method != (0, 0):
            return self
        return AmqpError(self.name, self.explanation, method)

    def __repr__(self) -> str:
        return f"AmqpError({self.code} {self.reply_text!r}, {self.method})"


INTERNAL_ERROR_CLOSE = AmqpError("INTERNAL_ERROR")
"""What a crash (any non-AMQP failure) becomes: 541, text `INTERNAL_ERROR`, 0/0."""


def protocol_error(name: str, explanation: str, method: tuple[int, int] = (0, 0)) -> AmqpError:
    return AmqpError(name, explanation, method)


def rs(kind: str, name: str, vhost: str) -> str:
    """`rabbit_misc:rs/1`: `queue 'q1' in vhost '/'`."""
    return f"{kind} '{name}' in vhost '{vhost}'"


def erlang_term(value: Any) -> str:
    """Render a value the way Erlang's ~p prints the terms embedded in error texts.

    Tuples print as `{a,b}`, lists as `[a,b]`, strings as `"..."`, atoms are
    passed as `Atom` instances, booleans as true/false.
    """
    if isinstance(value, Atom):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bytes):
        return "<<" + erlang_term(value.decode("utf-8", "replace")) + ">>"
    if isinstance(value, tuple):
        return "{" + ",".join(erlang_term(v) for v in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(erlang_term(v) for v in value) + "]"
    return str(value)


def json_term(value: Any) -> str:
    """A decoded JSON value as Erlang prints it (`~tp`) in rabbitmqctl's validation
    errors: strings are binaries (`<<"5">>`), true/false/null atoms, objects maps."""
    if isinstance(value, str):
        return erlang_term(value.encode())
    if isinstance(value, bool) or value is None:
        return erlang_term(Atom("null" if value is None else str(value).lower()))
    if isinstance(value, list):
        return "[" + ",".join(json_term(v) for v in value) + "]"
    if isinstance(value, dict):
        return "#{" + ",".join(f"{json_term(k)} => {json_term(v)}"
                               for k, v in value.items()) + "}"
    return erlang_term(value)


class Atom(str):
    """An Erlang atom inside an error term (printed bare, not quoted)."""

    __slots__ = ()


__all__ += ["Atom"]
