"""Users, the PLAIN and AMQPLAIN mechanisms, and RabbitMQ's loopback_users rule.

RabbitMQ's default user `guest` may only log in from a loopback address; a
refused login looks the same to the client whatever the cause, so the reader
only needs to know "refused" and which mechanism was used. A user carries its
tags, its permissions per vhost (`channel.access.permissions`), its topic
permissions per vhost and exchange (`channel.access.topic_permissions`) and its
connection and channel limits (`channel.limits.limits`); `Users.lookup` is
the one read path, so a broker can serve the table from its metadata store.
A running connection re-authenticates with `connection.update-secret`
(`reauthenticate`).

A user holds a salted hash of its password, never the password
(`channel.access.passwords`); its repr leaves the hash out too, so neither reaches a log,
a trace or a crash report. Records stored by an older warren held the password
in clear: they still log in until the metadata store converts them
(`User.is_cleartext`, `broker.metadata`'s `hash_passwords`).
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from channel.access.passwords import DEFAULT_HASHING_ALGORITHM, hash_password, password_matches
from channel.access.permissions import ALL, Permission
from channel.access.topic_permissions import TopicPermission
from channel.errors import AmqpError
from channel.protocol.framing import decode_table

__all__ = [
    "MECHANISMS",
    "LoginRefused",
    "User",
    "Users",
    "check_login",
    "default_user",
    "is_loopback",
    "parse_response",
    "password_ok",
    "reauthenticate",
]

MECHANISMS = ("PLAIN", "AMQPLAIN")
"""Offered in connection.start, in this order."""


_MISSING = object()


class LoginRefused(Exception):
    """The credentials (or the peer address) were refused; the reason is for logs only."""


@dataclass(frozen=True, slots=True)
class User:
    name: str
    password_hash: str = field(repr=False)
    """base64 of ``salt ‖ H(salt ‖ password)`` (`channel.access.passwords`); ``""`` after
    `clear_password`, which no password matches. In a record of an older warren
    (`hashing_algorithm` None) this is the password itself."""
    permissions: Mapping[str, Permission] = field(default_factory=dict)
    """vhost -> permission; a vhost without an entry cannot be opened."""
    tags: tuple[str, ...] = ()
    limits: Mapping[str, int] = field(default_factory=dict)
    """`max-connections` / `max-channels` (`channel.limits.limits`); absent means no limit."""
    topic_permissions: Mapping[str, Mapping[str, TopicPermission]] = field(default_factory=dict)
    """vhost -> exchange -> write / read expressions; an exchange without one is
    not restricted (`channel.access.topic_permissions`)."""
    hashing_algorithm: str | None = DEFAULT_HASHING_ALGORITHM
    """RabbitMQ's name of the hash function (`rabbit_password_hashing_sha256`); None
    marks a record stored by an older warren, whose `password_hash` is cleartext."""

    @property
    def is_cleartext(self) -> bool:
        """A record of an older warren, still holding its password in clear."""
        return self.hashing_algorithm is None

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        """Unpickle a user stored by an older warren (the metadata store's log and
        snapshots outlive upgrades): fields it did not have get their defaults.

        A record without `hashing_algorithm` is one whose second field was the
        password in clear: it is marked so (None) until the store converts it."""
        for i, f in enumerate(fields(self)):
            value = state[i] if i < len(state) else _MISSING
            if value is _MISSING:
                if f.name == "hashing_algorithm":
                    value = None
                else:
                    value = f.default_factory() if f.default_factory is not MISSING else f.default
            object.__setattr__(self, f.name, value)


_DEFAULT_USER_SALT = b"gues"
"""The default user's record is made by the metadata machine's `init` on every
member, so its hash must be the same everywhere: a fixed salt. Its password is
RabbitMQ's well-known default, so a fixed salt gives nothing away."""


def default_user() -> User:
    """RabbitMQ's first boot: guest/guest, administrator, everything on `/`."""
    return User("guest", hash_password("guest", salt=_DEFAULT_USER_SALT), {"/": ALL},
                ("administrator",))


@dataclass
class Users:
    """The users table, plus `loopback_users` (default: guest)."""

    users: dict[str, User] = field(default_factory=dict)
    loopback_users: frozenset[str] = frozenset({"guest"})

    @classmethod
    def default(cls) -> Users:
        return cls({"guest": default_user()})

    def add(self, user: User) -> None:
        self.users[user.name] = user

    def lookup(self, name: str) -> User | None:
        return self.users.get(name)


def is_loopback(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def _text(value: str | bytes) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def parse_response(mechanism: str, response: str | bytes) -> tuple[str, str]:
    """(username, password) from a start-ok response."""
    raw = response.encode("utf-8") if isinstance(response, str) else bytes(response)
    if mechanism == "PLAIN":
        parts = raw.split(b"\x00")
        if len(parts) != 3:
            raise LoginRefused("PLAIN: response is not \\0user\\0password")
        return parts[1].decode("utf-8", "replace"), parts[2].decode("utf-8", "replace")
    if mechanism == "AMQPLAIN":
        try:
            table = decode_table(raw)
        except Exception as exc:  # malformed table
            raise LoginRefused(f"AMQPLAIN: bad response ({exc})") from exc
        login, password = table.get("LOGIN"), table.get("PASSWORD")
        if not isinstance(login, str | bytes) or not isinstance(password, str | bytes):
            raise LoginRefused("AMQPLAIN: LOGIN or PASSWORD missing")
        return _text(login), _text(password)
    raise AmqpError("COMMAND_INVALID", f"unknown authentication mechanism '{mechanism}'")


def check_login(users: Users, mechanism: str, response: str | bytes, peer_address: str) -> User:
    """The authenticated user, or LoginRefused / AmqpError(COMMAND_INVALID)."""
    if mechanism not in MECHANISMS:
        raise AmqpError("COMMAND_INVALID", f"unknown authentication mechanism '{mechanism}'")
    name, password = parse_response(mechanism, response)
    if password == "":
        raise LoginRefused(f"user '{name}' attempted to log in with a blank password, "
                           "which is prohibited by the internal authN backend.")
    user = users.lookup(name)
    if user is None or not password_ok(user, password):
        raise LoginRefused(f"user '{name}' - invalid credentials")
    if name in users.loopback_users and not is_loopback(peer_address):
        raise LoginRefused(f"user '{name}' can only connect via localhost")
    return user


def password_ok(user: User, password: str | bytes) -> bool:
    """Whether `password` is `user`'s, compared in constant time."""
    algorithm = user.hashing_algorithm
    if algorithm is None:  # a record of an older warren, not converted yet
        given = password.encode("utf-8") if isinstance(password, str) else bytes(password)
        return hmac.compare_digest(user.password_hash.encode("utf-8"), given)
    return password_matches(user.password_hash, algorithm, password)


def reauthenticate(user: User, new_secret: str | bytes) -> User:
    """`connection.update-secret` for a user of warren's internal users table.

    RabbitMQ asks each of the user's backends whether its credentials expire;
    the internal backend's never do (`expiry_timestamp` is ``never``), so the
    update is accepted whatever the new secret and the connection keeps the
    user it logged in with. Refusal (530 NOT_ALLOWED) exists only for
    backends with expiring credentials (OAuth 2), which warren does not have.
    """
    del new_secret  # nothing to check it against: the credentials never expire
    return user
