"""Publisher-confirm bookkeeping and frame coalescing; pending-ack selection."""

from __future__ import annotations

import pytest

from channel.connection.confirms import Confirm, Unconfirmed, coalesce
from channel.connection.unacked import Pending, Unacked
from channel.errors import AmqpError


def test_seqno_is_confirmed_when_the_last_queue_confirms() -> None:
    uc = Unconfirmed()
    uc.insert(1, "x", ["q1", "q2"])
    assert uc.confirm([1], "q1") == []
    assert uc.confirm([1, 99], "q2") == [1]
    assert len(uc) == 0


def test_first_rejection_wins_and_later_confirms_are_ignored() -> None:
    uc = Unconfirmed()
    uc.insert(1, "x", ["q1", "q2"])
    assert uc.reject([1]) == [1]
    assert uc.confirm([1], "q1") == []
    assert uc.reject([1]) == []


def test_deleted_queue_confirms_what_it_owed() -> None:
    uc = Unconfirmed()
    uc.insert(1, "x", ["q1"])
    uc.insert(2, "x", ["q1", "q2"])
    uc.insert(3, "x", ["q2"])
    assert uc.queue_gone("q1") == [1]
    assert uc.smallest() == 2


@pytest.mark.parametrize(
    ("confirmed", "rejected", "smallest", "frames"),
    [
        ([5], [], None, [Confirm(True, 5, False)]),
        ([1, 2, 3], [], None, [Confirm(True, 3, True)]),
        ([1, 2, 3], [], 3, [Confirm(True, 2, True), Confirm(True, 3, False)]),
        ([1, 2, 5, 6], [], 4, [Confirm(True, 2, True), Confirm(True, 5, False),
                               Confirm(True, 6, False)]),
        ([3, 1, 2], [], None, [Confirm(True, 3, True)]),
        ([1, 2, 4], [3], None, [Confirm(True, 2, True), Confirm(True, 4, False),
                                Confirm(False, 3, False)]),
        ([], [7], None, [Confirm(False, 7, True)]),
        ([], [7, 8], 5, [Confirm(False, 7, False), Confirm(False, 8, False)]),
        ([], [], None, []),
    ],
)
def test_coalescing(confirmed: list[int], rejected: list[int], smallest: int | None,
                    frames: list[Confirm]) -> None:
    assert coalesce(confirmed, rejected, smallest) == frames


def test_multiple_never_covers_an_outstanding_seqno() -> None:
    uc = Unconfirmed()
    for s in range(1, 11):
        uc.insert(s, "x", ["q"])
    seen: set[int] = set()
    high_multiple = 0
    for batch in ([2, 3], [1], [5, 6, 7], [4], [10], [8, 9]):
        done = uc.confirm(batch, "q")
        for f in coalesce(done, [], uc.smallest()):
            assert f.tag > high_multiple
            if f.multiple:
                covered = {t for t in range(high_multiple + 1, f.tag + 1)} - seen
                assert all(t not in uc.pending for t in covered)
                seen |= covered
                high_multiple = f.tag
            else:
                seen.add(f.tag)
    assert seen == set(range(1, 11))


def records(*tags: int) -> Unacked:
    u = Unacked()
    for t in tags:
        u.add(Pending(t, "ctag", "q", t * 10))
    return u


@pytest.mark.parametrize(
    ("tag", "multiple", "taken", "left"),
    [
        (2, False, [2], [1, 3]),
        (2, True, [1, 2], [3]),
        (0, True, [1, 2, 3], []),
        (3, True, [1, 2, 3], []),
    ],
)
def test_collect_acks(tag: int, multiple: bool, taken: list[int], left: list[int]) -> None:
    u = records(1, 2, 3)
    assert [r.tag for r in u.collect(tag, multiple)] == taken
    assert list(u.records) == left


@pytest.mark.parametrize(("tag", "multiple"), [(9, False), (9, True), (0, False)])
def test_unknown_delivery_tag_is_406(tag: int, multiple: bool) -> None:
    u = records(1, 2)
    with pytest.raises(AmqpError) as info:
        u.collect(tag, multiple)
    assert info.value.reply_text == f"PRECONDITION_FAILED - unknown delivery tag {tag}"
    assert list(u.records) == [1, 2]


def test_acking_twice_fails_the_second_time_and_multiple_zero_never_fails() -> None:
    u = records(1)
    u.collect(1, False)
    with pytest.raises(AmqpError):
        u.collect(1, False)
    assert u.collect(0, True) == []


def test_restore_keeps_tag_order() -> None:
    u = records(1, 2, 3, 4)
    taken = u.collect(2, True)
    u.restore(taken)
    assert list(u.records) == [1, 2, 3, 4]
