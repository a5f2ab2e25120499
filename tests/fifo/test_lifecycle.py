"""``state_enter``, ``tick``, aux (checkpoints, release cursors), queries, other commands."""

from __future__ import annotations

from typing import Any

from fifo import RabbitFifo, make_checkout, make_garbage_collection, make_return, make_settle
from fifo.mc import BasicMessage
from fifo.queries import get_checked_out, query_consumers, query_peek

from .helpers import N1, N2, QNAME, Driver, FakeRaAux, pid

P1 = pid(1)
C1 = pid(10)
C2 = pid(11, N2)


def populated() -> Driver:
    d = Driver()
    d.enqueue(P1, 1, b"a")
    d.apply(make_checkout(("a", C1), ("auto", ("simple_prefetch", 1)), {}))
    d.apply(make_checkout(("b", C2), ("auto", ("simple_prefetch", 1)), {}))
    return d


def test_leader_monitors_and_notifies_every_process_once() -> None:
    d = populated()
    effects = d.machine.state_enter("leader", d.state)
    assert effects == [
        ("timer", "expire_msgs", "infinity"),
        ("monitor", "process", P1),
        ("monitor", "process", C1),
        ("monitor", "process", C2),
        ("send_msg", P1, "leader_change", "ra_event"),
        ("send_msg", C1, "leader_change", "ra_event"),
        ("send_msg", C2, "leader_change", "ra_event"),
        ("monitor", "node", N1),
        ("monitor", "node", N2),
        ("mod_call", "rabbit_quorum_queue", "spawn_notify_decorators", [QNAME, "startup", []]),
    ]


def test_leader_with_become_leader_handler_and_expiring_head() -> None:
    d = Driver(become_leader_handler=("m", "f", ["x"]))
    d.enqueue(P1, 1, BasicMessage(b"a", ttl=100))
    effects = d.machine.state_enter("leader", d.state)
    assert effects[0] == ("mod_call", "m", "f", ["x", "q1"])
    assert effects[1] == ("timer", "expire_msgs", 0)


def test_eol_tells_every_process() -> None:
    d = populated()
    assert d.machine.state_enter("eol", d.state) == [
        ("send_msg", P1, "eol", "ra_event"), ("send_msg", C1, "eol", "ra_event"),
        ("send_msg", C2, "eol", "ra_event"), ("aux", "eol")]
    assert d.machine.state_enter("follower", d.state) == []


def test_gc_unknown_commands_and_upgrades() -> None:
    d = Driver()
    assert d.apply(make_garbage_collection()) == ("ok", [("aux", "garbage_collection")])
    assert d.apply(("no_such_command", 1)) == ("ok", [])
    assert d.apply(("machine_version", 6, 7)) == ("ok", [("aux", ("dlx", "setup"))])
    assert RabbitFifo().version() == 7 and RabbitFifo().which_module(5).version() == 5


def test_tick_reports_overview_and_nodes() -> None:
    d = populated()
    (eff,) = d.machine.tick(0, d.state)
    kind, (tag, (qname, ov, nodes)) = eff
    assert (kind, tag, qname, nodes) == ("aux", "handle_tick", QNAME, [N1, N2])
    assert ov["num_consumers"] == 2 and ov["num_checked_out"] == 1
    assert ov["num_ready_messages"] == 0 and ov["num_messages"] == 1


def test_queries() -> None:
    d = populated()
    d.enqueue(P1, 2, b"b")  # delivered to C2
    d.enqueue(P1, 3, b"c")  # index 5, ready
    assert query_peek(1, d.state) == ("ok", (5, 1))
    assert query_peek(2, d.state) == ("error", "no_message_at_pos")
    assert get_checked_out(2, 0, 5, d.state) == [(0, (1, 1))]
    rows = query_consumers(d.state)
    assert rows[2] == (C1, "a", None, None, True, "up", [], None)


class TestAux:
    def test_tick_releases_up_to_the_smallest_live_index(self) -> None:
        d = populated()
        aux = d.machine.init_aux("q1")
        res = d.machine.handle_aux("leader", "cast", "tick", aux, FakeRaAux(d))
        assert res[3] == [("release_cursor", 0)]
        d.apply(make_settle(2, [0]))
        res = d.machine.handle_aux("leader", "cast", "tick", aux, FakeRaAux(d))
        assert res[3] == [("release_cursor", d.index)]

    def test_eval_moves_only_the_smallest_index_and_releases_each_move_once(self) -> None:
        d = populated()
        aux = d.machine.init_aux("q1")

        def evaluate() -> list[Any]:
            return d.machine.handle_aux("follower", "cast", "eval", aux, FakeRaAux(d))[3]

        assert evaluate() == [("release_cursor", 0)]  # the first smallest index seen
        before = aux.last_checkpoint
        assert evaluate() == [] and aux.last_checkpoint == before  # nothing moved
        d.apply(make_settle(2, [0]))
        assert evaluate() == [("release_cursor", d.index - 1)]
        after = aux.last_checkpoint
        assert (after.smallest_index, before.smallest_index) == (d.index, 1)
        assert (after.index, after.timestamp, after.messages_total, after.indexes,
                after.bytes_in) == (before.index, before.timestamp, before.messages_total,
                                    before.indexes, before.bytes_in)

    def test_force_checkpoint_carries_an_independent_copy(self) -> None:
        d = populated()
        aux = d.machine.init_aux("q1")
        _, _, _, effects = d.machine.handle_aux("leader", "cast", "force_checkpoint", aux,
                                                FakeRaAux(d))
        (kind, idx, snap), release = effects
        assert (kind, idx, release) == ("checkpoint", d.index, ("release_cursor", 0))
        d.apply(make_settle(2, [0]))
        assert len(snap.consumers[2].checked_out) == 1  # unaffected by later commands

    def test_eval_checkpoints_after_enough_indexes_and_time(self) -> None:
        now = [0]
        d = Driver()
        d.machine = RabbitFifo(clock=lambda: now[0])
        aux = d.machine.init_aux("q1")
        for i in range(1, 40):
            d.enqueue(P1, i, b"x")
        d.apply(("purge",))
        now[0] = 2000
        _, _, _, effects = d.machine.handle_aux("follower", "cast", "eval", aux, FakeRaAux(d))
        assert effects[0][0:2] == ("checkpoint", d.index)

    def test_leader_eval_arms_the_expiry_timer(self) -> None:
        d = Driver()
        d.machine = RabbitFifo(clock=lambda: 1050)
        d.enqueue(P1, 1, BasicMessage(b"a", ttl=100), ts=1000)
        aux = d.machine.init_aux("q1")
        _, _, _, effects = d.machine.handle_aux("leader", "cast", "eval", aux, FakeRaAux(d))
        assert ("timer", "expire_msgs", 50) in effects

    def test_v7_return_without_limit_becomes_requeue_appends(self) -> None:
        d = Driver()
        for i in range(1, 3):
            d.enqueue(P1, i, f"m{i}".encode())
        d.apply(make_checkout(("a", C1), ("auto", ("simple_prefetch", 5)), {}))
        aux = d.machine.init_aux("q1")
        cmd = (make_return(3, [1, 0]), 7, C1)
        _, _, _, effects = d.machine.handle_aux("leader", "cast", cmd, aux, FakeRaAux(d))
        assert effects == [
            ("append", ("requeue", 3, 0, 1, 2, b"m1"), "noreply"),
            ("append", ("requeue", 3, 1, 2, 2, b"m2"), ("notify", 7, C1)),
        ]

    def test_get_checked_out_reads_bodies(self) -> None:
        d = populated()
        aux = d.machine.init_aux("q1")
        res = d.machine.handle_aux("follower", ("call", "x"), ("get_checked_out", 2, [0, 9]),
                                   aux, FakeRaAux(d))
        assert res[:2] == ("reply", ("ok", [(0, (1, b"a"))]))
