"""What a queued message costs in RabbitMQ's Ra process heap, per machine version.

A quorum queue may hold millions of ready messages in its state, so their
size is a figure users compare between releases. The model is upstream's
(8-byte words): one queue cell per message (2 words), plus the reference.
Machine 8 packs the raft index and a size under 32 KiB into one immediate
integer, which costs nothing beyond the cell: 16 bytes a message. Before it
(and in machine 8 for larger or richer messages) the reference is the
improper list ``[Idx | Header]`` (2 more words: 32 bytes), an expiry adds a
``[Size | Expiry]`` cell (2 words) and counters or annotations turn the header
into a small map.

warren's own objects are bigger (``tests/fifo/test_memory.py`` measures them);
this module gives the figure RabbitMQ itself would show.
"""

from __future__ import annotations

from typing import Any

from fifo.msg import Msg, is_packed, msg_header, msg_size
from fifo.versions import rules_for, rules_of_state

__all__ = ["WORD", "message_bytes", "ready_message_bytes"]

WORD = 8
_CELL = 2 * WORD


def _header_bytes(header: Any) -> int:
    if type(header) is int:
        return 0
    if type(header) is tuple:
        return _CELL
    # a flatmap: header word, size word, a tuple of keys (arity + keys), values
    k = len(header)
    return (2 + (1 + k) + k) * WORD


def message_bytes(msg: Msg, version: int) -> int:
    """Heap bytes of one ready message under machine `version`."""
    size_max = rules_for(version).packed_size_max
    if is_packed(msg) and size_max is not None and msg_size(msg) <= size_max:
        return _CELL
    return _CELL + _CELL + _header_bytes(msg_header(msg))


def ready_message_bytes(s: Any) -> int:
    """Heap bytes of every ready message (returns and the priority queue)."""
    version = rules_of_state(s).version
    total = sum(message_bytes(m, version) for m in s.returns)
    return total + sum(message_bytes(m, version) for m in s.messages.drain_order())
