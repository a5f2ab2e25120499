"""Segment files: one server's flushed entries, with an index for random reads.

A segment holds a contiguous run of at most ``segment_max_entries`` entries
and is written once (to a temporary name, fsynced, renamed), so a reader
never sees half a segment. Layout:

    b"WSEG" | u8 version | u32 count | u64 first index
    count x (u64 term | u64 offset | u32 length | u32 crc32)   -- the index
    count x pickled command (protocol 5)                        -- the data

A major compaction rewrites a segment below a snapshot keeping only the
entries the machine still needs (its live indexes); such a *sparse* segment
is version 2, whose index records also carry each entry's raft index
(``u64 index | u64 term | u64 offset | u32 length | u32 crc32``).

Terms live in the index, so `fetch_term` (used by every AppendEntries check)
reads no command data. Files are named ``NNNNNNNNNNNNNNNN.segment`` (16
decimal digits, increasing per server) and the order of the numbers is the
order of the flushes: replaying them in that order, each one cutting off
whatever older segments hold at or above its first index, gives the log.
"""

from __future__ import annotations

import bisect
import itertools
import os
import pickle
import struct
import zlib
from array import array
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from ra import durable, stored_terms
from ra.durable import replace_file
from ra.types import Entry

MAGIC = b"WSEG"
VERSION = 1
SPARSE_VERSION = 2
_HEAD = struct.Struct(">4sBIQ")
_IDX = struct.Struct(">QQII")
_SPARSE_IDX = struct.Struct(">QQQII")

DEFAULT_SEGMENT_MAX_ENTRIES = 4096
DEFAULT_SEGMENT_MAX_SIZE_BYTES = 64_000_000

#: ``{FileName, {First, Last}}``: what a ``segments`` event hands a server
SegRef = tuple[str, tuple[int, int]]


class SegmentCorrupt(ValueError):
    """A segment's header, index or an entry's checksum is wrong."""


def file_name(seg_no: int) -> str:
    return f"{seg_no:016d}.segment"


def file_number(name: str) -> int | None:
    stem, dot, ext = name.partition(".")
    if dot and ext == "segment" and len(stem) == 16 and stem.isdigit():
        return int(stem)
    return None


def list_segments(directory: str) -> list[str]:
    """Segment file names of one server directory, oldest first."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(n for n in names if file_number(n) is not None)


def encode(entries: list[Entry], checksums: bool = True) -> bytes:
    """The bytes of a segment holding `entries` (contiguous, non-empty)."""
    first = entries[0][0]
    for n, entry in enumerate(entries):
        if entry[0] != first + n:
            raise ValueError(f"segment entries not contiguous at {entry[0]}")
    return _pack(entries, VERSION, _IDX, lambda e: (e[1],), checksums)


def encode_sparse(entries: list[Entry], checksums: bool = True) -> bytes:
    """The bytes of a sparse segment holding `entries` (ascending, non-empty)."""
    for prev, entry in itertools.pairwise(entries):
        if entry[0] <= prev[0]:
            raise ValueError(f"sparse segment entries not ascending at {entry[0]}")
    return _pack(entries, SPARSE_VERSION, _SPARSE_IDX, lambda e: (e[0], e[1]), checksums)


def _pack(entries: list[Entry], version: int, idx: struct.Struct,
          keys: Callable[[Entry], tuple[int, ...]], checksums: bool) -> bytes:
    """Head, index and pickled commands of a segment: each index record is the
    entry's `keys` (its term; a sparse segment also its index), then the command's
    offset, length and crc."""
    blobs = [pickle.dumps(e[2], protocol=5) for e in entries]
    offset = _HEAD.size + idx.size * len(entries)
    index = bytearray()
    for entry, blob in zip(entries, blobs, strict=True):
        crc = zlib.crc32(blob) if checksums else 0
        index += idx.pack(*keys(entry), offset, len(blob), crc)
        offset += len(blob)
    head = _HEAD.pack(MAGIC, version, len(entries), entries[0][0])
    return b"".join([head, bytes(index), *blobs])


def rewrite_sparse(path: str, entries: list[Entry], *, checksums: bool = True,
                   fsync: Callable[[int], None] = os.fsync) -> SegRef:
    """Replace the segment at `path` by a sparse one holding only `entries`
    (written aside, fsynced, renamed over it); its new ref. Runs off the hub."""
    replace_file(path, encode_sparse(entries, checksums), fsync)
    return (os.path.basename(path), (entries[0][0], entries[-1][0]))


def write(directory: str, seg_no: int, entries: list[Entry], *, checksums: bool = True,
          fsync: Callable[[int], None] = os.fsync) -> SegRef:
    """Write one segment durably; returns its ref. Runs off the hub."""
    name = file_name(seg_no)
    replace_file(os.path.join(directory, name), encode(entries, checksums), fsync)
    return (name, (entries[0][0], entries[-1][0]))


def write_all(directory: str, first_no: int, chunks: list[list[Entry]], *,
              checksums: bool = True, fsync: Callable[[int], None] = os.fsync) -> list[SegRef]:
    """Write the segments of one flush, numbered from `first_no`; their refs. Runs off the hub.

    Each is written under a temporary name and fsynced, then all are renamed and
    the directory is fsynced once: a flush of a full WAL file makes several
    segments, and a directory sync per segment would cost each its own journal
    commit. A crash before the directory sync may leave some of them named and
    some not; none is reported yet and the WAL file is still there, so recovery
    flushes it again into newer segments, which cut these."""
    done: list[tuple[str, str, SegRef]] = []
    for n, chunk in enumerate(chunks):
        name = file_name(first_no + n)
        path = os.path.join(directory, name)
        durable.write_file(path + ".tmp", encode(chunk, checksums), fsync)
        done.append((path + ".tmp", path, (name, (chunk[0][0], chunk[-1][0]))))
    for tmp, path, _ in done:
        os.replace(tmp, path)
    if done:
        durable.fsync_dir(directory)
    return [ref for _, _, ref in done]


@dataclass
class SegmentIndex:
    """A segment's header and index, as read from its file."""

    path: str
    first: int
    #: packed machine words, not lists of ints: a reader caches the indexes of a
    #: server's recently read segments, and a list costs about five times as much
    terms: array[int]
    offsets: array[int]
    lengths: array[int]
    crcs: array[int]
    #: the raft index of every entry of a sparse segment (None: contiguous from `first`)
    idxs: array[int] | None = None

    @property
    def last(self) -> int:
        if self.idxs is not None:
            return self.idxs[-1]
        return self.first + len(self.terms) - 1

    def pos(self, idx: int) -> int:
        """Where entry `idx` sits in the index; KeyError if the segment lacks it."""
        if self.idxs is None:
            n = idx - self.first
            if 0 <= n < len(self.terms):
                return n
        else:
            n = bisect.bisect_left(self.idxs, idx)
            if n < len(self.idxs) and self.idxs[n] == idx:
                return n
        raise KeyError(f"{self.path}: no entry at index {idx}")

    def indexes(self) -> list[int]:
        """Every raft index the segment holds, ascending."""
        if self.idxs is not None:
            return list(self.idxs)
        return list(range(self.first, self.last + 1))


def read_index(path: str) -> SegmentIndex:
    with open(path, "rb") as f:
        head = f.read(_HEAD.size)
        if len(head) < _HEAD.size:
            raise SegmentCorrupt(f"{path}: short header")
        magic, version, count, first = _HEAD.unpack(head)
        if magic != MAGIC or version not in (VERSION, SPARSE_VERSION) or count == 0:
            raise SegmentCorrupt(f"{path}: bad header")
        rec = _IDX if version == VERSION else _SPARSE_IDX
        raw = f.read(rec.size * count)
    if len(raw) < rec.size * count:
        raise SegmentCorrupt(f"{path}: short index")
    terms, offsets = array("Q"), array("Q")
    lengths, crcs = array("I"), array("I")
    if version == VERSION:
        for term, offset, length, crc in _IDX.iter_unpack(raw):
            terms.append(term)
            offsets.append(offset)
            lengths.append(length)
            crcs.append(crc)
        return SegmentIndex(path, first, terms, offsets, lengths, crcs)
    idxs = array("Q")
    for idx, term, offset, length, crc in _SPARSE_IDX.iter_unpack(raw):
        idxs.append(idx)
        terms.append(term)
        offsets.append(offset)
        lengths.append(length)
        crcs.append(crc)
    return SegmentIndex(path, first, terms, offsets, lengths, crcs, idxs)


class SegmentReader:
    """Reads entries of one server's segments, keeping a few indexes cached."""

    def __init__(self, max_cached: int = 16) -> None:
        self._cache: OrderedDict[str, SegmentIndex] = OrderedDict()
        self._max = max_cached

    def index(self, path: str) -> SegmentIndex:
        idx = self._cache.get(path)
        if idx is None:
            idx = read_index(path)
            self._cache[path] = idx
            while len(self._cache) > self._max:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(path)
        return idx

    def forget(self, path: str) -> None:
        self._cache.pop(path, None)

    def term(self, path: str, idx: int) -> int:
        seg = self.index(path)
        return seg.terms[seg.pos(idx)]

    def read(self, path: str, lo: int, hi: int) -> list[Entry]:
        """Entries ``lo..hi`` (inclusive, within the segment) with one read; a sparse
        segment gives those of its entries that lie in the range."""
        seg = self.index(path)
        if seg.idxs is not None:
            a = bisect.bisect_left(seg.idxs, lo)
            b = bisect.bisect_right(seg.idxs, hi) - 1
            if b < a:
                return []
        else:
            a, b = lo - seg.first, hi - seg.first
        start = seg.offsets[a]
        end = seg.offsets[b] + seg.lengths[b]
        fd = os.open(path, os.O_RDONLY)
        try:
            data = os.pread(fd, end - start, start)
        finally:
            os.close(fd)
        out: list[Entry] = []
        for n in range(a, b + 1):
            off = seg.offsets[n] - start
            blob = data[off: off + seg.lengths[n]]
            idx = seg.first + n if seg.idxs is None else seg.idxs[n]
            if seg.crcs[n] and zlib.crc32(blob) != seg.crcs[n]:
                raise SegmentCorrupt(f"{path}: checksum failure at index {idx}")
            out.append((idx, seg.terms[n], stored_terms.loads(blob)))
        return out
