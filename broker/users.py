"""The users table of a broker node, served from the metadata store.

Logins and permission checks must see what `warren ctl add_user` /
`set_permissions` committed on any node, without a Raft round trip per
check: like routing, they read the node's copy of the metadata state.

`hash_passwords` is where records stored in clear by an older warren are
converted: the metadata machine's tick names them on the leader, and the
hashing (random salts) happens here, outside the deterministic machine.
"""

from __future__ import annotations

import logging

import actors
from broker.metadata import CLUSTER_NAME
from broker.store import Metadata
from channel.access.auth import User, Users
from channel.access.passwords import DEFAULT_HASHING_ALGORITHM, hash_password
from ra import api

__all__ = ["ReplicatedUsers", "hash_passwords"]

log = logging.getLogger("warren.broker")

COMMAND_TIMEOUT = 5000

_under_way: set[str] = set()
"""Nodes (of this OS process) whose conversion has not answered yet: the tick asks
again every second, and one conversion at a time is enough."""


class ReplicatedUsers(Users):
    def __init__(self, metadata: Metadata) -> None:
        super().__init__()
        self.metadata = metadata

    def lookup(self, name: str) -> User | None:
        return self.metadata.view.state.users.get(name)

    def add(self, user: User) -> None:
        self.metadata.command(("add_user", user))


def hash_passwords(users: tuple[User, ...]) -> None:
    """The machine's ``mod_call`` on the leader, whose server process must not
    block: the hashing and the command run in a short-lived process."""
    node = actors.node()
    if node in _under_way:
        return
    _under_way.add(node)
    actors.spawn(_convert, node, users)


def _convert(node: str, users: tuple[User, ...]) -> None:
    try:
        conversions = tuple((u.name, hash_password(u.password_hash), DEFAULT_HASHING_ALGORITHM)
                            for u in users)
        result = api.process_command([(CLUSTER_NAME, node)], ("hash_passwords", conversions),
                                     COMMAND_TIMEOUT)
        if result[0] == "ok":
            log.info("metadata store: passwords of %s now stored as salted hashes",
                     ", ".join(sorted(u.name for u in users)))
        else:
            log.warning("metadata store: passwords stored in clear not converted yet: %r",
                        result)
    finally:
        _under_way.discard(node)
