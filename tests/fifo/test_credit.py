"""Credit: simple prefetch, credited consumers, drain, serial arithmetic."""

from __future__ import annotations

from fifo import make_checkout, make_credit

from .helpers import Driver, delivered_ids, pid

P1 = pid(1)
C1 = pid(10)


def credited(dc: int, n_msgs: int = 2) -> Driver:
    d = Driver()
    for i in range(1, n_msgs + 1):
        d.enqueue(P1, i, b"x")
    d.apply(make_checkout(("ct", C1), ("auto", ("credited", dc)), {}))
    d.key = d.index  # type: ignore[attr-defined]
    return d


def test_credit_and_drain_worked_example() -> None:
    d = credited(0xFFFFFFFE)
    key = 3
    reply, effects = d.apply(make_credit(key, 4, 0xFFFFFFFE, True))
    assert reply == "ok"
    assert delivered_ids(d, effects) == [0, 1]
    assert effects[-1] == ("send_msg", C1, ("credit_reply", "ct", 2, 0, 0, True),
                           ["local", "ra_event"])
    c = d.state.consumers[key]
    assert (c.credit, c.delivery_count) == (0, 2)


def test_credited_consumer_starts_without_credit() -> None:
    d = credited(0)
    assert d.state.consumers[3].credit == 0 and len(d.state.consumers[3].checked_out) == 0


def test_credit_without_drain_keeps_the_rest() -> None:
    d = credited(0, n_msgs=1)
    _, effects = d.apply(make_credit(d.key, 5, 0, False))
    assert effects[-1][2] == ("credit_reply", "ct", 1, 4, 0, False)
    assert d.state.consumers[d.key].credit == 4


def test_stale_credit_is_floored_at_zero() -> None:
    d = credited(0, n_msgs=3)
    d.apply(make_credit(d.key, 2, 0, False))  # delivers 2, delivery_count 2
    _, effects = d.apply(make_credit(d.key, 1, 0, False))  # receiver lags: 0 + 1 - 2 < 0
    assert effects == [("send_msg", C1, ("credit_reply", "ct", 2, 0, 1, False),
                        ["local", "ra_event"])]


def test_settlements_never_add_credit_to_credited_consumers() -> None:
    from fifo import make_settle

    d = credited(0, n_msgs=2)
    d.apply(make_credit(3, 1, 0, False))
    d.apply(make_settle(3, [0]))
    assert d.state.consumers[3].credit == 0


def test_credit_for_unknown_key_is_ignored() -> None:
    d = credited(0)
    assert d.apply(make_credit(99, 1, 0, False)) == ("ok", [])


def test_legacy_simple_prefetch_credit_uses_plain_integers_and_v1_replies() -> None:
    d = Driver()
    d.apply(make_checkout(("ct", C1), ("auto", ("simple_prefetch", 0)), {}))
    d.enqueue(P1, 1, b"x")
    reply, effects = d.apply(make_credit(1, 3, 0, True))
    assert reply == ("multi", [("send_credit_reply", 0), ("send_drained", ("ct", 2))])
    assert delivered_ids(d, effects) == [0]
    assert d.state.consumers[1].delivery_count == 3


def test_sac_waiting_consumer_gets_credit_but_no_delivery() -> None:
    d = Driver(single_active_consumer_on=True)
    d.enqueue(P1, 1, b"x")
    d.apply(make_checkout(("a", pid(10)), ("auto", ("credited", 0)), {}))
    d.apply(make_checkout(("b", pid(11)), ("auto", ("credited", 0)), {}))
    reply, effects = d.apply(make_credit(3, 5, 0, True))
    assert (reply, effects) == ("ok", [("send_msg", pid(11),
                                        ("credit_reply", "b", 5, 0, 0, True),
                                        ["local", "ra_event"])])
    assert d.state.waiting_consumers[0][1].delivery_count == 5
