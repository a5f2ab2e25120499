"""Log entries pickled once, however often they are sent and written.

A leader sends the same run of entries to every follower, and each follower
writes the run it received to its WAL. Pickling is among the largest costs of
that path in a node process (py-spy at window 256: 13 % of the leader's samples,
10 % of a follower's for its WAL alone), and each of those pickles would encode
the same entries again. `PackedEntries` is a tuple of entries that keeps its own
pickle: the first pickling makes it, later ones (the second follower's
AppendEntries, the follower's WAL record) embed it as bytes, and unpickling
gives back a `PackedEntries` that still has it. It changes nothing a reader
of the entries sees: it is a tuple, equal to the plain tuple of its entries.
"""

from __future__ import annotations

import pickle
from typing import Any

from ra import stored_terms

__all__ = ["PackedEntries", "own_batch"]


class PackedEntries(tuple):
    """A tuple of ``(index, term, command)`` entries that remembers its pickle."""

    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        blob = self.__dict__.get("blob")
        if blob is None:
            blob = self.__dict__["blob"] = pickle.dumps(tuple(self), protocol=5)
        return (_unpack, (blob,))


def _unpack(blob: bytes) -> PackedEntries:
    entries = PackedEntries(stored_terms.loads(blob))
    entries.__dict__["blob"] = blob
    return entries


def own_batch(entries: Any) -> Any:
    """A batch to keep or hand to the WAL: a packed run as it is (immutable, its
    pickle made), anything else copied into a list of its own."""
    return entries if isinstance(entries, PackedEntries) else list(entries)
