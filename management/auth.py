"""Basic auth against the node's AMQP users, with RabbitMQ's management tags.

RabbitMQ answers every refusal here with 401 (its code keeps 403 for a later
release): no credentials get a bare challenge (no body), wrong ones
``{"error":"not_authorized","reason":"Not_Authorized"}``, a user without the tag
a route needs ``{"error":"not_authorised","reason":"Not management user"}`` (or
"Not administrator user", "Not monitor user").
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable

from channel.access.auth import User, Users, password_ok
from management.errors import HttpError, not_authorised

__all__ = ["ADMIN", "MANAGEMENT", "MONITOR", "POLICYMAKER", "Credentials", "authenticate",
           "can_see_all", "visible_vhosts"]

MANAGEMENT = "management"
MONITOR = "monitoring"
POLICYMAKER = "policymaker"
ADMIN = "administrator"

_ALLOWED: dict[str, tuple[frozenset[str], str]] = {
    MANAGEMENT: (frozenset({"administrator", "monitoring", "policymaker", "management"}),
                 "Not management user"),
    MONITOR: (frozenset({"administrator", "monitoring"}), "Not monitor user"),
    POLICYMAKER: (frozenset({"administrator", "policymaker"}),
                  "User not authorised to access object"),
    ADMIN: (frozenset({"administrator"}), "Not administrator user"),
}

Credentials = tuple[User, str]


def _challenge(bare: bool = False) -> HttpError:
    return HttpError(401, "" if bare else "not_authorized", "Not_Authorized")


def _basic(header: str | None) -> tuple[str, str] | None:
    if not header or not header.lower().startswith("basic "):
        return None
    try:
        text = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    name, sep, password = text.partition(":")
    return (name, password) if sep else None


def authenticate(users: Users, header: str | None, level: str) -> Credentials:
    """The user and password of an ``Authorization`` header allowed at `level`."""
    given = _basic(header)
    if given is None:
        raise _challenge(bare=header is None)
    user = users.lookup(given[0])
    if user is None or not password_ok(user, given[1]):
        raise _challenge()
    if not _has(user.tags, _ALLOWED[MANAGEMENT][0]):
        raise not_authorised("Not management user")
    tags, reason = _ALLOWED[level]
    if not _has(user.tags, tags):
        raise not_authorised(reason)
    return user, given[1]


def _has(tags: Iterable[str], wanted: frozenset[str]) -> bool:
    return any(t in wanted for t in tags)


def can_see_all(user: User) -> bool:
    """Monitoring and administrator users see every vhost's objects."""
    return _has(user.tags, _ALLOWED[MONITOR][0])


def visible_vhosts(user: User, vhosts: Iterable[str]) -> list[str]:
    """The vhosts `user` lists objects of: all for monitors, else those it may open."""
    return [v for v in vhosts if can_see_all(user) or v in user.permissions]
