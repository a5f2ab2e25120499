"""One durable classic queue's file in the message store: records in, messages out.

Why a log of records: RabbitMQ's classic queue index appends a publish entry per
persistent message and an ack entry when it leaves, and recovery replays them. Here
each durable queue has one append-only file of two kinds of record, *write* (a
message: its queue id, enough of the core's view to rebuild it, its content
bytes) and *remove* (ids that left for good). Replaying the file gives the
messages still held, in id order, which is enqueue order.

Each record is framed as ``length (4) | crc32 (4) | payload``. A node killed in
the middle of a write leaves a torn last record; its length or checksum does not
match and replay stops there. Nothing after it was ever confirmed, since a
message is confirmed only once its record was handed to the operating system.

Pure: bytes in, bytes out; the store process does the file I/O.
"""

from __future__ import annotations

import pickle
import struct
import zlib
from dataclasses import dataclass

from classic import effects as e

__all__ = ["Recovered", "encode_remove", "encode_write", "replay"]

_FRAME = struct.Struct(">II")
_WRITE = 1
_REMOVE = 2


@dataclass(frozen=True, slots=True)
class Recovered:
    """A message read back from a queue's file (its content still encoded)."""

    msg_id: int
    exchange: str
    routing_keys: tuple[str, ...]
    size: int
    priority: int
    expiration: int | None
    content: bytes


def _frame(payload: bytes) -> bytes:
    return _FRAME.pack(len(payload), zlib.crc32(payload)) + payload


def encode_write(message: e.Delivery, content: bytes) -> bytes:
    """The record of one persistent message; `content` is the channel's encoding."""
    return _frame(pickle.dumps(
        (_WRITE, message.msg_id, message.exchange, tuple(message.routing_keys),
         message.size, message.priority, message.expiration, content),
        protocol=pickle.HIGHEST_PROTOCOL))


def encode_remove(msg_ids: tuple[int, ...]) -> bytes:
    """The record of messages that left the queue for good."""
    return _frame(pickle.dumps((_REMOVE, tuple(msg_ids)), protocol=pickle.HIGHEST_PROTOCOL))


def replay(data: bytes) -> tuple[list[Recovered], int]:
    """The messages a file still holds, in id order, and how many leading bytes of
    it are whole records: a torn or corrupt tail ends the replay, and the store cuts
    it off before appending again (a record after it would never be read)."""
    live: dict[int, Recovered] = {}
    offset = 0
    while offset + _FRAME.size <= len(data):
        length, crc = _FRAME.unpack_from(data, offset)
        start = offset + _FRAME.size
        payload = data[start:start + length]
        if len(payload) != length or zlib.crc32(payload) != crc:
            break
        offset = start + length
        record = pickle.loads(payload)
        if record[0] == _WRITE:
            live[record[1]] = Recovered(*record[1:])
        else:
            for msg_id in record[1]:
                live.pop(msg_id, None)
    return [live[msg_id] for msg_id in sorted(live)], offset
