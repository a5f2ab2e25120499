"""The consumer (ack) timeout: enforced by the queue in machine 8, not at all in machine 7.

In machine 7 (RabbitMQ 4.0-4.2) the channel closes itself when a delivery is
unacknowledged for too long, and the queue ignores the timer. In machine 8 the
queue releases the messages, tells the consumer, and serves it again only once
it has answered for every released id.
"""

from __future__ import annotations

from typing import Any

from fifo import make_return, make_settle

from .helpers import QNAME, FakeRaAux, consume, delivered_ids, pid, queue_of

P1 = pid(1)
C1 = pid(10)
C2 = pid(11)
EVALUATE = ("timeout", "evaluate_consumer_timeout")


def test_v8_locks_each_delivery_until_delivery_time_plus_the_timeout() -> None:
    locks = {}
    for v in (7, 8):
        d = queue_of(v, 2, P1)
        key = consume(d, C1, 2, timeout=500)
        locks[v] = (d.state.consumers[key].lock_expirations, d.state.next_consumer_timeout)
    assert locks[7] == ({}, None)
    assert locks[8] == ({0: 1500, 1: 1500}, 1500)


def test_v7_ignores_the_timer_v8_releases_the_expired_messages() -> None:
    out = {}
    for v in (7, 8):
        d = queue_of(v, 2, P1)
        key = consume(d, C1, 2, timeout=500)
        reply, effects = d.apply(EVALUATE, ts=2000)
        out[v] = (reply, effects, len(d.state.consumers[key].checked_out),
                  d.state.consumers[key].status)
    assert out[7] == ("ok", [], 2, "up")
    reply, effects, held, status = out[8]
    assert effects == [("send_msg", C1, ("released", QNAME, "ct", [0, 1], "timeout"),
                        "ra_event")]
    assert (held, status) == (0, ("timeout", "up"))


def test_v8_serves_the_consumer_again_once_it_answered_for_every_released_id() -> None:
    d = queue_of(8, 3, P1)
    key = consume(d, C1, 2, timeout=500)
    d.apply(EVALUATE, ts=2000)
    c: Any = d.state.consumers[key]
    assert (c.timed_out_msg_ids, c.credit, d.state.next_consumer_timeout) == ([0, 1], 2, None)
    _, effects = d.apply(make_settle(key, [0]))  # a late ack: nothing to settle
    assert delivered_ids(d, effects) == [] and c.status == ("timeout", "up")
    _, effects = d.apply(make_return(key, [1]))
    assert c.status == "up" and c.timed_out_msg_ids == []
    assert delivered_ids(d, effects) == [2, 3]
    assert d.state.messages_total == 3  # nothing was lost or settled by the timeout


def test_only_messages_past_their_lock_are_released() -> None:
    d = queue_of(8, 2, P1)
    key = consume(d, C1, 1, timeout=500)
    d.apply(make_settle(key, [0]), ts=1400)  # m1 delivered at 1400, locked to 1900
    _, effects = d.apply(EVALUATE, ts=1600)
    assert effects == [] and d.state.consumers[key].status == "up"
    assert d.state.next_consumer_timeout == 1900


def test_v8_single_active_consumer_hands_over_after_a_timeout() -> None:
    d = queue_of(8, 2, P1, single_active_consumer_on=True)
    k1 = consume(d, C1, 1, timeout=500)
    k2 = consume(d, C2, 1, timeout=500)
    _, effects = d.apply(EVALUATE, ts=2000)
    assert list(d.state.consumers) == [k2]
    assert [k for k, _ in d.state.waiting_consumers] == [k1]
    handler = [e[3][5:7] for e in effects if e[:3] == (
        "mod_call", "rabbit_quorum_queue", "update_consumer_handler")]
    assert handler == [[False, "waiting"], [True, "single_active"]]
    assert delivered_ids(d, effects) == [0]  # m0 again, now to C2
    # C1, waiting, answers for its released id and may compete again
    d.apply(make_settle(k1, [0]))
    assert d.state.waiting_consumers[0][1].status == "up"


def test_the_leader_arms_an_absolute_timer_for_the_earliest_lock() -> None:
    armed = {}
    for v in (7, 8):
        d = queue_of(v, 1, P1)
        consume(d, C1, 1, timeout=500)
        aux = d.machine.init_aux("q1")
        effects = d.machine.handle_aux("leader", "cast", "eval", aux, FakeRaAux(d))[3]
        armed[v] = [e for e in effects if e[0] == "timer"]
        again = d.machine.handle_aux("leader", "cast", "eval", aux, FakeRaAux(d))[3]
        if v == 8:
            assert [e for e in again if e[0] == "timer"] == []  # already armed
    assert armed[7] == [("timer", "expire_msgs", "infinity")]
    assert armed[8] == [("timer", "evaluate_consumer_timeout", 1500, {"abs": True})]
