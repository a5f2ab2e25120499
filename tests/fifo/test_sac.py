"""Single active consumer: activation, waiting order, priorities, quiescing."""

from __future__ import annotations

from fifo import make_checkout, make_settle
from fifo.queries import query_single_active_consumer

from .helpers import N2, QNAME, Driver, delivered_ids, pid

P1 = pid(1)
A = pid(10)
B = pid(11)
C = pid(12, N2)


def upd(tag: str, p, active: bool, status: str) -> tuple:
    return ("mod_call", "rabbit_quorum_queue", "update_consumer_handler",
            [QNAME, (tag, p), False, None, None, active, status, []])


def sac(**cfg) -> Driver:
    return Driver(single_active_consumer_on=True, **cfg)


def consume(d: Driver, tag: str, p, prefetch: int = 10, prio: int = 0):
    return d.apply(make_checkout((tag, p), ("auto", ("simple_prefetch", prefetch)),
                                 {"priority": prio}))


def test_first_consumer_is_activated_second_waits() -> None:
    d = sac()
    reply, effects = consume(d, "a", A)
    assert reply[1]["is_active"] is False  # v7 quirk: always false for SAC
    assert effects == [("monitor", "process", A), upd("a", A, True, "single_active")]
    consume(d, "b", B)
    assert list(d.state.consumers) == [1]
    assert [k for k, _ in d.state.waiting_consumers] == [2]
    assert query_single_active_consumer(d.state) == ("value", ("a", A))


def test_only_the_active_consumer_receives() -> None:
    d = sac()
    consume(d, "a", A)
    consume(d, "b", B)
    _, effects = d.enqueue(P1, 1, b"x")
    assert [e[1] for e in effects if e[0] == "send_msg"] == [A]


def test_cancel_of_the_active_consumer_activates_the_next_one_at_once() -> None:
    d = sac()
    d.enqueue(P1, 1, b"x")
    consume(d, "a", A)  # key 2, holds msg 0
    consume(d, "b", B)  # key 3
    reply, effects = d.apply(make_checkout(("a", A), "cancel", {}))
    assert reply == ("ok", {"key": 2, "num_checked_out": 1})
    assert upd("b", B, True, "single_active") in effects
    _, effects = d.enqueue(P1, 2, b"y")
    assert [e[1] for e in effects if e[0] == "send_msg"] == [B]  # overlap with a's unacked
    d.apply(make_settle(2, [0]))
    assert list(d.state.consumers) == [3]


def test_waiting_list_sorted_by_priority_then_credit_then_key() -> None:
    d = sac()
    consume(d, "a", A, prio=9)
    consume(d, "b", B, prefetch=1)
    consume(d, "c", pid(13), prefetch=5)
    consume(d, "d", pid(14), prefetch=5, prio=1)
    assert [k for k, _ in d.state.waiting_consumers] == [4, 3, 2]


def test_higher_priority_takes_over_an_idle_active_consumer() -> None:
    d = sac()
    consume(d, "a", A)
    _, effects = consume(d, "b", B, prio=5)
    assert effects[1:] == [upd("a", A, False, "waiting"), upd("b", B, True, "single_active")]
    assert list(d.state.consumers) == [2]
    assert [k for k, _ in d.state.waiting_consumers] == [1]


def test_busy_active_consumer_quiesces_then_hands_over() -> None:
    d = sac()
    d.enqueue(P1, 1, b"x")
    consume(d, "a", A)  # key 2 holds one message
    consume(d, "b", B, prio=5)  # key 3
    assert d.state.consumers[2].status == "quiescing"
    _, effects = d.enqueue(P1, 2, b"y")
    assert delivered_ids(d, effects) == []  # quiescing: nothing new
    _, effects = d.apply(make_settle(2, [0]))
    assert effects[:2] == [upd("a", A, False, "waiting"), upd("b", B, True, "single_active")]
    assert delivered_ids(d, effects) == [0]
    assert list(d.state.consumers) == [3]


def test_down_of_the_active_consumer_activates_the_next() -> None:
    d = sac()
    d.enqueue(P1, 1, b"x")
    consume(d, "a", A)
    consume(d, "b", B)
    _, effects = d.apply(("down", A, "noproc"))
    assert upd("b", B, True, "single_active") in effects
    assert delivered_ids(d, effects) == [0]
    assert d.state.consumers[3].checked_out[0] is not None


def test_v7_noconnection_demotes_the_active_consumer() -> None:
    d = sac()
    d.enqueue(P1, 1, b"x")
    consume(d, "c", C)  # on node 2, key 2
    consume(d, "b", B)  # key 3
    _, effects = d.apply(("down", C, "noconnection"), ts=7000)
    assert effects[0] == ("monitor", "node", N2)
    assert effects[1] == upd("c", C, False, "suspected_down")
    assert upd("b", B, True, "single_active") in effects
    assert delivered_ids(d, effects) == [0]
    assert [(k, c.status) for k, c in d.state.waiting_consumers] == [(2, "suspected_down")]
    _, effects = d.apply(("nodeup", N2))
    assert [(k, c.status) for k, c in d.state.waiting_consumers] == [(2, "up")]
    assert ("monitor", "process", C) in effects


def test_waiting_consumer_down_is_removed_with_a_cancel_effect() -> None:
    d = sac()
    consume(d, "a", A)
    consume(d, "b", B)
    _, effects = d.apply(("down", B, "noproc"))
    assert effects == [("mod_call", "rabbit_quorum_queue", "cancel_consumer_handler",
                        [QNAME, ("b", B)])]
    assert d.state.waiting_consumers == []
