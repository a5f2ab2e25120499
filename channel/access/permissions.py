"""Per-vhost permissions and RabbitMQ's resource access checks.

A user may use a vhost when it has a permission record there (three regular
expressions: configure, write, read). Each AMQP operation needs one of them on
the resource it touches (as `rabbit_channel:check_*_permitted` asks); a name is
allowed when the expression matches anywhere in it (an unanchored search, as
`re:run`), an empty expression matches only the empty name, and a broken one
refuses. The default exchange is checked under the name `amq.default`. The
texts are `rabbit_access_control`'s, so a client sees exactly RabbitMQ's
`403 ACCESS_REFUSED - write access to exchange 'x' in vhost '/' refused for
user 'u'`. Topic exchanges add per-routing-key checks
(`channel.access.topic_permissions`), which `Access.check_topic` runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from channel.access.topic_permissions import check_topic_access
from channel.errors import AmqpError, rs

__all__ = ["ALL", "PERMS", "Access", "Permission", "check_resource_access"]

PERMS = ("configure", "write", "read")


@dataclass(frozen=True, slots=True)
class Permission:
    configure: str
    write: str
    read: str

    def allows(self, perm: str, name: str) -> bool:
        pattern = getattr(self, perm) or "^$"
        try:
            return re.search(pattern, name) is not None
        except re.error:  # RabbitMQ denies on a regex error
            return False


ALL = Permission(".*", ".*", ".*")
"""What `guest` has on `/` at first boot."""


def check_resource_access(user: Any, vhost: str, kind: str, name: str, perm: str) -> None:
    """Raise 403 unless `user` (a `channel.access.auth.User` or None) has `perm` on the resource."""
    if kind == "exchange" and name == "":
        name = "amq.default"
    granted = None if user is None else user.permissions.get(vhost)
    if granted is None or not granted.allows(perm, name):
        who = "" if user is None else user.name
        raise AmqpError("ACCESS_REFUSED",
                        f"{perm} access to {rs(kind, name, vhost)} refused for user '{who}'")


class Access:
    """The checks of one channel: its user (looked up live) in its vhost."""

    def __init__(self, users: Any, username: str, vhost: str) -> None:
        self.users, self.username, self.vhost = users, username, vhost

    def check(self, kind: str, name: str, perm: str) -> None:
        check_resource_access(self.users.lookup(self.username), self.vhost, kind, name, perm)

    def check_any(self, kind: str, name: str) -> None:
        """Passive declares: any permission will do; configure's refusal is reported."""
        for perm in ("read", "write"):
            try:
                self.check(kind, name, perm)
                return
            except AmqpError:
                continue
        self.check(kind, name, "configure")

    def check_topic(self, exchange: Any, routing_keys: Iterable[str], perm: str) -> None:
        """`perm` ("write" / "read") for each routing key on `exchange` (an
        `Exchange` or None); only topic exchanges are checked."""
        if exchange is None or exchange.type != "topic":
            return
        user = self.users.lookup(self.username)
        for key in routing_keys:
            check_topic_access(user, self.vhost, exchange.name, key, perm)
