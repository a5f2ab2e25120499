"""A node's store written with the flat `channel` layout of earlier releases loads.

Users, permissions, queue records and messages are pickled into the Ra log and
snapshots by their class's module path; those paths moved into sub-packages.
"""

from __future__ import annotations

import importlib
import pickle
import zlib

import pytest

import channel
from channel.access.auth import User
from channel.access.permissions import ALL
from ra import snapshot, snapshot_store


@pytest.mark.parametrize(("old", "new"), sorted(channel.MOVED_MODULES.items()))
def test_every_module_of_the_flat_layout_names_where_it_went(old: str, new: str) -> None:
    importlib.import_module(new)
    try:
        importlib.import_module(old)
    except ModuleNotFoundError:
        return
    assert old == "channel.limits", f"{old} still exists: it did not move"  # now a package


def _older_user_pickle() -> bytes:
    """A user record as the flat layout pickled it: class `channel.auth.User`."""
    blob = pickle.dumps(User("old", "hash", {"/": ALL}), protocol=2)
    blob = blob.replace(b"cchannel.access.auth\nUser", b"cchannel.auth\nUser")
    blob = blob.replace(b"cchannel.access.permissions\n", b"cchannel.permissions\n")
    assert b"channel.access" not in blob
    return blob


def test_a_user_record_of_the_flat_layout_loads_from_a_snapshot() -> None:
    old = _older_user_pickle()
    with pytest.raises(ModuleNotFoundError):
        pickle.loads(old)
    user = snapshot.decode_state(old)
    assert isinstance(user, User) and user.name == "old" and user.permissions == {"/": ALL}
    meta = pickle.dumps({"index": 1}, protocol=5)
    body = len(meta).to_bytes(4, "big") + meta + old
    file = snapshot_store.MAGIC + bytes([snapshot_store.VERSION]) + zlib.crc32(body).to_bytes(
        4, "big") + body
    assert snapshot_store.decode(file) == ({"index": 1}, user)
