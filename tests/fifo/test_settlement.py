"""Settle, return, discard, modify, requeue, delivery limit."""

from __future__ import annotations

from fifo import (
    make_checkout,
    make_discard,
    make_modify,
    make_requeue,
    make_return,
    make_settle,
)
from fifo.msg import unpack

from .helpers import Driver, bodies, delivered_ids, pid

P1 = pid(1)
C1 = pid(10)
COUNTER = ("mod_call", "rabbit_global_counters", "messages_dead_lettered")


def setup(n: int = 3, prefetch: int = 10, **cfg) -> Driver:
    """`n` messages checked out to consumer key n+1 (tag "ct")."""
    d = Driver(**cfg)
    for i in range(1, n + 1):
        d.enqueue(P1, i, f"m{i}".encode())
    d.apply(make_checkout(("ct", C1), ("auto", ("simple_prefetch", prefetch)), {}))
    return d


class TestSettle:
    def test_settle_removes_messages_and_restores_credit(self) -> None:
        d = setup(3, prefetch=3)
        assert d.state.consumers[4].credit == 0
        reply, effects = d.apply(make_settle(4, [0, 2]))
        assert (reply, effects) == ("ok", [])
        s = d.state
        c = s.consumers[4]
        assert (sorted(c.checked_out), c.credit) == ([1], 2)
        assert (s.messages_total, s.msg_bytes_checkout) == (1, 2)
        assert s.ra_indexes.to_list() == [2]

    def test_settle_by_consumer_id_resolves_the_key(self) -> None:
        d = setup(1)
        d.apply(make_settle(("ct", C1), [0]))
        assert d.state.messages_total == 0

    def test_unknown_consumer_and_unknown_ids_are_ignored(self) -> None:
        d = setup(1)
        assert d.apply(make_settle(99, [0])) == ("ok", [])
        d.apply(make_settle(2, [5]))
        assert d.state.messages_total == 1

    def test_credit_is_capped_at_prefetch(self) -> None:
        d = setup(2, prefetch=5)
        d.apply(make_settle(3, [0, 1]))
        assert d.state.consumers[3].credit == 5

    def test_settle_frees_credit_for_the_next_delivery(self) -> None:
        d = setup(3, prefetch=1)
        _, effects = d.apply(make_settle(4, [0]))
        assert delivered_ids(d, effects) == [1]


class TestReturn:
    def test_return_puts_messages_at_the_tail_of_returns_in_given_order(self) -> None:
        d = setup(3, prefetch=3)
        reply, effects = d.apply(make_return(4, [2, 0, 1]))
        assert reply == "ok"
        assert bodies(d, effects) == [b"m3", b"m1", b"m2"]  # redelivered in return order
        c = d.state.consumers[4]
        assert [unpack(m)[1] for m in c.checked_out.values()] == [
            {"size": 2, "acquired_count": 1}] * 3

    def test_return_keeps_messages_ready_when_no_credit(self) -> None:
        d = setup(2, prefetch=2)
        d.apply(make_checkout(("ct", C1), "cancel", {}))
        d.apply(make_return(3, [1, 0]))
        s = d.state
        assert [unpack(m)[0] for m in s.returns] == [2, 1]
        assert (s.msg_bytes_enqueue, s.msg_bytes_checkout, s.messages_total) == (4, 0, 2)
        assert s.consumers == {}

    def test_v7_delivery_limit_counts_every_return(self) -> None:
        d = setup(1, prefetch=1, delivery_limit=1)
        _, e1 = d.apply(make_return(2, [0]))
        assert delivered_ids(d, e1) == [1]  # acquired_count 1, not > 1
        _, e2 = d.apply(make_return(2, [1]))
        assert e2 == [(*COUNTER, ["delivery_limit", "rabbit_quorum_queue", "disabled", 1])]
        assert d.state.messages_total == 0 and d.state.consumers[2].credit == 1

    def test_limit_allows_n_plus_one_deliveries(self) -> None:
        d = setup(1, prefetch=1, delivery_limit=2)
        deliveries = 1
        msg_id = 0
        while True:
            _, eff = d.apply(make_return(2, [msg_id]))
            ids = delivered_ids(d, eff)
            if not ids:
                break
            deliveries += 1
            msg_id = ids[0]
        assert deliveries == 3

    def test_no_limit_never_dead_letters(self) -> None:
        d = setup(1, prefetch=1)
        for i in range(30):
            d.apply(make_return(2, [i]))
        assert d.state.messages_total == 1


class TestDiscard:
    def test_discard_dead_letters_with_failed_delivery_counters(self) -> None:
        d = setup(2, dead_letter_handler=("at_most_once", ("mod", "dlx_fun", ["a"])))
        reply, effects = d.apply(make_discard(3, [1, 0]))
        assert reply == "ok"
        kind, idxs, fun = effects[0]
        assert (kind, idxs) == ("log", [2, 1])
        assert fun([d.log[2], d.log[1]]) == [("mod_call", "mod", "dlx_fun",
                                              ["a", "rejected", [b"m2", b"m1"]])]
        assert d.state.messages_total == 0 and d.state.consumers[3].credit == 10

    def test_discard_without_handler_counts_disabled(self) -> None:
        d = setup(1)
        _, effects = d.apply(make_discard(2, [0]))
        assert effects == [(*COUNTER, ["rejected", "rabbit_quorum_queue", "disabled", 1])]

    def test_discard_unknown_consumer(self) -> None:
        d = setup(1)
        assert d.apply(make_discard(77, [0])) == ("ok", [])

    def test_machine_version_4_discard_only_accepts_the_exact_key(self) -> None:
        d = Driver(machine_version=4)
        d.enqueue(P1, 1, b"a")
        d.apply(make_checkout(("ct", C1), ("auto", ("simple_prefetch", 1)), {}))
        assert d.apply(make_discard(("ct", C1), [0])) == ("ok", [])
        assert d.state.messages_total == 1


class TestModify:
    def test_modify_requeue_merges_annotations(self) -> None:
        d = setup(1, prefetch=1)
        d.apply(make_checkout(("ct", C1), "cancel", {}))
        d.apply(make_modify(2, [0], True, False, {"x-opt-k": "v"}))
        assert [unpack(m)[1] for m in d.state.returns] == [
            {"size": 2, "acquired_count": 1, "anns": {"x-opt-k": "v"}, "delivery_count": 1}]

    def test_modify_undeliverable_dead_letters(self) -> None:
        d = setup(1, dead_letter_handler="at_least_once")
        d.apply(make_modify(2, [0], False, True, {}))
        (reason, m), = d.state.dlx.discards
        assert reason == "rejected"
        assert unpack(m) == (1, {"size": 2, "acquired_count": 1})


class TestRequeue:
    def test_requeue_appends_to_the_back_at_the_new_index(self) -> None:
        d = setup(2, prefetch=1)
        d.apply(make_checkout(("ct", C1), "cancel", {}))
        d.apply(make_requeue(3, 0, 1, 2, b"m1"))  # applied at index 5
        s = d.state
        assert [unpack(m) for m in s.messages.no] == [(2, 2), (5, {"size": 2,
                                                                   "acquired_count": 1})]
        assert s.ra_indexes.to_list() == []
        assert s.enqueue_count == 3

    def test_requeue_of_a_settled_message_is_a_no_op(self) -> None:
        d = setup(1)
        d.apply(make_settle(2, [0]))
        assert d.apply(make_requeue(2, 0, 1, 2, b"m1")) == ("ok", [])
