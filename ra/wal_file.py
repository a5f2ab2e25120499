"""The on-disk format of warren's WAL files, and reading one back.

A file is a 5-byte header (``b"WWAL"`` + version 1) followed by records. The
WAL writes one record per batch with one ``write`` and then one fdatasync, so
a record is the unit that is either durable or not:

    u32 length | u32 crc32(payload) | payload

The payload is a pickle (protocol 5) of ``[(uid, [(idx, term, cmd), ...]),
...]``: the accepted writes of that batch in arrival order. Reading stops at
the first record header of zeros (the unwritten rest of a file, which is most of a
pre-allocated one), and at a record that is incomplete or fails its checksum
when the file ends there or a zero header follows: that is a torn tail, the
batch that was being written when the node stopped, never acknowledged to a
writer. A bad record with a record after it cannot come from a crash (a batch
is written only after the previous one was fsynced) and is refused, as Ra
refuses to start with ``wal_checksum_validation_failure``.
"""

from __future__ import annotations

import mmap
import os
import pickle
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

from ra import stored_terms
from ra.types import Entry

MAGIC = b"WWAL"
VERSION = 1
HEADER = MAGIC + bytes([VERSION])
_REC = struct.Struct(">II")

#: one batch: the writes accepted for each uid, in arrival order
Batch = list[tuple[str, list[Entry]]]


class WalCorrupt(ValueError):
    """A record in the middle of a WAL file fails its checksum."""


def file_name(file_no: int) -> str:
    """``NNNNNNNNNNNNNNNN.wal``: 16 decimal digits, as Ra names them."""
    return f"{file_no:016d}.wal"


def file_number(name: str) -> int | None:
    stem, dot, ext = name.partition(".")
    if dot and ext == "wal" and len(stem) == 16 and stem.isdigit():
        return int(stem)
    return None


def encode(batch: Batch, checksums: bool = True) -> bytes:
    payload = pickle.dumps(batch, protocol=5)
    crc = zlib.crc32(payload) if checksums else 0
    return _REC.pack(len(payload), crc) + payload


@dataclass
class Recovered:
    """What one WAL file holds: its batches and where the valid data ends."""

    batches: list[Batch] = field(default_factory=list)
    valid_bytes: int = 0
    torn: bool = False


def _zero_header_at(buf: Any, pos: int) -> bool:
    """Whether the record header at `pos` is all zeros or lies past the end: the end
    of what was ever written (a pre-allocated file is zeros after its records)."""
    return not any(buf[pos:pos + _REC.size])


def read(path: str) -> Recovered:
    """Every complete batch of `path`, stopping at a torn tail."""
    out = Recovered()
    size = os.path.getsize(path)
    if size < len(HEADER):
        out.torn = size > 0
        return out
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        if buf[: len(HEADER)] != HEADER:
            raise WalCorrupt(f"{path}: not a warren WAL file")
        pos = len(HEADER)
        out.valid_bytes = pos
        while pos < size:
            if size - pos < _REC.size:
                out.torn = True
                break
            length, crc = _REC.unpack_from(buf, pos)
            start, end = pos + _REC.size, pos + _REC.size + length
            if length == 0:
                break
            if end > size:
                out.torn = True
                break
            payload = buf[start:end]
            if crc != 0 and zlib.crc32(payload) != crc:
                if _zero_header_at(buf, end):
                    out.torn = True
                    break
                raise WalCorrupt(f"{path}: checksum failure at offset {pos}")
            out.batches.append(stored_terms.loads(payload))
            pos = end
            out.valid_bytes = pos
    return out
