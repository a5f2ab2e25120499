"""Machine version 2 (RabbitMQ 3.10) beside machine 7 (RabbitMQ 4.0-4.2).

Each test runs the same commands on both and states where 3.10's queue differs:
its consumer keys and bare ``ok`` replies, every give-back counting in
``delivery_count`` (what the delivery limit tests and what ``x-delivery-count``
carries), returns in id order with credit given back uncapped, one FIFO without
priorities, arrival order for single active consumers, integer credit, release
cursors stored in the state, the tick's metrics tuple and the file-handle
reservations of its state changes.
"""

from __future__ import annotations

from typing import Any

import pytest

from fifo import (
    RabbitFifo,
    make_checkout,
    make_credit,
    make_discard,
    make_purge,
    make_return,
    make_settle,
)
from fifo.client_send import add_delivery_count_header
from fifo.commands import make_requeue
from fifo.machine import SUPPORTED_VERSIONS
from fifo.mc import BasicMessage
from fifo.msg import msg_header, unpack

from .helpers import N2, QNAME, Driver, FakeRaAux, bodies, delivered_ids, pid

P1 = pid(1)
C1 = pid(10)
C2 = pid(11)
FAR_PUBLISHER = pid(21, N2)
ALO = {"dead_letter_handler": "at_least_once"}


def consume(d: Driver, c: Any, prefetch: int, tag: str = "ct", **cmeta: Any) -> Any:
    """A prefetch consumer in the spec shape each version's client sends; returns its key."""
    if d.machine.machine_version == 2:
        d.apply(make_checkout((tag, c), ("auto", prefetch, "simple_prefetch"), cmeta))
        return (tag, c)
    d.apply(make_checkout((tag, c), ("auto", ("simple_prefetch", prefetch)), cmeta))
    return d.index


def drivers(**config: Any) -> dict[int, Driver]:
    return {v: Driver(machine_version=v, **config) for v in (2, 7)}


def held_header(d: Driver, key: Any, msg_id: int) -> Any:
    return msg_header(d.state.consumers[key].checked_out[msg_id])


def test_machine_2_is_built_and_offered() -> None:
    assert 2 in SUPPORTED_VERSIONS
    assert RabbitFifo(7).which_module(2).version() == 2


def test_a_checkout_replies_a_bare_ok_and_keys_the_consumer_by_its_id() -> None:
    replies = {}
    keys = {}
    for v, d in drivers().items():
        keys[v] = consume(d, C1, 5)
        replies[v] = d.apply(make_checkout(("other", C1), ("auto", 1, "simple_prefetch")
                                           if v == 2 else ("auto", ("simple_prefetch", 1)),
                                           {}))[0]
        assert next(iter(d.state.consumers)) == keys[v]
    assert keys == {2: ("ct", C1), 7: 1}
    assert replies[2] == "ok"
    assert replies[7][0] == "ok" and replies[7][1]["key"] == 2


def test_cancel_replies_ok_even_for_an_unknown_consumer_and_remove_does_nothing() -> None:
    out: dict[int, list[Any]] = {}
    for v, d in drivers().items():
        consume(d, C1, 5)
        d.enqueue(P1, 1, b"m")
        out[v] = [d.apply(make_checkout(("nope", C1), "cancel", {}))[0],
                  d.apply(make_checkout(("ct", C1), "remove", {}))[0],
                  len(d.state.returns)]
    assert out[2] == ["ok", "ok", 0]  # still held by the consumer
    assert out[7] == [("error", "consumer_not_found"), ("ok", {}), 1]


def test_every_return_counts_in_delivery_count_and_goes_back_in_id_order() -> None:
    headers = {}
    redelivered = {}
    for v, d in drivers().items():
        key = consume(d, C1, 5)
        for n in range(3):
            d.enqueue(P1, n + 1, b"m%d" % n)
        _, effects = d.apply(make_return(key, [2, 0]))
        redelivered[v] = bodies(d, effects)
        headers[v] = [held_header(d, key, i) for i in (3, 4)]
    assert redelivered[2] == [b"m0", b"m2"]  # 3.10: ascending ids
    assert redelivered[7] == [b"m2", b"m0"]  # 4.x: the order given
    assert headers[2] == [{"size": 2, "delivery_count": 1}] * 2
    assert headers[7] == [{"size": 2, "acquired_count": 1}] * 2


def test_redelivered_and_x_delivery_count_come_from_delivery_count() -> None:
    seen = {}
    for v, d in drivers().items():
        key = consume(d, C1, 5)
        d.enqueue(P1, 1, BasicMessage(b"m"))
        d.apply(make_return(key, [0]))
        d.apply(make_return(key, [1]))
        header = held_header(d, key, 2)
        msg, redelivered = add_delivery_count_header(BasicMessage(b"m"), header)
        seen[v] = (header.get("delivery_count"), msg.annotations.get("x-delivery-count"),
                   redelivered)
    assert seen[2] == (2, 2, True)
    assert seen[7] == (None, 2, True)  # 4.x counts acquisitions instead


def test_the_delivery_limit_tests_delivery_count_which_every_return_raises() -> None:
    dead = {}
    for v, d in drivers(delivery_limit=1, **ALO).items():
        key = consume(d, C1, 5)
        d.enqueue(P1, 1, b"m")
        d.apply(make_return(key, [0]))
        d.apply(make_return(key, [1]))
        dead[v] = [(reason, msg_header(m)) for reason, m in d.state.dlx.discards]
    assert dead[2] == [("delivery_limit", {"size": 1, "delivery_count": 2})]
    assert dead[7] == [("delivery_limit", {"size": 1, "acquired_count": 2})]


def test_a_reject_dead_letters_the_message_as_it_is() -> None:
    dead = {}
    for v, d in drivers(**ALO).items():
        key = consume(d, C1, 5)
        d.enqueue(P1, 1, b"m")
        d.apply(make_discard(key, [0]))
        dead[v] = msg_header(d.state.dlx.discards[0][1])
    assert dead[2] == 1
    assert dead[7] == {"size": 1, "acquired_count": 1, "delivery_count": 1}


def test_a_dead_lettering_return_gives_credit_back_twice_uncapped() -> None:
    credit = {}
    for v, d in drivers(delivery_limit=0).items():
        key = consume(d, C1, 1)
        d.enqueue(P1, 1, b"m1")
        d.enqueue(P1, 2, b"m2")
        d.apply(make_return(key, [0]))  # over the limit: dead-lettered, m2 delivered
        credit[v] = d.state.consumers[key].credit
    assert credit == {2: 1, 7: 0}


def test_a_requeue_appended_by_the_aux_counts_a_delivery() -> None:
    headers = {}
    for v, d in drivers().items():
        key = consume(d, C1, 5)
        d.enqueue(P1, 1, b"m")
        d.enqueue(P1, 2, b"n")
        idx, header = unpack(d.state.consumers[key].checked_out[0])
        _, effects = d.apply(make_requeue(key, 0, idx, header, b"m"))
        assert bodies(d, effects) == [b"m"]  # behind n, which is out already
        headers[v] = held_header(d, key, 2)
    assert headers[2] == {"size": 1, "delivery_count": 1}
    assert headers[7] == {"size": 1, "acquired_count": 1}


def test_message_priorities_are_ignored() -> None:
    order = {}
    for v, d in drivers().items():
        for n, prio in enumerate((0, 9, 0, 9)):
            d.enqueue(P1, n + 1, BasicMessage(b"m%d" % n, priority=prio))
        consume(d, C1, 10)
        order[v] = [unpack(m)[0] for m in d.state.consumers[next(iter(d.state.consumers))]
                    .checked_out.values()]
    assert order[2] == [1, 2, 3, 4]
    assert order[7] == [2, 4, 1, 3]


def test_a_single_active_consumer_hands_over_in_arrival_order_only() -> None:
    active = {}
    for v, d in drivers(single_active_consumer_on=True).items():
        consume(d, C1, 5, tag="a")
        consume(d, C2, 5, tag="low", priority=0)
        consume(d, C2, 5, tag="high", priority=5)
        active[v] = [c.cfg.tag for c in d.state.consumers.values() if c.status == "up"]
        d.apply(make_checkout(("a", C1), "cancel", {}))
        active[v] += [c.cfg.tag for c in d.state.consumers.values() if c.status == "up"]
    assert active[2] == ["a", "low"]  # no take-over, then the first to arrive
    assert active[7] == ["high", "high"]


def test_credit_is_plain_integers_answered_with_send_credit_reply() -> None:
    d = Driver(machine_version=2)
    d.apply(make_checkout(("ct", C1), ("auto", 0, "credited"), {}))
    for n in range(3):
        d.enqueue(P1, n + 1, b"m%d" % n)
    reply, effects = d.apply(make_credit(("ct", C1), 2, 0, True))
    assert delivered_ids(d, effects) == [0, 1]
    assert reply == ("multi", [("send_credit_reply", 1), ("send_drained", ("ct", 0))])
    reply, _ = d.apply(make_credit(("ct", C1), 5, 2, True))
    assert reply == ("multi", [("send_credit_reply", 0), ("send_drained", ("ct", 4))])
    assert d.state.consumers[("ct", C1)].delivery_count == 7


def test_enqueues_carry_no_aux_bytes_and_the_compact_record_is_unknown() -> None:
    effects = {}
    for v, d in drivers().items():
        effects[v] = d.enqueue(P1, 1, b"m")[1]
    assert effects[2] == [("monitor", "process", P1)]
    assert effects[7] == [("monitor", "process", P1), ("aux", ("bytes_in", (0, 1)))]
    d = Driver(machine_version=2)
    assert d.apply(("e", 1, b"m", (0, 1)), reply_mode=("notify", 1, P1)) == ("ok", [])
    assert d.state.messages_total == 0


def test_a_noconnection_returns_the_messages_counted_and_nodeup_prompts_nobody() -> None:
    seen = {}
    for v, d in drivers().items():
        far = pid(20, N2)
        key = consume(d, far, 2)
        d.enqueue(FAR_PUBLISHER, 1, b"m1")
        d.apply(("down", far, "noconnection"))
        _, effects = d.apply(("nodeup", N2))
        seen[v] = (msg_header(d.state.consumers[key].checked_out[1]),
                   [e for e in effects if e[0] == "send_msg" and e[2] == "leader_change"])
    assert seen[2] == ({"size": 2, "delivery_count": 1}, [])
    assert seen[7] == ({"size": 2, "delivery_count": 1, "acquired_count": 1},
                       [("send_msg", FAR_PUBLISHER, "leader_change", "ra_event")])


def test_a_noconnection_gives_credit_back_before_returning_uncapped() -> None:
    credit = {}
    for v, d in drivers(delivery_limit=0).items():
        far = pid(20, N2)
        key = consume(d, far, 2)
        d.enqueue(P1, 1, b"m1")
        d.enqueue(P1, 2, b"m2")
        d.apply(("down", far, "noconnection"))  # both over the limit: dead-lettered
        credit[v] = d.state.consumers[key].credit
    assert credit == {2: 4, 7: 2}


def test_purge_collects_garbage_and_releases_the_log_without_checkpoints() -> None:
    effects = {}
    for v, d in drivers().items():
        d.enqueue(P1, 1, b"m")
        effects[v] = d.apply(make_purge())
    reply2, effects2 = effects[2]
    assert reply2 == ("purge", 1)
    assert effects2[0] == "garbage_collection"
    assert effects2[1][:2] == ("release_cursor", 2)
    assert effects[7] == (("purge", 1), [("aux", "force_checkpoint"), "garbage_collection"])


def test_release_cursors_are_stored_every_interval_and_emitted_as_the_queue_drains() -> None:
    d = Driver(machine_version=2, release_cursor_interval=4)
    key = consume(d, C1, 100)
    for n in range(6):
        _, effects = d.enqueue(P1, n + 1, b"m")
        assert not [e for e in effects if e[0] == "release_cursor"]
    assert d.state.release_cursors is not None
    [(_, cursor_idx, dehydrated)] = d.state.release_cursors
    assert cursor_idx == 5 and dehydrated.enqueue_count == 0
    assert len(dehydrated.ra_indexes) == 0 and dehydrated.messages_total == 4
    _, effects = d.apply(make_settle(key, [0, 1, 2]))
    assert [e for e in effects if e[0] == "release_cursor"] == []  # idx 5 still live
    _, effects = d.apply(make_settle(key, [3]))
    assert [e[:2] for e in effects if e[0] == "release_cursor"] == [("release_cursor", 5)]
    _, effects = d.apply(make_settle(key, [4, 5]))
    assert [e[:2] for e in effects if e[0] == "release_cursor"] == [("release_cursor", 10)]
    d7 = Driver(machine_version=7, release_cursor_interval=4)
    key7 = consume(d7, C1, 100)
    d7.enqueue(P1, 1, b"m")
    assert [e for e in d7.apply(make_settle(key7, [0]))[1] if e[0] == "release_cursor"] == []


def test_the_aux_takes_no_checkpoints_for_machine_2() -> None:
    effects = {}
    for v, d in drivers().items():
        for n in range(40):
            d.enqueue(P1, n + 1, b"m")
        aux = d.machine.init_aux("q1")
        aux.last_checkpoint = type(aux.last_checkpoint)(index=0, timestamp=-10_000)
        ra_aux = FakeRaAux(d)
        effects[v] = (d.machine.handle_aux("follower", "cast", "eval", aux, ra_aux)[3]
                      + d.machine.handle_aux("follower", "cast", "tick", aux, ra_aux)[3])
    assert effects[2] == []
    assert ("release_cursor", 0) in effects[7]


def test_the_tick_hands_the_broker_a_metrics_tuple() -> None:
    ticks = {}
    for v, d in drivers().items():
        key = consume(d, C1, 1)
        d.enqueue(P1, 1, b"ab")
        d.enqueue(P1, 2, b"abc")
        assert key is not None
        ticks[v] = d.machine.tick(5000, d.state)
    nodes = [P1.node]
    assert ticks[2] == [("mod_call", "rabbit_quorum_queue", "handle_tick",
                         [QNAME, ("q1", 1, 1, 2, 1, 3, 2, 0), nodes])]
    assert ticks[7][0][0] == "aux" and ticks[7][0][1][0] == "handle_tick"


@pytest.mark.parametrize("ra_state", ["leader", "follower", "eol"])
def test_state_changes_reserve_file_handles(ra_state: str) -> None:
    effects = {}
    for v, d in drivers().items():
        d.enqueue(P1, 1, b"m")
        effects[v] = d.machine.state_enter(ra_state, d.state)
    fh = {"leader": ("file_handle_leader_reservation", [QNAME]),
          "follower": ("file_handle_other_reservation", []),
          "eol": ("file_handle_release_reservation", [])}[ra_state]
    assert ("mod_call", "rabbit_quorum_queue", *fh) in effects[2]
    assert not [e for e in effects[7] if e[0] == "mod_call" and "file_handle" in e[2]]
    if ra_state == "leader":
        assert effects[2] == [("timer", "expire_msgs", "infinity"),
                              ("monitor", "process", P1),
                              ("send_msg", P1, "leader_change", "ra_event"),
                              ("monitor", "node", P1.node),
                              ("mod_call", "rabbit_quorum_queue", *fh)]


def test_converting_a_machine_2_state_is_refused() -> None:
    d = Driver(machine_version=2)
    with pytest.raises(NotImplementedError):
        d.apply(("machine_version", 2, 7))


def test_an_enqueued_dead_letter_starts_counting_afresh() -> None:
    headers = {}
    for v, d in drivers().items():
        d.enqueue(P1, 1, BasicMessage(b"m", annotations={"delivery_count": 3}))
        ready = d.state.messages.get()
        assert ready is not None
        headers[v] = msg_header(ready)
    assert headers[2] == 1
    assert headers[7] == {"size": 1, "delivery_count": 3}
