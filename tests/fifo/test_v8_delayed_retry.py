"""Delayed retry: machine 8 lets a returned message wait before it is ready again.

Machine 7 has no such thing: every returned message is ready at once, and the
``delayed_retry`` setting and the ``x-opt-delivery-time`` annotation are
ignored. Each test runs the same commands on both versions where it matters.
"""

from __future__ import annotations

from typing import Any

import pytest

from fifo import make_checkout, make_modify, make_purge, make_return, make_settle
from fifo.delayed import DEFERRAL_TOKEN, DELIVERY_TIME
from fifo.msg import msg_idx

from .helpers import Driver, consume, delivered_ids, pid, queue_of

P1 = pid(1)
P2 = pid(2)
C1 = pid(10)
C2 = pid(11)
EXPIRE = ("timeout", "expire_msgs")


def fail(d: Driver, key: int, msg_id: int, **anns: Any) -> list[Any]:
    return d.apply(make_modify(key, [msg_id], True, False, anns))[1]


class TestModes:
    def test_v7_ignores_the_setting_v8_delays_failed_deliveries(self) -> None:
        out = {}
        for v in (7, 8):
            d = queue_of(v, 1, P1, delayed_retry=("failed", 100, 1000))
            key = consume(d, C1, 1)
            redelivered = delivered_ids(d, fail(d, key, 0))
            out[v] = (redelivered, len(d.state.delayed), d.machine.overview(d.state)[
                "num_ready_messages"])
        assert out[7] == ([1], 0, 0)
        assert out[8] == ([], 1, 0)

    def test_the_delay_grows_with_the_delivery_count_up_to_the_maximum(self) -> None:
        d = queue_of(8, 1, P1, delayed_retry=("all", 100, 250))
        key = consume(d, C1, 1)
        ready_at = []
        for msg_id in range(3):
            fail(d, key, msg_id)
            ready_at.append(d.state.delayed.next_at())
            _, effects = d.apply(EXPIRE, ts=d.state.delayed.next_at())
            assert delivered_ids(d, effects) == [msg_id + 1]
        # delivery counts 1, 2, 3: delays 100, 200, then capped at 250, each counted
        # from the failure (at 1000, 1100 and 1300)
        assert ready_at == [1100, 1300, 1550]

    @pytest.mark.parametrize("mode, plain_return_waits, failure_waits", [
        ("all", True, True), ("failed", False, True), ("returned", True, False),
    ])
    def test_which_give_backs_wait(self, mode: str, plain_return_waits: bool,
                                   failure_waits: bool) -> None:
        d = queue_of(8, 2, P1, delayed_retry=(mode, 100, 100))
        key = consume(d, C1, 2)
        d.apply(make_return(key, [0]))
        fail(d, key, 1)
        waiting = [msg_idx(m) for m in d.state.delayed.values()]
        assert waiting == [i for i, waits in ((1, plain_return_waits), (2, failure_waits))
                           if waits]

    def test_not_ready_until_due_and_promoted_behind_the_returns(self) -> None:
        d = queue_of(8, 3, P1, delayed_retry=("failed", 100, 100))
        key = consume(d, C1, 2)
        fail(d, key, 0)
        d.apply(make_return(key, [1]))  # plain return: ready at once, redelivered
        assert delivered_ids(d, d.apply(EXPIRE, ts=1050)[1]) == []
        d.apply(make_settle(key, [2, 3]))  # m2 and m1 again; nothing else is ready
        _, effects = d.apply(EXPIRE, ts=1100)
        assert delivered_ids(d, effects) == [4]  # m0, after its 100 ms
        assert len(d.state.delayed) == 0


class TestDeliveryTimeAndTokens:
    @pytest.mark.parametrize("v", [7, 8])
    def test_an_explicit_delivery_time_works_even_when_disabled(self, v: int) -> None:
        d = queue_of(v, 1, P1)
        key = consume(d, C1, 1)
        effects = d.apply(make_modify(key, [0], False, False, {DELIVERY_TIME: 5000}))[1]
        if v == 7:
            assert delivered_ids(d, effects) == [1]
            return
        assert delivered_ids(d, effects) == [] and d.state.delayed.next_at() == 5000
        assert d.machine.overview(d.state)["next_delayed_at"] == 5000

    def test_a_deferred_message_is_claimed_by_token(self) -> None:
        d = queue_of(8, 2, P1)
        k1 = consume(d, C1, 2)
        for msg_id, token in ((0, b"t0"), (1, b"t1")):
            d.apply(make_modify(k1, [msg_id], False, False,
                                {DELIVERY_TIME: 99_000, DEFERRAL_TOKEN: token}))
        k2 = consume(d, C2, 1)
        claim = ("delayed_cmd", ("assign_deferred", k2, [b"t1", b"t0"]))
        assert d.apply(claim)[0] == ("error", ("insufficient_credit", 1, 2))
        assert len(d.state.delayed) == 2  # unchanged
        assert d.apply(("delayed_cmd", ("assign_deferred", 999, [b"t1"])))[0] == (
            "error", "consumer_not_found")
        reply, effects = d.apply(("delayed_cmd", ("assign_deferred", k2, [b"t1", b"nope"])))
        assert reply == ("partial", 1, [b"nope"])
        assert delivered_ids(d, effects) == [0]
        assert list(d.state.delayed.deferred) == [b"t0"]

    def test_a_suspected_consumer_cannot_claim(self) -> None:
        d = queue_of(8, 1, P1)
        key = consume(d, C1, 1)
        d.apply(make_modify(key, [0], False, False, {DELIVERY_TIME: 99_000,
                                                     DEFERRAL_TOKEN: b"t"}))
        d.apply(("down", C1, "noconnection"))
        assert d.apply(("delayed_cmd", ("assign_deferred", key, [b"t"])))[0] == (
            "error", "consumer_not_active")


class TestRetryCommand:
    @pytest.mark.parametrize("n, moved", [("all", 3), (2, 2), (0, 0)])
    def test_retry_moves_the_earliest_now(self, n: Any, moved: int) -> None:
        d = queue_of(8, 3, P1, delayed_retry=("all", 1000, 1000))
        key = consume(d, C1, 3)
        for msg_id in (2, 0, 1):
            fail(d, key, msg_id)
        reply, effects = d.apply(("delayed_cmd", ("retry", n)))
        assert reply == ("ok", moved)
        assert len(d.state.delayed) == 3 - moved
        assert len(delivered_ids(d, effects)) == moved

    def test_v7_has_no_delayed_commands(self) -> None:
        d = queue_of(7, 1, P1)
        assert d.apply(("delayed_cmd", ("retry", "all"))) == ("ok", [])


class TestLimitsAndPurge:
    def test_delayed_messages_count_against_max_length(self) -> None:
        blocked = {}
        for v in (7, 8):
            d = queue_of(v, 1, P1, max_length=1, overflow_strategy="reject_publish",
                      delayed_retry=("all", 1000, 1000))
            key = consume(d, C1, 1)
            d.apply(make_return(key, [0]))
            d.apply(make_checkout(("ct", C1), "cancel", {}))
            d.enqueue(P2, 1, b"more")
            blocked[v] = d.state.enqueuers[P2].blocked is not None
        # v7: the returned message went straight back to C1 (unacked: not counted),
        # one message is ready; v8: one delayed and one ready make two, over 1
        assert blocked == {7: False, 8: True}

    def test_purge_drops_delayed_messages(self) -> None:
        d = queue_of(8, 2, P1, delayed_retry=("all", 1000, 1000))
        key = consume(d, C1, 1)
        fail(d, key, 0)
        assert d.apply(make_purge())[0] == ("purge", 1)  # m0 waits, m1 is with C1
        assert d.state.messages_total == 1
        assert len(d.state.delayed) == 0
