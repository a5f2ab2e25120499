"""Message references, headers, the 2:1 priority queue and delivery chunking."""

from __future__ import annotations

import pytest

from fifo import serial_number
from fifo.delivery import chunk_disk_msgs
from fifo.fifo_q import FifoQ
from fifo.index import RaIndexes
from fifo.msg import get_header, incr_msg, make_msg, msg_header, msg_idx, unpack, update_header
from fifo.service_queue import ServiceQueue


class TestHeaders:
    def test_size_only_header_is_packed_into_one_int(self) -> None:
        m = make_msg(5, 100)
        assert isinstance(m, int)
        assert (msg_idx(m), msg_header(m)) == (5, 100)

    def test_rich_header_is_a_pair(self) -> None:
        assert make_msg(5, (100, 2000)) == (5, (100, 2000))

    def test_get_header_over_all_forms(self) -> None:
        assert get_header("size", 10) == 10
        assert get_header("expiry", 10) is None
        assert get_header("expiry", (10, 99)) == 99
        assert get_header("acquired_count", (10, 99)) is None
        assert get_header("acquired_count", {"size": 1, "acquired_count": 3}) == 3

    @pytest.mark.parametrize(
        ("key", "header", "expected"),
        [
            ("expiry", 10, (10, 77)),
            ("acquired_count", 10, {"size": 10, "acquired_count": 77}),
            ("acquired_count", (10, 5), {"size": 10, "expiry": 5, "acquired_count": 77}),
            ("acquired_count", {"size": 10, "acquired_count": 1},
             {"size": 10, "acquired_count": 2}),
        ],
    )
    def test_update_header_upgrades_only_as_far_as_needed(self, key, header, expected) -> None:
        assert update_header(key, lambda n: n + 1, 77, header) == expected

    def test_update_header_never_mutates_the_given_header(self) -> None:
        h = {"size": 1, "acquired_count": 1}
        update_header("acquired_count", lambda n: n + 1, 1, h)
        assert h == {"size": 1, "acquired_count": 1}

    def test_incr_msg_counts_acquisitions_and_only_failed_deliveries(self) -> None:
        m = incr_msg(make_msg(3, 10), False, {})
        assert unpack(m) == (3, {"size": 10, "acquired_count": 1})
        m = incr_msg(m, True, {"x-opt-a": 1})
        assert unpack(m) == (3, {"size": 10, "acquired_count": 2, "anns": {"x-opt-a": 1},
                                 "delivery_count": 1})
        m = incr_msg(m, False, {"x-opt-b": 2})
        assert msg_header(m)["anns"] == {"x-opt-a": 1, "x-opt-b": 2}


def _q(items: list[tuple[str, int]]) -> FifoQ:
    q = FifoQ()
    for tag, idx in items:
        q.in_(tag, make_msg(idx, 1))  # type: ignore[arg-type]
    return q


def _drain(q: FifoQ) -> list[int]:
    out = []
    while (m := q.out()) is not None:
        out.append(msg_idx(m))
    return out


class TestFifoQ:
    def test_spec_example_interleaved(self) -> None:
        q = _q([("hi", 1), ("no", 2), ("hi", 3), ("no", 4), ("hi", 5)])
        assert _drain(q) == [1, 3, 2, 5, 4]

    def test_normal_first_then_high_gives_two_high_per_normal(self) -> None:
        # priorities 0..4 published first (indexes 1..5), then 5..14 (indexes 6..15)
        q = _q([("no", i) for i in range(1, 6)] + [("hi", i) for i in range(6, 16)])
        # a message's priority is its index - 1
        assert [i - 1 for i in _drain(q)] == [5, 6, 0, 7, 8, 1, 9, 10, 2, 11, 12, 3, 13,
                                                    14, 4]

    def test_older_high_messages_all_go_first(self) -> None:
        q = _q([("hi", i) for i in range(1, 7)] + [("no", i) for i in range(7, 12)])
        assert _drain(q) == list(range(1, 12))

    def test_counter_cycles_on_every_out(self) -> None:
        q = _q([("no", 1), ("no", 2), ("no", 3), ("no", 4)])
        counters = []
        while q.out() is not None:
            counters.append(q.dequeue_counter)
        assert counters == [1, 2, 0, 1]

    def test_get_peeks_what_out_takes(self) -> None:
        q = _q([("no", 1), ("hi", 2)])
        assert msg_idx(q.get()) == 2
        assert len(q) == 2
        assert q.get_lowest_index() == 1
        assert [msg_idx(m) for m in q.drain_order()] == [2, 1]
        assert len(q) == 2

    def test_empty(self) -> None:
        q = FifoQ()
        assert q.out() is None and q.get() is None and q.get_lowest_index() is None


class TestRaIndexes:
    def test_smallest_tracks_deletes(self) -> None:
        ix = RaIndexes()
        for i in (5, 3, 9):
            ix.append(i)
        assert ix.smallest() == 3
        ix.delete(3)
        assert ix.smallest() == 5
        ix.delete(5)
        ix.delete(9)
        assert ix.smallest() is None and len(ix) == 0

    def test_many_deletes_compact_the_heap(self) -> None:
        ix = RaIndexes()
        ix.append(1)
        for i in range(2, 1000):
            ix.append(i)
            ix.delete(i)
        assert ix.smallest() == 1 and len(ix._heap) < 200


class TestServiceQueue:
    def test_highest_priority_first_fifo_within(self) -> None:
        sq = ServiceQueue()
        sq.in_("a", 0)
        sq.in_("b", 5)
        sq.in_("c", 0)
        sq.in_("d", 5)
        assert [sq.out() for _ in range(5)] == ["b", "d", "a", "c", None]

    def test_membership(self) -> None:
        sq = ServiceQueue()
        sq.in_(1, 0)
        assert 1 in sq and sq.peek() == 1
        sq.out()
        assert 1 not in sq and sq.is_empty()


class TestChunking:
    def test_200_messages_of_1000_bytes(self) -> None:
        msgs = [(i, make_msg(i + 1, 1000)) for i in range(200)]
        chunks = chunk_disk_msgs(msgs)
        assert [len(c) for c in chunks] == [72, 128]
        assert [mid for c in chunks for mid, _ in c] == list(range(200))

    def test_two_large_messages_one_chunk_each(self) -> None:
        msgs = [(0, make_msg(1, 200_000)), (1, make_msg(2, 200_000))]
        assert chunk_disk_msgs(msgs) == [[msgs[0]], [msgs[1]]]

    def test_small_batch_is_one_chunk(self) -> None:
        msgs = [(0, make_msg(1, 10)), (1, make_msg(2, 10))]
        assert chunk_disk_msgs(msgs) == [msgs]


class TestSerialNumbers:
    def test_wraps_at_2_32(self) -> None:
        assert serial_number.add(0xFFFFFFFE, 4) == 2
        assert serial_number.diff(2, 0xFFFFFFFE) == 4
        assert serial_number.diff(0xFFFFFFFE, 2) == -4

    def test_addend_bounded(self) -> None:
        with pytest.raises(ValueError):
            serial_number.add(0, 1 << 31)
