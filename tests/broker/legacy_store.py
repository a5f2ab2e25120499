"""A metadata store holding a user as an older warren stored it: in clear.

Older warrens pickled `channel.access.auth.User` with six fields, the second the
password itself. `older_warren_pickle` writes those bytes; `main` (run as
``python -m tests.broker.legacy_store NODE USER PASSWORD``) commits such a
record on a running node, as a short-lived node of its own like `warren ctl`,
and holds that node's conversion back so the record is still there when the node
stops: the next boot is then an upgrade from an older warren.
"""

from __future__ import annotations

import copyreg
import io
import os
import pickle
import sys
from typing import Any

from channel.access.auth import User
from channel.access.permissions import ALL

__all__ = ["older_warren_pickle"]


class _OlderWarrenPickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is User:
            return (copyreg.__newobj__, (User,), [
                obj.name, obj.password_hash, obj.permissions, obj.tags, obj.limits,
                obj.topic_permissions])
        return NotImplemented


def older_warren_pickle(name: str, password: str) -> bytes:
    """The bytes an older warren wrote for a user with every permission on `/`."""
    buf = io.BytesIO()
    _OlderWarrenPickler(buf, protocol=5).dump(User(name, password, {"/": ALL}))
    return buf.getvalue()


def _commit_on_node(blob: bytes) -> Any:
    """Runs on the target node: no conversion there until it restarts, then the record."""
    import actors
    from broker import users
    from broker.running import broker_of

    users._under_way.add(actors.node())
    return broker_of().metadata.command(("add_user", pickle.loads(blob)))


def main(node_name: str, user: str, password: str) -> int:
    from actors import Node
    from ra import system as ra_system
    from transports.zmq import ZmqTransport
    from transports.zmq_node import free_port

    node = Node(f"legacy_{os.getpid()}@127.0.0.1:{free_port()}",
                transport=ZmqTransport()).start()
    try:
        with node.attached():
            reply = ra_system.rpc(node_name, _commit_on_node,
                                  older_warren_pickle(user, password), timeout=15_000)
    finally:
        node.stop("shutdown")
    print(reply)
    return 0 if reply == "ok" else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
