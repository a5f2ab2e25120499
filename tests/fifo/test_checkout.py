"""Checkout (consume), dequeue, cancel / remove, delivery loop."""

from __future__ import annotations

from fifo import make_checkout, make_settle
from fifo.msg import unpack
from fifo.records import Consumer, ConsumerCfg

from .helpers import N1, Driver, bodies, delivered_ids, deliveries, pid

P1 = pid(1)
C1 = pid(10)
C2 = pid(11)
QR = ("resource", "/", "queue", "q1")


def prefetch(n: int) -> tuple[str, tuple[str, int]]:
    return ("auto", ("simple_prefetch", n))


def fill(d: Driver, n: int, p=P1, start: int = 1) -> None:
    for i in range(start, start + n):
        d.enqueue(p, i, f"m{i}".encode())


class TestConsume:
    def test_new_consumer_key_is_the_raft_index_and_reply_precedes_delivery(self) -> None:
        d = Driver()
        fill(d, 2)
        reply, effects = d.apply(make_checkout(("ct", C1), prefetch(10), {}))
        assert reply == ("ok", {"next_msg_id": 0, "credit": 10, "key": 3, "delivery_count": 0,
                                "num_checked_out": 0, "is_active": True})
        assert effects[0] == ("monitor", "process", C1)
        assert deliveries(d, effects) == [(C1, "ct", [(0, b"m1"), (1, b"m2")])]
        c = d.state.consumers[3]
        assert (c.credit, c.next_msg_id, c.delivery_count) == (8, 2, 2)
        assert d.state.msg_bytes_checkout == 4 and d.state.msg_bytes_enqueue == 0
        assert d.state.messages_total == 2  # delivery does not change the total

    def test_delivery_effect_is_log_ext_local_to_the_consumer_node(self) -> None:
        d = Driver()
        fill(d, 1)
        _, effects = d.apply(make_checkout(("ct", C1), prefetch(10), {}))
        kind, idxs, fun, local = effects[1]
        assert (kind, idxs, local) == ("log_ext", [1], ("local", N1))
        sent = d.read(effects[1])  # read plan executed on the consumer's node
        assert sent[0][2][0:2] == ("delivery", "ct") and len(sent[0][2]) == 4
        assert sent[0][2][3] == [(0, (1, 2))]

    def test_legacy_spec_keys_the_consumer_by_its_id(self) -> None:
        d = Driver()
        reply, _ = d.apply(make_checkout(("ct", C1), ("auto", 5, "simple_prefetch"), {}))
        assert reply[1]["key"] == ("ct", C1)
        assert d.state.consumers[("ct", C1)].cfg.credit_mode == ("simple_prefetch", 5)

    def test_re_checkout_merges_and_keeps_msg_ids(self) -> None:
        d = Driver()
        fill(d, 3)
        d.apply(make_checkout(("ct", C1), prefetch(2), {}))
        reply, effects = d.apply(make_checkout(("ct", C1), prefetch(3), {"priority": 4}))
        assert reply == ("ok", {"next_msg_id": 2, "credit": 1, "key": 4, "delivery_count": 2,
                                "num_checked_out": 2, "is_active": True})
        assert delivered_ids(d, effects) == [2]
        assert d.state.consumers[4].cfg.priority == 4

    def test_priority_from_x_priority_argument(self) -> None:
        d = Driver()
        d.apply(make_checkout(("ct", C1), prefetch(1), {"args": [("x-priority", "long", 7)]}))
        assert d.state.consumers[1].cfg.priority == 7

    def test_equal_priority_consumers_share_round_robin(self) -> None:
        d = Driver()
        d.apply(make_checkout(("a", C1), prefetch(10), {}))
        d.apply(make_checkout(("b", C2), prefetch(10), {}))
        for i in range(1, 5):
            _, effects = d.enqueue(P1, i, b"x")
        s = d.state
        assert len(s.consumers[1].checked_out) == 2 and len(s.consumers[2].checked_out) == 2

    def test_higher_priority_consumer_takes_all_until_out_of_credit(self) -> None:
        d = Driver()
        fill(d, 5)
        d.apply(make_checkout(("lo", C1), ("auto", ("credited", 0)), {}))
        d.apply(make_checkout(("hi", C2), ("auto", ("credited", 0)), {"priority": 5}))
        d.state.consumers[6].credit = 2
        d.state.consumers[7].credit = 3
        d.state.service_queue.in_(6, 0)
        d.state.service_queue.in_(7, 5)
        _, effects = d.apply(("timeout", "expire_msgs"))
        # effects are grouped per consumer in key order; "hi" was served first
        assert [(t, [b for _, b in ms]) for _, t, ms in deliveries(d, effects)] == [
            ("lo", [b"m4", b"m5"]), ("hi", [b"m1", b"m2", b"m3"])]

    def test_returns_are_served_before_high_priority_messages(self) -> None:
        from fifo.mc import BasicMessage

        d = Driver()
        d.enqueue(P1, 1, b"low")
        d.apply(make_checkout(("ct", C1), prefetch(1), {}))
        d.enqueue(P1, 2, BasicMessage(b"high", priority=9))
        _, effects = d.apply(("return", 2, [0]))
        assert bodies(d, effects) == [b"low"]


class TestDequeue:
    def test_empty_queue(self) -> None:
        d = Driver()
        reply, effects = d.apply(make_checkout(("g", C1), ("dequeue", "settled"), {}), ts=5000,
                                 **{"from": "caller"})
        assert (reply, effects) == (("dequeue", "empty"), [])
        assert d.state.last_active == 5000

    def test_settled_dequeue_replies_through_a_log_effect(self) -> None:
        d = Driver()
        fill(d, 2)
        reply, effects = d.apply(make_checkout(("g", C1), ("dequeue", "settled"), {}),
                                 **{"from": "caller"})
        assert reply == "$ra_no_reply"
        assert effects[0][0:2] == ("log", [1])
        assert d.read(effects[0]) == [
            ("reply", "caller", ("wrap_reply", ("dequeue", (0, (2, b"m1")), 1)))]
        s = d.state
        assert s.consumers == {} and s.messages_total == 1 and len(s.ra_indexes) == 0

    def test_unsettled_dequeue_leaves_a_once_consumer_holding_the_message(self) -> None:
        d = Driver()
        fill(d, 1)
        reply, effects = d.apply(make_checkout(("g", C1), ("dequeue", "unsettled"), {}),
                                 **{"from": "caller"})
        assert reply == "$ra_no_reply"
        assert [e[0] for e in effects] == ["log", "monitor"]
        c = d.state.consumers[("g", C1)]
        assert c.cfg == ConsumerCfg(meta={}, pid=C1, tag="g", credit_mode=("simple_prefetch", 1),
                                    lifetime="once", priority=0)
        assert (c.credit, list(c.checked_out)) == (0, [0])
        d.apply(make_settle(("g", C1), [0]), ts=7000)
        assert d.state.consumers == {} and d.state.last_active == 7000

    def test_second_dequeue_with_same_id_is_empty(self) -> None:
        d = Driver()
        fill(d, 2)
        d.apply(make_checkout(("g", C1), ("dequeue", "unsettled"), {}), **{"from": "x"})
        assert d.apply(make_checkout(("g", C1), ("dequeue", "unsettled"), {}),
                       **{"from": "x"}) == (("dequeue", "empty"), [])

    def test_sac_queue_refuses_dequeue(self) -> None:
        d = Driver(single_active_consumer_on=True)
        fill(d, 1)
        res = d.machine.apply(d.meta(**{"from": "x"}),
                              make_checkout(("g", C1), ("dequeue", "settled"), {}), d.state)
        assert res[1:] == (("error", ("unsupported", "single_active_consumer")),)

    def test_all_ready_messages_expired(self) -> None:
        from fifo.mc import BasicMessage

        d = Driver()
        d.enqueue(P1, 1, BasicMessage(b"a", ttl=10), ts=1000)
        reply, effects = d.apply(make_checkout(("g", C1), ("dequeue", "settled"), {}),
                                 ts=2000, **{"from": "x"})
        assert reply == ("dequeue", "empty")
        assert effects == [("mod_call", "rabbit_global_counters", "messages_dead_lettered",
                            ["expired", "rabbit_quorum_queue", "disabled", 1])]
        assert d.state.consumers == {} and d.state.messages_total == 0


class TestCancelRemove:
    def _consumer_with_two(self) -> Driver:
        d = Driver()
        fill(d, 2)
        d.apply(make_checkout(("ct", C1), prefetch(10), {}))  # key 3
        return d

    def test_unknown_consumer(self) -> None:
        d = Driver()
        assert d.apply(make_checkout(("ct", C1), "cancel", {})) == (
            ("error", "consumer_not_found"), [])

    def test_cancel_keeps_unacked_messages_until_settled(self) -> None:
        d = self._consumer_with_two()
        reply, effects = d.apply(make_checkout(("ct", C1), "cancel", {}))
        assert reply == ("ok", {"key": 3, "num_checked_out": 2})
        assert effects == [("mod_call", "rabbit_quorum_queue", "cancel_consumer_handler",
                            [QR, ("ct", C1)])]
        c = d.state.consumers[3]
        assert (c.status, c.cfg.lifetime, c.credit, len(c.checked_out)) == (
            "cancelled", "once", 0, 2)
        d.enqueue(P1, 3, b"m3")
        assert len(d.state.consumers[3].checked_out) == 2  # nothing new
        d.apply(make_settle(3, [0, 1]), ts=4242)
        assert d.state.consumers == {} and d.state.last_active == 4242

    def test_cancel_without_messages_removes_at_once(self) -> None:
        d = Driver()
        d.apply(make_checkout(("ct", C1), prefetch(10), {}))
        reply, _ = d.apply(make_checkout(("ct", C1), "cancel", {}), ts=99)
        assert reply == ("ok", {})
        assert d.state.consumers == {} and d.state.last_active == 99

    def test_remove_returns_messages_without_counting_a_failure(self) -> None:
        d = self._consumer_with_two()
        reply, _ = d.apply(make_checkout(("ct", C1), "remove", {}), ts=555)
        assert reply == ("ok", {})
        s = d.state
        assert s.consumers == {} and s.last_active == 555
        assert [unpack(m) for m in s.returns] == [(1, {"size": 2, "acquired_count": 1}),
                                                  (2, {"size": 2, "acquired_count": 1})]
        assert s.msg_bytes_enqueue == 4 and s.msg_bytes_checkout == 0

    def test_consumer_msg_ids_continue_across_cancel_and_re_consume(self) -> None:
        d = self._consumer_with_two()
        d.apply(make_checkout(("ct", C1), "cancel", {}))
        reply, _ = d.apply(make_checkout(("ct", C1), prefetch(10), {}))
        assert reply[1]["key"] == 3 and reply[1]["next_msg_id"] == 2
        _, effects = d.enqueue(P1, 3, b"m3")
        assert delivered_ids(d, effects) == [2]


def test_consumer_record_shape() -> None:
    d = Driver()
    d.apply(make_checkout(("ct", C1), ("auto", ("credited", 7)), {"ack": True}))
    assert d.state.consumers[1] == Consumer(
        cfg=ConsumerCfg(meta={"ack": True}, pid=C1, tag="ct", credit_mode=("credited", 7),
                        lifetime="auto", priority=0),
        status="up", next_msg_id=0, checked_out={}, credit=0, delivery_count=7)
