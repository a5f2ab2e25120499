"""Length limits and overflow, message TTL and queue expiry."""

from __future__ import annotations

from fifo import make_checkout, make_purge, make_settle, make_update_config
from fifo.mc import BasicMessage
from fifo.msg import unpack

from .helpers import QNAME, Driver, bodies, pid

P1 = pid(1)
P2 = pid(2)
C1 = pid(10)
GO = ("queue_status", "go")
REJECT = ("queue_status", "reject_publish")


def counter(reason: str, kind: str, n: int) -> tuple:
    return ("mod_call", "rabbit_global_counters", "messages_dead_lettered",
            [reason, "rabbit_quorum_queue", kind, n])


class TestDropHead:
    def test_drops_the_oldest_after_the_enqueue(self) -> None:
        d = Driver(max_length=2)
        d.enqueue(P1, 1, b"a")
        d.enqueue(P1, 2, b"b")
        reply, effects = d.enqueue(P1, 3, b"c")
        assert reply == "ok"
        assert effects == [("aux", ("bytes_in", (0, 1))), counter("maxlen", "disabled", 1)]
        assert [unpack(m)[0] for m in d.state.messages.no] == [2, 3]
        assert d.state.messages_total == 2 and d.state.ra_indexes.to_list() == []

    def test_lowering_max_length_merges_the_counter_effects(self) -> None:
        d = Driver()
        for i in range(1, 11):
            d.enqueue(P1, i, b"x")
        _, effects = d.apply(make_update_config({"name": "q1", "max_length": 2}))
        assert effects == [counter("maxlen", "disabled", 8)]
        assert len(d.state.messages) == 2

    def test_single_message_over_max_bytes_is_dropped_itself(self) -> None:
        d = Driver(max_bytes=3)
        d.enqueue(P1, 1, b"abcdef")
        assert d.state.messages_total == 0 and d.state.msg_bytes_enqueue == 0

    def test_unacked_messages_do_not_count(self) -> None:
        d = Driver(max_length=1)
        d.apply(make_checkout(("ct", C1), ("auto", ("simple_prefetch", 5)), {}))
        for i in range(1, 4):
            d.enqueue(P1, i, b"x")
        assert d.state.messages_total == 3

    def test_at_most_once_publishes_drops_in_drop_order(self) -> None:
        d = Driver(max_length=1, dead_letter_handler=("at_most_once", ("m", "f", [])))
        d.enqueue(P1, 1, b"a")
        _, effects = d.enqueue(P1, 2, b"b")
        log = effects[-1]
        assert log[0:2] == ("log", [1])
        assert d.read(log) == [("mod_call", "m", "f", ["maxlen", [b"a"]])]


class TestRejectPublish:
    def test_overshoot_block_once_and_unblock_at_eighty_percent(self) -> None:
        d = Driver(max_length=2, overflow_strategy="reject_publish")
        d.enqueue(P1, 1, b"a")
        d.enqueue(P2, 1, b"b")
        _, effects = d.enqueue(P1, 2, b"c")  # 3 > 2: every enqueuer told once
        assert effects[-2:] == [("send_msg", P1, REJECT, ["ra_event"]),
                                ("send_msg", P2, REJECT, ["ra_event"])]
        assert d.state.enqueuers[P1].blocked == d.index
        assert d.state.messages_total == 3  # the machine never refuses an enqueue
        _, effects = d.enqueue(P2, 2, b"d")
        assert effects == [("aux", ("bytes_in", (0, 1)))]  # already blocked
        c = d.apply(make_checkout(("ct", C1), ("auto", ("simple_prefetch", 2)), {}))
        assert [e for e in c[1] if e[0] == "send_msg"] == []  # 2 left: trunc(1.6) = 1
        _, effects = d.apply(make_settle(5, [0]))  # one more delivered, 1 ready left
        assert effects[-2:] == [("send_msg", P1, GO, ["ra_event"]),
                                ("send_msg", P2, GO, ["ra_event"])]
        assert all(e.blocked is None for e in d.state.enqueuers.values())

    def test_purge_unblocks(self) -> None:
        d = Driver(max_length=1, overflow_strategy="reject_publish")
        d.enqueue(P1, 1, b"a")
        d.enqueue(P1, 2, b"b")
        reply, effects = d.apply(make_purge())
        assert reply == ("purge", 2)
        assert effects == [("aux", "force_checkpoint"), "garbage_collection",
                           ("send_msg", P1, GO, ["ra_event"])]

    def test_removing_the_limit_sends_go_to_every_enqueuer(self) -> None:
        d = Driver(max_length=5)
        d.enqueue(P1, 1, b"a")
        _, effects = d.apply(make_update_config({"name": "q1"}))
        assert effects == [("send_msg", P1, GO, ["ra_event"])]


class TestMessageTtl:
    def test_expiry_is_command_time_plus_min_ttl(self) -> None:
        d = Driver(msg_ttl=500)
        d.enqueue(P1, 1, BasicMessage(b"a", ttl=100), ts=1000)
        d.enqueue(P1, 2, BasicMessage(b"b"), ts=1000)
        d.enqueue(P1, 3, b"raw", ts=1000)  # v7: raw bodies get no TTL
        assert [unpack(m)[1] for m in d.state.messages.no] == [(1, 1100), (1, 1500), 3]

    def test_ttl_zero_survives_only_the_same_millisecond(self) -> None:
        d = Driver()
        d.enqueue(P1, 1, BasicMessage(b"a", ttl=0), ts=1000)
        assert unpack(d.state.messages.no[0])[1] == (1, 1001)

    def test_expiry_happens_at_the_head_on_the_next_command(self) -> None:
        d = Driver()
        d.enqueue(P1, 1, BasicMessage(b"a", ttl=10), ts=1000)
        d.enqueue(P1, 2, BasicMessage(b"b"), ts=1000)
        d.enqueue(P1, 3, BasicMessage(b"c", ttl=10), ts=1000)  # behind a live one: stays
        reply, effects = d.apply(("timeout", "expire_msgs"), ts=1010)
        assert (reply, effects) == ("ok", [counter("expired", "disabled", 1)])
        assert [unpack(m)[0] for m in d.state.messages.no] == [2, 3]
        _, effects = d.apply(make_checkout(("ct", C1), ("auto", ("simple_prefetch", 9)), {}))
        # c expired at the head and was never delivered
        assert [m.body for m in bodies(d, effects)] == [b"b"]
        assert counter("expired", "disabled", 1) in effects
        assert d.state.messages_total == 1

    def test_checked_out_messages_never_expire(self) -> None:
        d = Driver()
        d.apply(make_checkout(("ct", C1), ("auto", ("simple_prefetch", 9)), {}))
        d.enqueue(P1, 1, BasicMessage(b"a", ttl=10), ts=1000)
        d.apply(("timeout", "expire_msgs"), ts=5000)
        assert d.state.messages_total == 1


class TestQueueExpiry:
    def test_tick_deletes_an_idle_queue_strictly_after_expires(self) -> None:
        d = Driver(expires=1000, created=5000)
        assert d.machine.tick(6000, d.state)[0][0] == "aux"
        assert d.machine.tick(6001, d.state) == [
            ("mod_call", "rabbit_quorum_queue", "spawn_deleter", [QNAME])]

    def test_a_consumer_keeps_the_queue_alive_and_enqueues_do_not(self) -> None:
        d = Driver(expires=1000, created=5000)
        d.enqueue(P1, 1, b"a", ts=5900)
        assert d.machine.tick(7000, d.state)[0][0] == "mod_call"
        d.apply(make_checkout(("ct", C1), ("auto", ("simple_prefetch", 1)), {}))
        assert d.machine.tick(9000, d.state)[0][0] == "aux"

    def test_dequeue_refreshes_last_active(self) -> None:
        d = Driver(expires=1000, created=5000)
        d.apply(make_checkout(("g", C1), ("dequeue", "settled"), {}), ts=5800, **{"from": 1})
        assert d.state.last_active == 5800
        assert d.machine.tick(6500, d.state)[0][0] == "aux"

    def test_v7_update_config_resets_last_active(self) -> None:
        d = Driver(expires=1000, created=5000)
        d.apply(make_update_config({"name": "q1", "expires": 1000}))
        assert d.state.last_active is None
