"""Enqueue and register_enqueuer: sequence numbers, gaps, duplicates."""

from __future__ import annotations

from fifo import make_checkout, make_enqueue, make_register_enqueuer
from fifo.commands import Enqueue
from fifo.mc import BasicMessage
from fifo.msg import unpack
from fifo.records import Enqueuer

from .helpers import Driver, pid

P1 = pid(1)


def test_first_tracked_enqueue_registers_and_monitors_the_publisher() -> None:
    d = Driver()
    reply, effects = d.enqueue(P1, 1, b"hello")
    assert reply == "ok"
    assert effects == [("monitor", "process", P1), ("aux", ("bytes_in", (0, 5)))]
    s = d.state
    assert s.enqueuers == {P1: Enqueuer(next_seqno=2)}
    assert s.messages_total == 1 and s.msg_bytes_enqueue == 5 and s.enqueue_count == 1
    assert [unpack(m) for m in s.messages.no] == [(1, 5)]
    assert s.msg_cache is None


def test_next_sequence_number_is_accepted_without_new_monitor() -> None:
    d = Driver()
    d.enqueue(P1, 1, b"a")
    reply, effects = d.enqueue(P1, 2, b"bb")
    assert (reply, effects) == ("ok", [("aux", ("bytes_in", (0, 2)))])
    assert d.state.enqueuers[P1].next_seqno == 3
    assert len(d.state.messages) == 2


def test_gap_is_not_enqueued_and_keeps_next_seqno() -> None:
    d = Driver()
    d.enqueue(P1, 1, b"a")
    reply, effects = d.enqueue(P1, 3, b"c")
    assert (reply, effects) == ("not_enqueued", [("aux", ("bytes_in", (0, 1)))])
    assert d.state.enqueuers[P1].next_seqno == 2
    assert d.state.messages_total == 1


def test_gap_from_an_unknown_publisher_still_registers_it() -> None:
    d = Driver()
    reply, effects = d.enqueue(P1, 5, b"e")
    assert reply == "not_enqueued"
    assert effects == [("monitor", "process", P1), ("aux", ("bytes_in", (0, 1)))]
    assert d.state.enqueuers[P1].next_seqno == 1
    assert d.state.messages_total == 0


def test_duplicate_is_confirmed_but_not_enqueued_again() -> None:
    d = Driver()
    d.enqueue(P1, 1, b"a")
    d.enqueue(P1, 2, b"b")
    reply, effects = d.enqueue(P1, 1, b"a")
    assert (reply, effects) == ("ok", [("aux", ("bytes_in", (0, 1)))])
    assert d.state.messages_total == 2 and d.state.enqueuers[P1].next_seqno == 3


def test_untracked_enqueue_has_no_enqueuer_and_no_monitor() -> None:
    d = Driver()
    cmd = make_enqueue(None, None, b"xyz")
    assert cmd == Enqueue("enqueue", None, None, b"xyz") == ("enqueue", None, None, b"xyz")
    reply, effects = d.apply(cmd)
    assert (reply, effects) == ("ok", [("aux", ("bytes_in", (0, 3)))])
    assert d.state.enqueuers == {} and d.state.messages_total == 1


def test_compact_enqueue_without_notify_reply_mode_is_ignored() -> None:
    d = Driver()
    reply, effects = d.apply(make_enqueue(P1, 1, b"a"), reply_mode="noreply")
    assert (reply, effects) == ("ok", [])
    assert d.state.messages_total == 0 and d.state.enqueuers == {}


def test_message_straight_to_a_waiting_consumer_is_sent_from_the_cache() -> None:
    d = Driver()
    c = pid(2)
    d.apply(make_checkout(("t", c), ("auto", ("simple_prefetch", 5)), {}))
    reply, effects = d.enqueue(P1, 1, b"body")
    assert reply == "ok"
    assert effects[-1] == ("send_msg", c, ("delivery", "t", [(0, (4, b"body"))]),
                           ["local", "ra_event"])
    assert d.state.msg_cache is None  # cleared at the end of checkout


def test_delivery_count_annotation_is_copied_into_the_header() -> None:
    d = Driver()
    d.enqueue(P1, 1, BasicMessage(b"ab", annotations={"delivery_count": 3}))
    assert unpack(d.state.messages.no[0]) == (1, {"size": 2, "delivery_count": 3})


def test_priority_above_four_goes_to_the_high_bucket() -> None:
    d = Driver()
    d.enqueue(P1, 1, BasicMessage(b"a", priority=4))
    d.enqueue(P1, 2, BasicMessage(b"a", priority=5))
    d.enqueue(P1, 3, b"raw")
    assert [unpack(m)[0] for m in d.state.messages.hi] == [2]
    assert [unpack(m)[0] for m in d.state.messages.no] == [1, 3]


def test_size_is_the_payload_size_only_in_v7() -> None:
    d = Driver()
    d.enqueue(P1, 1, BasicMessage(b"abc", metadata_size=50))
    assert unpack(d.state.messages.no[0]) == (1, 3)
    assert d.state.msg_bytes_enqueue == 3


class TestRegisterEnqueuer:
    def test_registers_and_monitors(self) -> None:
        d = Driver()
        assert d.apply(make_register_enqueuer(P1)) == ("ok", [("monitor", "process", P1)])
        assert d.state.enqueuers == {P1: Enqueuer()}

    def test_existing_enqueuer_is_kept(self) -> None:
        d = Driver()
        d.enqueue(P1, 1, b"a")
        d.apply(make_register_enqueuer(P1))
        assert d.state.enqueuers[P1].next_seqno == 2

    def test_rejects_while_over_the_limit_with_reject_publish(self) -> None:
        d = Driver(max_length=1, overflow_strategy="reject_publish")
        d.enqueue(P1, 1, b"a")
        d.enqueue(P1, 2, b"b")
        assert d.apply(make_register_enqueuer(pid(9))) == (
            "reject_publish", [("monitor", "process", pid(9))])

    def test_drop_head_never_rejects(self) -> None:
        d = Driver(max_length=1)
        d.enqueue(P1, 1, b"a")
        assert d.apply(make_register_enqueuer(pid(9)))[0] == "ok"
