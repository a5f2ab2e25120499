"""Message priorities in machine 8 (RabbitMQ 4.3) against machine 7 (4.0-4.2).

Machine 7 keeps two levels served 2:1; machine 8 keeps 32 strict levels, clamps
priorities into 0..31 and puts a message without one at level 4. Each test runs
the same commands on both versions and shows where they part.
"""

from __future__ import annotations

from typing import Any

import pytest

from fifo import make_checkout, make_purge
from fifo.mc import BasicMessage
from fifo.msg import get_header, msg_header
from fifo.pq import clamp_priority

from .helpers import Driver, bodies, pid

P1 = pid(1)
C1 = pid(10)


def consume_all(d: Driver) -> list[Any]:
    _, effects = d.apply(make_checkout(("ct", C1), ("auto", ("simple_prefetch", 100)), {}))
    return bodies(d, effects)


def publish(d: Driver, priorities: list[int | None], **kw: Any) -> None:
    for i, p in enumerate(priorities):
        seq = d.state.enqueuers[P1].next_seqno if P1 in d.state.enqueuers else 1
        d.enqueue(P1, seq, BasicMessage(f"p{p}-{i}".encode(), priority=p, **kw))


def counter(n: int) -> tuple[Any, ...]:
    return ("mod_call", "rabbit_global_counters", "messages_dead_lettered",
            ["expired", "rabbit_quorum_queue", "disabled", n])


def priorities_of(delivered: list[Any]) -> list[int | None]:
    return [m.priority for m in delivered]


class TestOrder:
    def test_v7_serves_two_high_then_one_normal_v8_is_strict(self) -> None:
        sent = [0, 1, 2, 3, 4, *range(5, 15)]
        got = {}
        for v in (7, 8):
            d = Driver(machine_version=v)
            publish(d, sent)
            got[v] = priorities_of(consume_all(d))
        assert got[7] == [5, 6, 0, 7, 8, 1, 9, 10, 2, 11, 12, 3, 13, 14, 4]
        assert got[8] == [14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0]

    def test_out_of_range_priorities_are_clamped_in_v8(self) -> None:
        d = Driver(machine_version=8)
        publish(d, [-3, 200, 31, 0, None])
        assert d.state.messages.overview()["detail"] == {0: 2, 4: 1, 31: 2}
        got = priorities_of(consume_all(d))
        # 200 and 31 share level 31 in arrival order; -3 and 0 share level 0
        assert got == [200, 31, None, -3, 0]

    def test_no_priority_is_level_4_below_5_and_above_3(self) -> None:
        got = {}
        for v in (7, 8):
            d = Driver(machine_version=v)
            publish(d, [3, None, 5])
            got[v] = priorities_of(consume_all(d))
        assert got[7] == [5, 3, None]  # 3 and no priority share the normal level
        assert got[8] == [5, None, 3]

    def test_clamp(self) -> None:
        assert [clamp_priority(p) for p in (-1, 0, 4, 31, 32, 255, None, "x", True)] == [
            0, 0, 4, 31, 31, 31, 4, 4, 4]


class TestExpiry:
    def test_v8_expires_the_head_of_every_level_in_one_pass(self) -> None:
        effects = {}
        for v in (7, 8):
            d = Driver(machine_version=v)
            publish(d, [9], ttl=1000)
            publish(d, [1], ttl=1000)
            publish(d, [9])
            _, effects[v] = d.apply(("timeout", "expire_msgs"), ts=d.ts + 5000)
            assert len(d.state.messages) == (2 if v == 7 else 1), v
        # v7 expires only from the head of what it would deliver next (level "hi"),
        # so the expired priority-1 message stays; v8 drops the expired heads of
        # levels 9 and 1 together, with one dead-letter counter effect
        assert effects[7] == [counter(1)]
        assert effects[8] == [counter(2)]

    def test_v8_shallow_expiry_reports_an_empty_batch(self) -> None:
        d = Driver(machine_version=8)
        publish(d, [1])
        _, effects = d.apply(("timeout", ("expire_msgs", "shallow")))
        assert effects == [counter(0)]

    def test_delivery_expires_the_heads_of_all_levels_when_the_next_one_expired(self) -> None:
        dead_lettered = {}
        for v in (7, 8):
            d = Driver(machine_version=v)
            publish(d, [9], ttl=1000)
            publish(d, [1], ttl=1000)
            publish(d, [1])
            d.ts += 5000
            _, effects = d.apply(make_checkout(("ct", C1), ("auto", ("simple_prefetch", 9)), {}))
            assert priorities_of(bodies(d, effects)) == [1]
            dead_lettered[v] = [e[3][3] for e in effects if e[:3] == counter(0)[:3]]
            assert d.state.messages_total == 1
        assert dead_lettered == {7: [1, 1], 8: [2]}

    def test_raw_bodies_get_the_queue_ttl_only_in_v8(self) -> None:
        expiry = {}
        for v in (7, 8):
            d = Driver(machine_version=v, msg_ttl=500)
            d.enqueue(P1, 1, b"raw")
            expiry[v] = d.state.messages.get()
        assert expiry[7] is not None and expiry[8] is not None
        assert get_header("expiry", msg_header(expiry[7])) is None
        assert get_header("expiry", msg_header(expiry[8])) == 1500


class TestRequeueAndOverview:
    def test_aux_requeue_goes_to_the_default_level(self) -> None:
        got = {}
        for v in (7, 8):
            d = Driver(machine_version=v)
            publish(d, [7])
            d.apply(make_checkout(("ct", C1), ("auto", ("simple_prefetch", 1)), {}))
            key = d.index
            publish(d, [3])
            _, effects = d.apply(("requeue", key, 0, 1, 7, BasicMessage(b"r", priority=7)))
            got[v] = priorities_of(bodies(d, effects))
        # v7: the requeued message joins the normal level behind the priority-3 one;
        # v8: it goes to level 4, above level 3, whatever its own priority was
        assert got == {7: [3], 8: [7]}

    def test_overview_reports_levels_per_version(self) -> None:
        ov = {}
        for v in (7, 8):
            d = Driver(machine_version=v)
            publish(d, [0, 9, 9, None])
            ov[v] = d.machine.overview(d.state)
        assert ov[7]["num_ready_messages_high"] == 2
        assert ov[7]["num_ready_messages_normal"] == 2
        assert "messages_by_priority" not in ov[7]
        assert ov[8]["messages_by_priority"] == {0: 1, 4: 1, 9: 2}
        assert ov[8]["num_active_priorities"] == 3
        assert "num_ready_messages_high" not in ov[8]


@pytest.mark.parametrize("v", [7, 8])
def test_purge_empties_every_level(v: int) -> None:
    d = Driver(machine_version=v)
    publish(d, [0, 9, 30, None])
    reply, _ = d.apply(make_purge())
    assert reply == ("purge", 4)
    assert len(d.state.messages) == 0
    assert consume_all(d) == []
