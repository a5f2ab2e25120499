"""The users table of a broker node, served from the metadata store.

Logins and permission checks must see what `warren ctl add_user` /
`set_permissions` committed on any node, without a Raft round trip per
check: like routing, they read the node's copy of the metadata state.
"""

from __future__ import annotations

from broker.store import Metadata
from channel.auth import User, Users

__all__ = ["ReplicatedUsers"]


class ReplicatedUsers(Users):
    def __init__(self, metadata: Metadata) -> None:
        super().__init__()
        self.metadata = metadata

    def lookup(self, name: str) -> User | None:
        return self.metadata.view.state.users.get(name)

    def add(self, user: User) -> None:
        self.metadata.command(("add_user", user))
