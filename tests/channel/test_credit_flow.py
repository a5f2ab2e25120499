"""credit_flow accounting, step by step, as RabbitMQ's credit_flow module does it."""

from __future__ import annotations

import pytest

from channel.limits.credit_flow import BlockedTime, CreditFlow, Grant, bump_msg, validate_credit


def test_default_pair_is_400_then_200() -> None:
    cf = CreditFlow("reader")
    assert (cf.initial, cf.more_after) == (400, 200)


def test_sender_blocks_exactly_on_the_400th_send() -> None:
    cf = CreditFlow("reader")
    for i in range(399):
        cf.send("ch", now_us=i)
        assert not cf.blocked()
    assert cf.credit_from["ch"] == 1
    cf.send("ch", now_us=1000)
    assert cf.blocked() and cf.credit_blocked == ["ch"]
    assert cf.credit_from["ch"] == 0
    assert cf.blocked_at_us == 1000


def test_send_at_zero_goes_negative_without_blocking_twice() -> None:
    cf = CreditFlow("r", initial=1, more_after=1)
    cf.send("ch", 0)
    cf.send("ch", 0)
    assert cf.credit_from["ch"] == -1
    assert cf.credit_blocked == ["ch"]


@pytest.mark.parametrize(
    ("before", "quantity", "after", "unblocks"),
    [
        (0, 200, 200, True),     # 0 -> 200 unblocks
        (-1, 1, 0, False),       # still not positive
        (-1, 2, 1, True),
        (5, 200, 205, False),    # was never blocked by this peer
    ],
)
def test_bump_unblocks_only_when_crossing_above_zero(before: int, quantity: int, after: int,
                                                     unblocks: bool) -> None:
    cf = CreditFlow("reader")
    cf.credit_from["ch"] = before
    cf.block("ch", 0)
    cf.handle_bump_msg(("ch", quantity))
    assert cf.credit_from["ch"] == after
    assert cf.blocked() is not unblocks


def test_bump_from_unknown_peer_starts_from_zero() -> None:
    cf = CreditFlow("reader")
    cf.handle_bump_msg(("ch", 200))
    assert cf.credit_from["ch"] == 200


def test_receiver_grants_more_after_on_every_200th_ack() -> None:
    cf = CreditFlow("ch")
    grants = [cf.ack("reader") for _ in range(400)]
    granted_at = [i + 1 for i, g in enumerate(grants) if g]
    assert granted_at == [200, 400]
    assert grants[199] == [Grant("reader", "ch", 200)]
    assert grants[199][0].message() == ("bump_credit", ("ch", 200))
    assert cf.credit_to["reader"] == 200


def test_blocked_receiver_defers_grants_until_unblocked() -> None:
    cf = CreditFlow("ch")
    cf.block("queue-q", now_us=0)
    grants = [g for _ in range(400) for g in cf.ack("reader")]
    assert grants == []
    assert cf.deferred == [Grant("reader", "ch", 200)] * 2
    released = cf.unblock("queue-q")
    assert released == [Grant("reader", "ch", 200)] * 2
    assert cf.deferred == []


def test_block_keys_are_a_multiset() -> None:
    cf = CreditFlow("ch")
    cf.block("k", 10)
    cf.block("k", 20)
    assert cf.blocked_at_us == 10  # only the first transition records the time
    cf.ack("r")
    cf.credit_to["r"] = 1
    cf.ack("r")
    assert cf.unblock("k") == []
    assert cf.blocked()
    assert cf.unblock("k") == [Grant("r", "ch", 200)]
    assert not cf.blocked()


def test_unblock_of_absent_key_releases_deferred_when_nothing_blocks() -> None:
    cf = CreditFlow("ch")
    cf.deferred.append(Grant("r", "ch", 200))
    assert cf.unblock("nobody") == [Grant("r", "ch", 200)]


@pytest.mark.parametrize(
    ("blocked_now", "blocked_at", "now", "state"),
    [
        (True, 0, 10_000_000, "flow"),
        (False, None, 5, "running"),
        (False, 1_000_000, 1_999_999, "flow"),
        (False, 1_000_000, 2_000_000, "running"),
    ],
)
def test_state_reports_flow_within_one_second_of_a_block(
        blocked_now: bool, blocked_at: int | None, now: int, state: str) -> None:
    cf = CreditFlow("r")
    if blocked_now:
        cf.block("x", 0)
    cf.blocked_at_us = blocked_at
    assert cf.state(now) == state


def test_peer_down_unblocks_and_forgets_the_peer_but_keeps_deferred() -> None:
    cf = CreditFlow("r")
    for i in range(400):
        cf.send("ch", i)
    cf.credit_to["ch"] = 7
    cf.block("other", 0)
    cf.deferred.append(Grant("ch", "r", 200))
    assert cf.peer_down("ch") == []
    assert "ch" not in cf.credit_from and "ch" not in cf.credit_to
    assert cf.credit_blocked == ["other"]
    assert cf.deferred == [Grant("ch", "r", 200)]


def test_a_channel_that_keeps_up_never_blocks_its_reader() -> None:
    reader, channel = CreditFlow("reader"), CreditFlow("channel")
    for n in range(2000):
        reader.send("channel", n)
        for grant in channel.ack("reader"):
            reader.handle_bump_msg(grant.message()[1])
        assert not reader.blocked()
        assert 200 <= reader.credit_from["channel"] <= 400
    assert bump_msg("c", 1) == ("bump_credit", ("c", 1))


@pytest.mark.parametrize("value", [(400, 500), (-1, 0), (1.0, 1), (400,), "x", (True, 0)])
def test_invalid_credit_settings_are_refused(value: object) -> None:
    with pytest.raises(ValueError):
        validate_credit(value)


def test_valid_credit_settings_pass() -> None:
    assert validate_credit((0, 0)) == (0, 0)
    assert validate_credit((400, 200)) == (400, 200)


def test_blocked_time_adds_up_the_blocked_stretches() -> None:
    spent = BlockedTime()
    spent.observe(False, now_ms=10)
    spent.observe(True, now_ms=100)
    spent.observe(True, now_ms=130)  # still the same stretch
    assert spent.total(now_ms=150) == 50  # an open stretch counts up to now
    spent.observe(False, now_ms=160)
    spent.observe(True, now_ms=200)
    spent.observe(False, now_ms=205)
    assert spent.total(now_ms=1000) == 65
