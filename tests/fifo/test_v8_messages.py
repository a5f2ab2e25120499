"""Message references, give-backs and dead letters: machine 8 against machine 7.

Each test runs the same commands on both versions: what a reference packs, what
a message costs in the Erlang heap model, how requeues count against the
delivery limit, what a purge drops and what an at-most-once dead letter carries.
"""

from __future__ import annotations

from typing import Any

import pytest

from fifo import (
    make_checkout,
    make_discard,
    make_dlx_checkout,
    make_modify,
    make_purge,
    make_return,
)
from fifo.footprint import message_bytes, ready_message_bytes
from fifo.mc import BasicMessage
from fifo.msg import is_packed

from .helpers import Driver, pid

P1 = pid(1)
C1 = pid(10)
W1 = pid(20)
AT_MOST_ONCE: tuple[Any, ...] = ("at_most_once", ("m", "f", []))


def with_messages(v: int, *sizes: int, **cfg: Any) -> Driver:
    d = Driver(machine_version=v, **cfg)
    for i, size in enumerate(sizes, start=1):
        d.enqueue(P1, i, b"x" * size)
    return d


def consume(d: Driver, prefetch: int = 10) -> int:
    d.apply(make_checkout(("ct", C1), ("auto", ("simple_prefetch", prefetch)), {}))
    return d.index


class TestPackedReferences:
    def test_v8_packs_only_sizes_that_fit_15_bits(self) -> None:
        small, large = 0x7FFF, 0x8000
        d7 = with_messages(7, small, large)
        d8 = with_messages(8, small, large)
        assert [is_packed(m) for m in d8.state.messages.drain_order()] == [True, False]
        assert list(d8.state.messages.drain_order()) == [1 ^ (small << 44), (2, large)]
        # warren's machine 7 packs every size internally (no wire shows it)
        assert [is_packed(m) for m in d7.state.messages.drain_order()] == [True, True]

    def test_memory_per_ready_message_halves_in_v8(self) -> None:
        figures = {v: ready_message_bytes(with_messages(v, 100, 100).state) for v in (7, 8)}
        assert figures == {7: 64, 8: 32}  # 32 vs 16 bytes a message

    def test_a_large_or_expiring_message_costs_the_list_form_in_v8(self) -> None:
        d = with_messages(8, 40_000, msg_ttl=100)
        d.enqueue(P1, 2, b"small")
        msgs = list(d.state.messages.drain_order())
        # both carry an expiry ([Size|Expiry] header): 32 + 16 bytes each
        assert [message_bytes(m, 8) for m in msgs] == [48, 48]
        assert message_bytes(1 ^ (5 << 44), 8) == 16
        assert message_bytes(1 ^ (5 << 44), 7) == 32


class TestUnlimitedReturns:
    @pytest.mark.parametrize("v, dead_after", [(7, 3), (8, None)])
    def test_plain_requeues_count_against_the_limit_only_in_v7(
            self, v: int, dead_after: int | None) -> None:
        d = with_messages(v, 5, delivery_limit=2)
        key = consume(d, 1)
        returned = 0
        for msg_id in range(5):
            if d.state.messages_total == 0:
                break
            d.apply(make_return(key, [msg_id]))
            returned += 1
        if dead_after is None:
            assert d.state.messages_total == 1 and returned == 5
        else:
            assert d.state.messages_total == 0 and returned == dead_after

    @pytest.mark.parametrize("v", [7, 8])
    def test_failed_deliveries_count_in_both(self, v: int) -> None:
        d = with_messages(v, 5, delivery_limit=1)
        key = consume(d, 1)
        d.apply(make_modify(key, [0], True, False, {}))
        assert d.state.messages_total == 1
        d.apply(make_modify(key, [1], True, False, {}))
        assert d.state.messages_total == 0


class TestPurge:
    @pytest.mark.parametrize("v, purged, left", [(7, 0, 2), (8, 2, 0)])
    def test_v8_purge_drops_dead_letters_waiting_and_checked_out(
            self, v: int, purged: int, left: int) -> None:
        d = with_messages(v, 1, 1, 1, dead_letter_handler="at_least_once",
                          overflow_strategy="reject_publish")
        key = consume(d, 2)
        d.apply(make_discard(key, [0, 1]))
        d.apply(make_dlx_checkout(W1, 1))  # one checked out to the worker, one waiting
        assert d.state.messages_total == 1  # the third message went to the consumer
        assert d.apply(make_purge())[0] == ("purge", purged)
        ov = d.machine.overview(d.state)
        assert ov["num_discarded"] + ov["num_discard_checked_out"] == left
        assert ov["num_messages"] == left + 1  # and the one checked out


class TestAtMostOnceDeadLetters:
    @pytest.mark.parametrize("v, annotations", [
        (7, {"delivery_count": 1}),
        (8, {"acquired_count": 2, "delivery_count": 1}),
    ])
    def test_acquired_count_is_annotated_only_in_v8(
            self, v: int, annotations: dict[str, int]) -> None:
        d = Driver(machine_version=v, dead_letter_handler=AT_MOST_ONCE)
        d.enqueue(P1, 1, BasicMessage(b"m"))
        key = consume(d, 1)
        d.apply(make_return(key, [0]))
        _, effects = d.apply(make_discard(key, [1]))
        (log,) = [e for e in effects if e[0] == "log"]
        ((_, _, _, args),) = d.read(log)
        assert args[-2] == "rejected"
        assert [m.annotations for m in args[-1]] == [annotations]
