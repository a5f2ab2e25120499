"""Replies, effects and snapshots whose shape machine 8 changed.

Each test runs the same commands on machine 7 and machine 8: the checkout
reply, the effects of a new leader, an enqueue without a publisher, credit
replies with link-state properties, what a member resends after installing a
snapshot, the live indexes a snapshot keeps, and the snapshot a purge forces.
"""

from __future__ import annotations

from typing import Any

from fifo import RabbitFifo, make_checkout, make_credit, make_purge, make_settle
from fifo.aux import Checkpoint
from fifo.commands import make_enqueue
from fifo.mc import BasicMessage
from fifo.msg import msg_size
from fifo.queries import live_indexes, ra_seq

from .helpers import N2, QNAME, Driver, FakeRaAux, consume, pid

P1 = pid(1)
C1 = pid(10)
C2 = pid(11, N2)
LINK_STATE = {"link_state_properties": True}


def credited(d: Driver, c: Any, **cmeta: Any) -> int:
    d.apply(make_checkout(("ct", c), ("auto", ("credited", 0)), cmeta))
    return d.index


def test_checkout_reply_names_the_strategy_and_the_active_consumer_in_v8() -> None:
    replies = {}
    for v in (7, 8):
        d = Driver(machine_version=v, single_active_consumer_on=True)
        replies[v] = d.apply(make_checkout(("ct", C1), ("auto", ("simple_prefetch", 5)),
                                           {}))[0]
    assert replies[7] == ("ok", {"next_msg_id": 0, "credit": 5, "key": 1,
                                 "delivery_count": 0, "num_checked_out": 0,
                                 "is_active": False})
    assert replies[8] == ("ok", {"next_msg_id": 0, "credit": 5, "key": 1,
                                 "delivery_count": 0, "num_checked_out": 0,
                                 "is_active": True, "consumer_strategy": "single_active"})


def test_a_new_v8_leader_arms_no_expiry_timer() -> None:
    effects = {}
    for v in (7, 8):
        d = Driver(machine_version=v)
        d.enqueue(P1, 1, b"m")
        effects[v] = d.machine.state_enter("leader", d.state)
    startup = ("mod_call", "rabbit_quorum_queue", "spawn_notify_decorators",
               [QNAME, "startup", []])
    common = [("monitor", "process", P1), ("send_msg", P1, "leader_change", "ra_event"),
              ("monitor", "node", P1.node), startup]
    assert effects[7] == [("timer", "expire_msgs", "infinity"), *common]
    assert effects[8] == common


def test_an_enqueue_without_a_publisher_is_untracked_in_v8() -> None:
    totals = {}
    for v in (7, 8):
        d = Driver(machine_version=v)
        d.apply(make_enqueue(P1, 1, b"m"), reply_mode="await_consensus")
        totals[v] = (d.state.messages_total, dict(d.state.enqueuers))
    assert totals == {7: (0, {}), 8: (1, {})}


class TestLinkState:
    def test_credit_replies_carry_active_in_v8(self) -> None:
        replies = {}
        for v in (7, 8):
            d = Driver(machine_version=v)
            key = credited(d, C1, **LINK_STATE)
            _, effects = d.apply(make_credit(key, 3, 0, True))
            replies[v] = [e[2] for e in effects if e[0] == "send_msg"]
        # machine 7 answers the plain shape whatever the consumer asked for
        assert replies[7] == [("credit_reply", "ct", 3, 0, 0, True)]
        assert replies[8] == [("credit_reply", "ct", 3, 0, 0, True, {"active": True})]

    def test_single_active_activation_sends_a_link_state_credit_reply(self) -> None:
        out = {}
        for v in (7, 8):
            d = Driver(machine_version=v, single_active_consumer_on=True)
            _, effects = d.apply(make_checkout(("ct", C1), ("auto", ("credited", 0)),
                                               LINK_STATE))
            out[v] = [e[2] for e in effects if e[0] == "send_msg"]
        assert out[7] == []
        assert out[8] == [("credit_reply", "ct", 0, 0, 0, False, {"active": True})]

    def test_v8_noconnection_tells_a_link_state_consumer_it_is_inactive(self) -> None:
        d = Driver(machine_version=8)
        credited(d, C2, **LINK_STATE)
        _, effects = d.apply(("down", C2, "noconnection"))
        assert [e[2] for e in effects if e[0] == "send_msg"] == [
            ("credit_reply", "ct", 0, 0, 0, False, {"active": False})]


class TestSnapshots:
    def test_v8_resends_held_messages_and_credit_after_a_snapshot_install(self) -> None:
        out: dict[int, list[Any]] = {}
        for v in (7, 8):
            d = Driver(machine_version=v, single_active_consumer_on=True)
            d.enqueue(P1, 1, b"m")
            k1 = credited(d, C1)
            d.apply(make_credit(k1, 1, 0, False))
            credited(d, C2)  # waiting
            out[v] = d.machine.snapshot_installed({}, d.state, {}, None, C1.node)
        assert out[7] == []
        deliveries = [e for e in out[8] if e[0] == "log_ext"]
        assert len(deliveries) == 1 and deliveries[0][1] == [1]
        assert [(e[1], e[2]) for e in out[8] if e[0] == "send_msg"] == [
            (C1, ("credit_reply", "ct", 1, 0, 0, False)),
            (C2, ("credit_reply", "ct", 0, 0, 0, False))]

    def test_live_indexes_cover_every_held_message(self) -> None:
        d = Driver(machine_version=8, dead_letter_handler="at_least_once",
                   overflow_strategy="reject_publish")
        for i in range(1, 7):
            d.enqueue(P1, i, f"m{i}".encode())
        d.apply(make_checkout(("ct", C1), ("auto", ("simple_prefetch", 2)), {}))
        d.apply(("discard", 7, [0]))  # m1 dead-lettered, m3 delivered
        assert live_indexes(d.state) == [1, 2, 3, 4, 5, 6]
        assert ra_seq([1, 2, 3, 5, 6, 9]) == [9, 6, 5, (1, 3)]

    def test_a_purge_forces_a_snapshot_of_an_empty_v8_queue(self) -> None:
        out = {}
        for v in (7, 8):
            d = Driver(machine_version=v)
            d.enqueue(P1, 1, b"m")
            _, effects = d.apply(make_purge())
            aux = d.machine.init_aux("q1")
            assert ("aux", "force_checkpoint") in effects
            out[v] = d.machine.handle_aux("leader", "cast", "force_checkpoint", aux,
                                          FakeRaAux(d))[3]
        # v7 checkpoints (Ra promotes it once the release cursor passes it); v8
        # snapshots the empty queue at once
        assert out[7][0][:2] == ("checkpoint", 2)
        assert all(len(e) == 2 for e in out[7] if e[0] == "release_cursor")
        assert [e[:2] for e in out[8]] == [("release_cursor", 2)]
        # with the machine state and upstream's conditions
        assert out[8][0][3] == {"condition": [("written", 2), "no_snapshot_sends"]}


def test_v8_sizes_count_the_metadata_too() -> None:
    sizes = {}
    for v in (7, 8):
        d = Driver(machine_version=v)
        d.enqueue(P1, 1, BasicMessage(b"12345", metadata_size=40))
        sizes[v] = (d.state.msg_bytes_enqueue, msg_size(d.state.messages.get()))  # type: ignore[arg-type]
    assert sizes == {7: (5, 5), 8: (45, 45)}


def test_v8_overview_drops_the_release_cursor_keys() -> None:
    keys = {}
    for v in (7, 8):
        d = Driver(machine_version=v)
        keys[v] = set(d.machine.overview(d.state))
    assert keys[7] - keys[8] == {
        "num_ready_messages_high", "num_ready_messages_normal", "num_release_cursors",
        "release_cursors", "in_memory_message_bytes", "num_in_memory_ready_messages",
        "release_cursor_enqueue_counter", "smallest_raft_index_overview"}
    assert keys[8] - keys[7] == {
        "num_active_priorities", "messages_by_priority", "num_delayed_messages",
        "next_delayed_at", "last_delayed_at"}


def test_v8_snapshots_at_last_applied_with_its_messages_live_where_v7_checkpoints() -> None:
    out = {}
    for v in (7, 8):
        d = Driver(machine_version=v)
        d.machine = RabbitFifo(v, clock=lambda: 2000)
        for i in range(1, 41):
            d.enqueue(P1, i, f"m{i}".encode())
        c = consume(d, C1, 2)
        d.apply(make_settle(c, [0, 1]))  # the first two are gone
        aux = d.machine.init_aux("q1")
        aux.last_checkpoint = Checkpoint(index=0, timestamp=0, indexes=10)  # one is due
        out[v] = d.machine.handle_aux("follower", "cast", "eval", aux, FakeRaAux(d))[3]
        tick = d.machine.handle_aux("follower", "cast", "tick", aux, FakeRaAux(d))[3]
        assert (tick == []) == (v == 8)  # v7 releases up to its oldest message on ticks
        held = live_indexes(d.state)
    # v7 checkpoints and releases the log below its oldest message, so the log keeps
    # every entry from there on; v8 snapshots everything applied, and the log keeps
    # only the entries of the messages still held (its live indexes)
    assert out[7][0][:2] == ("checkpoint", d.index)
    (effect,) = out[8]
    assert effect[:2] == ("release_cursor", d.index)
    assert effect[3] == {"condition": [("written", d.index), "no_snapshot_sends"]}
    assert live_indexes(effect[2]) == held and len(held) == 38
