"""``{machine_version, 7, 8}``: a machine-7 state becomes the machine-8 state.

Every message is kept: ready ones move to their level (high to 9, normal to 4,
each in order), returned and checked-out ones stay where they are, and the
consumers get machine 8's fields. The property test runs the same commands on
both versions, where their semantics agree (default priority, no delivery
limit, no node failures, one clock), and checks that converting the machine-7
state gives the machine-8 one.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from fifo import (
    RabbitFifo,
    make_checkout,
    make_discard,
    make_return,
    make_settle,
)
from fifo.fifo_q import FifoQ
from fifo.mc import BasicMessage
from fifo.msg import msg_idx
from fifo.pq import PriorityQ
from fifo.records import RabbitFifoState

from .helpers import Driver, P

PUBLISHERS = [P("n1", 1), P("n2", 2)]
CONSUMERS = [P("n1", 10), P("n2", 11)]
LOCK = 1000 + 1_800_000  # the drivers' clock plus the default consumer timeout


def upgrade(d: Driver) -> tuple[Any, list[Any]]:
    """Switch `d` to machine 8 the way Ra does: the new module applies the command."""
    d.machine = RabbitFifo(8)
    return d.apply(("machine_version", 7, 8))


class TestConversion:
    def test_every_message_is_kept_in_its_place(self) -> None:
        d = Driver(machine_version=7)
        for seq, p in enumerate([9, None, 7, 0, 9, 3], start=1):
            d.enqueue(PUBLISHERS[0], seq, BasicMessage(f"m{seq}".encode(), priority=p))
        d.apply(make_checkout(("ct", CONSUMERS[0]), ("auto", ("simple_prefetch", 2)), {}))
        key = d.index
        d.apply(make_return(key, [0]))  # m1 back to the returns, m3 then checked out
        held = dict(d.state.consumers[key].checked_out)
        returns = list(d.state.returns)
        total = d.state.messages_total
        assert isinstance(d.state.messages, FifoQ)
        hi, no = list(d.state.messages.hi), list(d.state.messages.no)

        reply, effects = upgrade(d)

        s = d.state
        assert (reply, effects) == ("ok", [("aux", ("dlx", "setup"))])
        assert isinstance(s.messages, PriorityQ)
        assert s.messages.buckets() == {4: no, 9: hi}
        assert list(s.returns) == returns
        assert s.consumers[key].checked_out == held
        assert s.messages_total == total
        assert s.consumers[key].lock_expirations == dict.fromkeys(held, LOCK)
        assert s.consumers[key].cfg.timeout == 1_800_000
        assert s.next_consumer_timeout == LOCK
        assert (s.cfg.consumer_disconnected_timeout, s.cfg.delayed_retry) == (60_000, "disabled")

    def test_a_suspected_consumer_becomes_suspected_while_up(self) -> None:
        d = Driver(machine_version=7)
        d.apply(make_checkout(("ct", CONSUMERS[1]), ("auto", ("simple_prefetch", 2)), {}))
        d.apply(("down", CONSUMERS[1], "noconnection"))
        assert d.state.consumers[1].status == "suspected_down"
        upgrade(d)
        status: Any = d.state.consumers[1].status
        assert status == ("suspected_down", "up")

    def test_converted_queue_serves_strictly_by_priority(self) -> None:
        d = Driver(machine_version=7)
        for seq, p in enumerate([None, 9, None, 9], start=1):
            d.enqueue(PUBLISHERS[0], seq, BasicMessage(f"m{seq}".encode(), priority=p))
        upgrade(d)
        d.apply(make_checkout(("ct", CONSUMERS[0]), ("auto", ("simple_prefetch", 9)), {}))
        held = d.state.consumers[d.index].checked_out.values()
        assert [msg_idx(m) for m in held] == [2, 4, 1, 3]


# --- property: conversion commutes with the commands where the versions agree ---------------

publish = st.tuples(st.just("publish"), st.sampled_from(PUBLISHERS),
                    st.sampled_from([None, 4]), st.binary(max_size=8))
consume = st.tuples(st.just("consume"), st.sampled_from(CONSUMERS), st.integers(1, 3))
settle = st.tuples(st.sampled_from(["settle", "return", "discard"]),
                   st.sampled_from(CONSUMERS), st.integers(0, 6))
cancel = st.tuples(st.sampled_from(["cancel", "remove", "down"]), st.sampled_from(CONSUMERS))
commands = st.lists(st.one_of(publish, publish, consume, settle, settle, cancel), max_size=30)


def run(d: Driver, cmds: list[tuple[Any, ...]]) -> None:
    seqs = dict.fromkeys(PUBLISHERS, 1)
    keys: dict[Any, int] = {}
    for cmd in cmds:
        match cmd:
            case ("publish", p, prio, body):
                d.enqueue(p, seqs[p], BasicMessage(body, priority=prio))
                seqs[p] += 1
            case ("consume", c, prefetch):
                d.apply(make_checkout(("ct", c), ("auto", ("simple_prefetch", prefetch)), {}))
                keys.setdefault(c, d.index)
            case ("settle" | "return" | "discard" as op, c, msg_id) if c in keys:
                make = {"settle": make_settle, "return": make_return,
                        "discard": make_discard}[op]
                d.apply(make(keys[c], [msg_id]))
            case ("cancel" | "remove" as op, c) if c in keys:
                d.apply(make_checkout(("ct", c), op, {}))
            case ("down", c):
                d.apply(("down", c, "normal"))


def comparable(s: RabbitFifoState) -> RabbitFifoState:
    """The state without the one field the versions set differently on purpose: a
    converted state always arms the consumer timeout (at conversion time + 30 min)."""
    return replace(s, next_consumer_timeout=None, last_command_time=0)


@settings(max_examples=150, deadline=None)
@given(commands)
def test_converting_a_v7_state_equals_running_v8(cmds: list[tuple[Any, ...]]) -> None:
    v7 = Driver(machine_version=7, dead_letter_handler=("at_most_once", ("m", "f", [])))
    v8 = Driver(machine_version=8, dead_letter_handler=("at_most_once", ("m", "f", [])))
    run(v7, cmds)
    run(v8, cmds)
    upgrade(v7)
    v8.apply(("garbage_collection",))  # the same number of log entries on both
    assert comparable(v7.state) == comparable(v8.state)
    assert v7.state.next_consumer_timeout == LOCK
    assert v8.state.next_consumer_timeout in (None, LOCK)
