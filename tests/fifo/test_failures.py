"""``purge_nodes``, ``down``, noconnection (v7), nodeup / nodedown."""

from __future__ import annotations

from fifo import make_checkout, make_purge_nodes
from fifo.msg import unpack

from .helpers import N1, N2, QNAME, Driver, delivered_ids, pid

P1 = pid(1)
C1 = pid(10, N2)
C2 = pid(11, N1)
E2 = pid(12, N2)


def two_consumers() -> Driver:
    """Two messages each for C1 (node 2, key 5) and C2 (node 1, key 6)."""
    d = Driver()
    for i in range(1, 5):
        d.enqueue(P1, i, b"x")
    d.apply(make_checkout(("a", C1), ("auto", ("simple_prefetch", 2)), {}))
    d.apply(make_checkout(("b", C2), ("auto", ("simple_prefetch", 2)), {}))
    return d


def handler(kind: str, tag: str, p, active: bool, status: str) -> tuple:
    return ("mod_call", "rabbit_quorum_queue", kind,
            [QNAME, (tag, p), False, None, None, active, status, []])


class TestDown:
    def test_consumer_down_returns_messages_as_failed_and_removes_it(self) -> None:
        d = two_consumers()
        d.apply(("settle", 6, [0, 1]))
        reply, effects = d.apply(("down", C1, "noproc"), ts=3000)
        assert reply == "ok"
        assert effects[0] == ("mod_call", "rabbit_quorum_queue", "cancel_consumer_handler",
                              [QNAME, ("a", C1)])
        assert delivered_ids(d, effects) == [2, 3]  # redelivered to C2
        assert 5 not in d.state.consumers and d.state.last_active == 3000
        hdrs = [unpack(m)[1] for m in d.state.consumers[6].checked_out.values()]
        assert hdrs == [{"size": 1, "acquired_count": 1, "delivery_count": 1}] * 2

    def test_enqueuer_down_forgets_the_enqueuer(self) -> None:
        d = Driver()
        d.enqueue(P1, 1, b"x")
        assert d.apply(("down", P1, "normal")) == ("ok", [])
        assert d.state.enqueuers == {} and d.state.messages_total == 1

    def test_purge_nodes_handles_every_pid_on_the_node_without_checkout(self) -> None:
        d = two_consumers()
        d.enqueue(E2, 1, b"y")
        reply, effects = d.apply(make_purge_nodes([N2]))
        assert reply == "ok"
        assert E2 not in d.state.enqueuers and 5 not in d.state.consumers
        assert len(d.state.returns) == 2  # not redelivered by this command
        assert [e[2] for e in effects] == ["cancel_consumer_handler"]


class TestNoconnection:
    def test_v7_suspects_the_whole_node_and_returns_messages_now(self) -> None:
        d = two_consumers()
        d.apply(("register_enqueuer", E2))
        d.apply(("settle", 6, [0, 1]))
        reply, effects = d.apply(("down", pid(99, N2), "noconnection"), ts=4000)
        assert reply == "ok"
        assert effects[0] == ("monitor", "node", N2)
        assert handler("update_consumer_handler", "a", C1, False, "suspected_down") in effects
        assert delivered_ids(d, effects) == [2, 3]
        s = d.state
        assert s.consumers[5].status == "suspected_down" and s.consumers[5].checked_out == {}
        assert s.consumers[5].credit == 2
        assert s.enqueuers[E2].status == "suspected_down" and s.enqueuers[P1].status == "up"
        assert s.last_active == 4000
        assert [unpack(m)[1]["delivery_count"] for m in s.consumers[6].checked_out.values()] \
            == [1, 1]

    def test_suspected_consumers_receive_nothing(self) -> None:
        d = two_consumers()
        d.apply(("down", C1, "noconnection"))
        d.apply(("settle", 6, [0, 1, 2, 3]))
        d.enqueue(P1, 5, b"z")
        assert d.state.consumers[5].checked_out == {}

    def test_nodeup_remonitors_prods_enqueuers_and_restores_consumers(self) -> None:
        d = two_consumers()
        d.enqueue(E2, 1, b"y")
        d.apply(("down", C1, "noconnection"))
        reply, effects = d.apply(("nodeup", N2))
        assert reply == "ok"
        assert effects[:4] == [
            ("monitor", "process", C1),
            ("monitor", "process", E2),
            ("send_msg", E2, "leader_change", "ra_event"),
            handler("update_consumer_handler", "a", C1, True, "up"),
        ]
        assert delivered_ids(d, effects) == [2, 3]  # its returned messages, redelivered
        assert d.state.consumers[5].status == "up"
        assert d.state.enqueuers[E2].status == "up"

    def test_nodedown_is_a_no_op(self) -> None:
        d = two_consumers()
        assert d.apply(("nodedown", N2)) == ("ok", [])
