"""Moving a snapshot between members (``ra_server_proc:send_snapshots``), without the processes.

A snapshot travels as bytes: the machine state is serialised once and cut
into ``snapshot_chunk_size`` pieces sent as ``{1, next}`` ... ``{N, last}``
(a single chunk is ``{1, last}``). The receiver accepts pieces in order,
ignores resends of older ones, and only on ``last`` turns the bytes back into
a machine state. Keeping the byte form (rather than handing the state object
over) means the chunk semantics are exercised exactly as on the wire.

A snapshot with live indexes goes in two phases more, first: ``{0, init}``
(the receiver drops its log above its ``last_applied``), then ``{0, pre}``
calls of up to 16 live entries each, only those above the receiver's
``last_applied`` (it holds the rest), which it writes sparsely.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ra import stored_terms
from ra.types import InstallSnapshotRpc, ServerId

#: ``snapshot_chunk_size`` default (bytes).
DEFAULT_SNAPSHOT_CHUNK_SIZE = 1_000_000
#: ``install_snap_rpc_timeout`` default (ms): each chunk call's timeout.
DEFAULT_INSTALL_SNAP_RPC_TIMEOUT = 120_000
#: ``receive_snapshot_timeout`` default (ms), reset by every chunk.
DEFAULT_RECEIVE_SNAPSHOT_TIMEOUT = 30_000

#: live entries per ``pre`` call (Ra's ``ra_seq:list_chunk(16, ...)``)
PRE_CHUNK_ENTRIES = 16

INIT = "init"
PRE = "pre"
NEXT = "next"
LAST = "last"


def encode_state(mac_state: Any) -> bytes:
    """The snapshot file body for a machine state (pickle, as between nodes)."""
    return pickle.dumps(mac_state, protocol=5)


def decode_state(data: bytes) -> Any:
    return stored_terms.loads(data)


def chunks(data: bytes, chunk_size: int) -> list[tuple[tuple[int, str], bytes]]:
    """``[((num, flag), bytes)]`` for `data`; never empty (an empty body is one last chunk)."""
    if chunk_size < 1:
        raise ValueError("snapshot_chunk_size must be positive")
    pieces = [data[i:i + chunk_size] for i in range(0, len(data), chunk_size)] or [b""]
    out = []
    for num, piece in enumerate(pieces, start=1):
        out.append(((num, LAST if num == len(pieces) else NEXT), piece))
    return out


def init_rpc(meta: dict[str, Any], term: int, leader_id: ServerId) -> InstallSnapshotRpc:
    """``{0, init}``: a snapshot with live entries is coming."""
    return InstallSnapshotRpc(term=term, leader_id=leader_id, meta=meta,
                              chunk_state=(0, INIT), data=b"")


def pre_rpcs(meta: dict[str, Any], term: int, leader_id: ServerId,
             entries: list[Any]) -> Iterator[InstallSnapshotRpc]:
    """``{0, pre}`` calls carrying `entries` (ascending), `PRE_CHUNK_ENTRIES` each."""
    for i in range(0, len(entries), PRE_CHUNK_ENTRIES):
        yield InstallSnapshotRpc(term=term, leader_id=leader_id, meta=meta,
                                 chunk_state=(0, PRE), data=entries[i:i + PRE_CHUNK_ENTRIES])


def live_to_send(live: list[int], last_applied: int) -> list[list[int]]:
    """The live indexes a receiver at `last_applied` lacks, in ``pre`` chunks."""
    todo = [i for i in live if i > last_applied]
    return [todo[i:i + PRE_CHUNK_ENTRIES] for i in range(0, len(todo), PRE_CHUNK_ENTRIES)]


def install_snapshot_rpcs(
    meta: dict[str, Any],
    mac_state: Any,
    term: int,
    leader_id: ServerId,
    chunk_size: int = DEFAULT_SNAPSHOT_CHUNK_SIZE,
) -> Iterator[InstallSnapshotRpc]:
    """The ``next``/``last`` calls carrying the snapshot's bytes, in order (after the
    ``init``/``pre`` phase, if the snapshot has live entries)."""
    for chunk_state, piece in chunks(encode_state(mac_state), chunk_size):
        yield InstallSnapshotRpc(term=term, leader_id=leader_id, meta=meta,
                                 chunk_state=chunk_state, data=piece)


def retry_delay_ms(attempt: int) -> int:
    """Backoff before re-sending after the sender crashed for the `attempt`-th time."""
    return min(5000 * (1 << (attempt - 1)), 60_000)


@dataclass
class Accepting:
    """A snapshot being received (``ra_snapshot:begin_accept`` .. ``complete_accept``)."""

    meta: dict[str, Any]
    #: number of the next chunk expected
    next_num: int = 1
    pieces: list[bytes] = field(default_factory=list)

    def idxterm(self) -> tuple[int, int]:
        return (int(self.meta["index"]), int(self.meta["term"]))

    def accept_chunk(self, num: int, data: bytes) -> None:
        """Append chunk `num`; a resend of one already held is ignored."""
        if num < self.next_num:
            return
        if num > self.next_num:
            raise ValueError(f"snapshot chunk {num} received, expected {self.next_num}")
        self.pieces.append(data)
        self.next_num = num + 1

    def complete(self, num: int, data: bytes) -> Any:
        """Accept the ``last`` chunk and return the machine state it encodes."""
        self.accept_chunk(num, data)
        return decode_state(b"".join(self.pieces))
