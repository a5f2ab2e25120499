"""`ra_seq`: sparse index sequences, ordered high to low.

Elements are ints or inclusive ``(lo, hi)`` ranges, e.g. ``[55, (20, 52), 3]``.
WAL ``written`` events and memtable flush specs carry this form, and
conformance checks compare it literally, so the collapsing rule matters:
a range only appears once three consecutive indexes exist.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

SeqElem = int | tuple[int, int]
Seq = list[SeqElem]


def _hi(elem: SeqElem) -> int:
    return elem[1] if isinstance(elem, tuple) else elem


def _lo(elem: SeqElem) -> int:
    return elem[0] if isinstance(elem, tuple) else elem


def append(idx: int, seq: Seq) -> Seq:
    """Add an index above every index already present (returns a new list)."""
    if (
        len(seq) >= 2
        and isinstance(seq[0], int)
        and isinstance(seq[1], int)
        and idx == seq[0] + 1
        and idx == seq[1] + 2
    ):
        return [(seq[1], idx), *seq[2:]]
    if seq and isinstance(seq[0], tuple) and idx == seq[0][1] + 1:
        return [(seq[0][0], idx), *seq[1:]]
    if seq and idx <= _hi(seq[0]):
        raise ValueError(f"ra_seq append of {idx} not above {_hi(seq[0])}")
    return [idx, *seq]


def from_list(indexes: Iterable[int]) -> Seq:
    """The sequence `append` builds from `indexes` one by one, in one pass over their
    runs of consecutive indexes: a run of three or more is one range, a shorter one
    its indexes (a flush hands over thousands of indexes, and `append` copies the
    list each time)."""
    low_first: Seq = []
    lo = hi = -1
    for idx in sorted(set(indexes)):
        if hi >= 0 and idx == hi + 1:
            hi = idx
            continue
        if hi >= 0:
            _add_run(low_first, lo, hi)
        lo = hi = idx
    if hi >= 0:
        _add_run(low_first, lo, hi)
    low_first.reverse()
    return low_first


def _add_run(low_first: Seq, lo: int, hi: int) -> None:
    if hi - lo >= 2:
        low_first.append((lo, hi))
    else:
        low_first.extend(range(lo, hi + 1))


def expand(seq: Seq) -> list[int]:
    """All indexes, low to high."""
    return list(iterate(seq))


def iterate(seq: Seq) -> Iterator[int]:
    for elem in reversed(seq):
        if isinstance(elem, tuple):
            yield from range(elem[0], elem[1] + 1)
        else:
            yield elem


def first(seq: Seq) -> int | None:
    return _lo(seq[-1]) if seq else None


def last(seq: Seq) -> int | None:
    return _hi(seq[0]) if seq else None


def length(seq: Seq) -> int:
    return sum(_hi(e) - _lo(e) + 1 for e in seq)


def limit(ceil_incl: int, seq: Seq) -> Seq:
    """Drop every index above `ceil_incl`, re-encoding a cut range like Ra."""
    out = list(seq)
    while out:
        head = out[0]
        if isinstance(head, int):
            if head > ceil_incl:
                out.pop(0)
                continue
            return out
        lo, hi = head
        if hi <= ceil_incl:
            return out
        out.pop(0)
        if lo > ceil_incl:
            continue
        new_hi = ceil_incl
        if lo == new_hi:
            return [lo, *out]
        if lo == new_hi - 1:
            return [new_hi, lo, *out]
        return [(lo, new_hi), *out]
    return out


def floor(floor_incl: int, seq: Seq) -> Seq:
    """Drop every index below `floor_incl`."""
    return from_list(i for i in iterate(seq) if i >= floor_incl)


def remove_prefix(prefix: Seq, seq: Seq) -> Seq | None:
    """Drop from `seq` the low indexes confirmed by `prefix`; ``None`` if
    `seq` holds an index below the next one `prefix` confirms.

    The log matches a WAL ``written`` sequence against what it has pending
    this way: prefix indexes that are no longer pending are skipped, but a
    pending index the WAL skipped means a write went missing.
    """
    pre = expand(prefix)
    full = expand(seq)
    i = j = 0
    while i < len(pre) and j < len(full):
        if pre[i] == full[j]:
            i += 1
            j += 1
        elif pre[i] < full[j]:
            i += 1
        else:
            return None
    return from_list(full[j:])


def contains(idx: int, seq: Seq) -> bool:
    return any(_lo(e) <= idx <= _hi(e) for e in seq)
