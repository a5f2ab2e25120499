"""A consumer whose node became unreachable: machine 8 against machine 7.

Machine 7 returns the consumer's messages at once, counted as failed
deliveries. Machine 8 suspects only the process the ``noconnection`` names; the
consumer keeps its messages until its ``consumer_disconnected_timeout`` timer
fires or its node comes back.
"""

from __future__ import annotations

from typing import Any

from fifo import make_checkout, make_settle
from fifo.msg import get_header, msg_header

from .helpers import N2, Driver, consume, delivered_ids, pid

P1 = pid(1)
P2 = pid(2, N2)
C1 = pid(10)
C2 = pid(11, N2)


def queue(v: int, n: int, **cfg: Any) -> Driver:
    d = Driver(machine_version=v, **cfg)
    d.enqueue(P2, 1, b"p2")
    for i in range(n):
        d.enqueue(P1, i + 1, f"m{i}".encode())
    return d


def timers(effects: list[Any]) -> list[Any]:
    return [e for e in effects if e[0] == "timer"]


class TestCompeting:
    def setup_consumers(self, v: int) -> tuple[Driver, int, int]:
        d = queue(v, 2, consumer_disconnected_timeout=5000)
        k2 = consume(d, C2, 3)  # takes p2, m0, m1
        k1 = consume(d, C1, 3)
        return d, k1, k2

    def test_v7_returns_at_once_v8_keeps_the_messages(self) -> None:
        out = {}
        for v in (7, 8):
            d, k1, k2 = self.setup_consumers(v)
            _, effects = d.apply(("down", C2, "noconnection"))
            out[v] = (len(d.state.consumers[k2].checked_out), delivered_ids(d, effects),
                      d.state.consumers[k2].status, timers(effects),
                      d.state.enqueuers[P2].status)
        # v7 suspects every process on the node, v8 only the one named (not P2)
        assert out[7] == (0, [0, 1, 2], "suspected_down", [], "suspected_down")
        assert out[8] == (3, [], ("suspected_down", "up"),
                          [("timer", ("consumer_disconnected_timeout", k2), 5000)], "up")

    def test_v8_effects_in_upstream_order(self) -> None:
        d, _k1, k2 = self.setup_consumers(8)
        _, effects = d.apply(("down", C2, "noconnection"))
        assert effects[0] == ("monitor", "node", N2)
        assert effects[1][:3] == ("mod_call", "rabbit_quorum_queue", "update_consumer_handler")
        assert effects[1][3][5:7] == [False, "suspected_down"]
        assert effects[2] == ("timer", ("consumer_disconnected_timeout", k2), 5000)
        assert len(effects) == 3

    def test_v8_timer_returns_them_without_counting_a_failure(self) -> None:
        d, k1, k2 = self.setup_consumers(8)
        d.apply(("down", C2, "noconnection"))
        _, effects = d.apply(("timeout", ("consumer_disconnected_timeout", k2)))
        assert delivered_ids(d, effects) == [0, 1, 2]  # C1's first three ids
        assert d.state.consumers[k2].checked_out == {}
        assert d.state.consumers[k2].status == ("suspected_down", "up")
        for m in d.state.consumers[k1].checked_out.values():
            assert get_header("acquired_count", msg_header(m)) == 1
            assert get_header("delivery_count", msg_header(m)) is None

    def test_v8_nodeup_restores_and_cancels_the_timer(self) -> None:
        d, _k1, k2 = self.setup_consumers(8)
        d.apply(("down", C2, "noconnection"))
        _, effects = d.apply(("nodeup", N2))
        assert d.state.consumers[k2].status == "up"
        assert len(d.state.consumers[k2].checked_out) == 3
        assert ("timer", ("consumer_disconnected_timeout", k2), "infinity") in effects
        # the timer firing later finds nothing to do
        reply, effects = d.apply(("timeout", ("consumer_disconnected_timeout", k2)))
        assert (reply, effects) == ([], [])

    def test_only_suspected_processes_are_remonitored_on_nodeup(self) -> None:
        monitored = {}
        for v in (7, 8):
            d, _k1, _k2 = self.setup_consumers(v)
            p3 = pid(3, N2)
            d.enqueue(p3, 1, b"p3")  # a publisher on N2 that was never suspected
            d.apply(("down", C2, "noconnection"))
            _, effects = d.apply(("nodeup", N2))
            monitored[v] = ([e[2] for e in effects if e[:2] == ("monitor", "process")],
                            [e[1] for e in effects if e[0] == "send_msg"
                             and e[2] == "leader_change"])
        # v7 suspects every process on the node; v8 only C2 (and P2 is not suspected)
        assert monitored[7] == ([C2, P2, pid(3, N2)], [P2, pid(3, N2)])
        assert monitored[8] == ([C2], [C2])

    def test_a_cancelled_suspected_consumer_leaves_after_the_timeout(self) -> None:
        d, k1, k2 = self.setup_consumers(8)
        d.apply(make_checkout(("ct", C2), "cancel", {}))
        d.apply(("down", C2, "noconnection"))
        assert d.state.consumers[k2].status == ("suspected_down", "cancelled")
        d.apply(("timeout", ("consumer_disconnected_timeout", k2)))
        assert k2 not in d.state.consumers
        assert len(d.state.consumers[k1].checked_out) == 3


class TestSingleActive:
    def test_v8_hands_over_only_after_the_timeout(self) -> None:
        got = {}
        for v in (7, 8):
            d = queue(v, 2, single_active_consumer_on=True)
            k2 = consume(d, C2, 3)
            k1 = consume(d, C1, 3)
            _, on_down = d.apply(("down", C2, "noconnection"))
            active_after_down = [k for k, c in d.state.consumers.items()
                                 if c.status in ("up", ("suspected_down", "up"))]
            got[v] = (active_after_down, delivered_ids(d, on_down))
            if v == 8:
                _, fired = d.apply(("timeout", ("consumer_disconnected_timeout", k2)))
                assert list(d.state.consumers) == [k1]
                assert d.state.waiting_consumers[-1][0] == k2
                assert d.state.waiting_consumers[-1][1].status == ("suspected_down", "up")
                assert delivered_ids(d, fired) == [0, 1, 2]
                d.apply(make_settle(k1, [0, 1, 2]))
                assert d.state.messages_total == 0
        assert got[7] == ([k1], [0, 1, 2])
        assert got[8] == ([k2], [])
